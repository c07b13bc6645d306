"""Arrays on huge pages, for buffers that go through MPI often.

Note [Huge pages]: between two processes of one node, MPICH and Open MPI
moved a message of 1-4 MiB two to three times faster between buffers on
2 MiB pages than between buffers on 4 KiB pages. Here, at p = 2, one
MPI_Sendrecv each way (median of 9 rounds of 10; 4 KiB pages -> 2 MiB
pages):

    MPICH     1 MiB  95 -> 33 us   2 MiB 249 -> 75 us   4 MiB 375 -> 160 us
    Open MPI  1 MiB  88 -> 31 us   2 MiB 204 -> 75 us   4 MiB 235 -> 153 us

and a float32 allreduce (MPICH, median of 9 rounds of 20; pycoll's
"auto", then native MPI_Allreduce):

    64 KiB   pycoll  9.9 ->  9.1 us   native  16.0 -> 12.2 us
    256 KiB  pycoll 26.7 -> 24.9 us   native  40.6 -> 25.3 us
    1 MiB    pycoll 104  ->  51 us    native   140 ->   86 us

At 16 MiB (as fast as memory either way) the page size changed nothing.
The cost is in the sender's pages: the receiver copies a large message
straight out of the sender's memory (Linux's cross-memory attach,
process_vm_readv: MPICH's CMA path, Open MPI's smsc/cma), and the kernel
pins the sender's pages for it one page at a time, 512 pins per 2 MiB of
4 KiB pages against one for a huge page. With the attach turned off the
page size stopped mattering, and every 1-4 MiB message took 2-3x as long
(bench/NOTES.md, "Why the sender's pages: the receiver pins them").
numpy asks Linux for huge pages (madvise MADV_HUGEPAGE) only for arrays
of 4 MiB and more, and gets them only for the 2 MiB-aligned stretches
inside each array; where transparent huge pages are in "madvise" mode, as
here, nothing else gets them. So a float32 vector of 1M elements (4 MiB)
moved faster per byte than a bfloat16 one of the same count (2 MiB),
whatever the algorithm.

``empty`` places an array of ``HUGE_FROM`` bytes or more at the start of a
2 MiB page of an anonymous private mapping advised MADV_HUGEPAGE, so it
holds whole 2 MiB pages (a 256 KiB array takes 2 MiB of memory); smaller
arrays, and systems without the advice, get ``numpy.empty``. pycoll uses
it for the buffers it keeps (the communicator's scratch, a
FusionManager's buckets), and callers can for theirs: as ``out=``, or as
the arrays they reduce every step. A result pycoll makes for a call
without ``out=`` stays a ``numpy.empty``: a new mapping per call would pay
its page faults every call, where numpy's allocator reuses memory.
"""
from __future__ import annotations

import mmap
import math
import operator
import sys

import numpy as np

from pycoll._dtypes import numpy_dtype

HUGE_PAGE = 2 << 20
# The smallest array placed on huge pages: from here native MPI gains
# (Note [Huge pages]), and a smaller array would pay a whole 2 MiB page
# for little.
HUGE_FROM = 256 << 10
_ADVICE = getattr(mmap, "MADV_HUGEPAGE", None)
_NO_ADVICE = getattr(mmap, "MADV_NOHUGEPAGE", None)
_PRIVATE = getattr(mmap, "MAP_PRIVATE", None)
_ANONYMOUS = getattr(mmap, "MAP_ANONYMOUS", None)


def empty(shape, dtype=float) -> np.ndarray:
    """An uninitialised C-contiguous array, as ``numpy.empty(shape,
    dtype)``, on huge pages when it is ``HUGE_FROM`` bytes (256 KiB) or
    larger and the system takes the advice (Note [Huge pages]).

    Every rank allocates its own; the memory is freed with the last view
    of it::

        out = pycoll.empty(x.shape, x.dtype)      # once
        pycoll.allreduce(x, out=out)              # every step
    """
    dtype, shape, nbytes = _layout(shape, dtype)
    if nbytes is None or nbytes < HUGE_FROM or dtype.hasobject or _ADVICE is None \
            or _PRIVATE is None or _ANONYMOUS is None:
        return np.empty(shape, dtype)       # (object references cannot live in a mapping)
    # Room for the array from the first 2 MiB boundary of the mapping on.
    return _mapped(shape, dtype, nbytes, -(-nbytes // HUGE_PAGE) * HUGE_PAGE + HUGE_PAGE,
                   HUGE_PAGE, _ADVICE)


def empty_small_pages(shape, dtype=float) -> np.ndarray:
    """An uninitialised array on 4 KiB pages whatever its size, in a
    mapping of its own advised MADV_NOHUGEPAGE (the benchmark's ``-M
    small``: every buffer on the same pages, whatever the process
    allocated before); ``numpy.empty`` where the advice is not at hand."""
    dtype, shape, nbytes = _layout(shape, dtype)
    if nbytes is None or dtype.hasobject or _NO_ADVICE is None or _PRIVATE is None \
            or _ANONYMOUS is None:
        return np.empty(shape, dtype)
    return _mapped(shape, dtype, nbytes, max(nbytes, 1), mmap.PAGESIZE, _NO_ADVICE)


def _layout(shape, dtype) -> tuple:
    """(dtype, shape as a tuple of ints, bytes); bytes None where numpy.empty
    should decide: a shape that is not one (its TypeError), negative
    dimensions or more bytes than an array can hold (its ValueError)."""
    dtype = numpy_dtype(dtype)
    try:
        shape = (operator.index(shape),)
    except TypeError:
        try:
            shape = tuple(map(operator.index, shape))
        except TypeError:
            return dtype, shape, None
    nbytes = math.prod(shape) * dtype.itemsize
    if min(shape, default=0) < 0 or nbytes > sys.maxsize:
        return dtype, shape, None
    return dtype, shape, nbytes


def _mapped(shape, dtype, nbytes: int, length: int, align: int, advice: int) -> np.ndarray:
    """The array at the first *align* boundary of a new private anonymous
    mapping of *length* bytes, advised *advice* before anything touches it."""
    assert _PRIVATE is not None and _ANONYMOUS is not None     # (empty() checked both)
    region = mmap.mmap(-1, length, flags=_PRIVATE | _ANONYMOUS)
    try:
        region.madvise(advice)
    except OSError:
        pass                                # no transparent huge pages: 4 KiB pages anyway
    raw = np.frombuffer(region, np.uint8)
    start = -raw.ctypes.data % align
    return raw[start:start + nbytes].view(dtype).reshape(shape)
