# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
# cython: embedsignature=True
"""Point-to-point MPI calls from C, with no mpi.h at build time.

At small sizes the Python around an MPI call is most of its cost: mpi4py's
``Sendrecv`` spends about 0.6 us parsing its arguments, as long as the
message itself takes with Open MPI. This module calls ``MPI_Send``,
``MPI_Recv`` and ``MPI_Sendrecv`` directly, ``MPI_Isend``,
``MPI_Irecv`` and ``MPI_Wait`` for a sendrecv that copies meanwhile,
``MPI_Test`` and ``MPI_Cancel`` for a lane call with a deadline (Note [Lane
deadlines]), and ``MPI_Get_count`` for the length of a broadcast header it
forwards.

pycoll is not built against any one MPI: mpi4py chooses MPICH or Open MPI at
run time, and so must pycoll. So the functions are looked up by name in the
library mpi4py has already loaded (``ctypes`` reopens it by soname with
RTLD_NOLOAD), and called with handles taken from mpi4py objects:

- An MPI handle is an ``int`` in MPICH and its derivatives and a pointer in
  Open MPI. Both are passed as ``intptr_t``: the LP64 calling conventions
  (x86-64 System V, AArch64) pass either in a full register, and a callee
  that declares ``int`` reads the low 32 bits.
- ``MPI_STATUS_IGNORE`` differs between the libraries, so statuses are
  written into a 64-byte scratch area, larger than either ``MPI_Status``.

``Transport(comm)`` checks all of this before it is used: the rank
``MPI_Comm_rank`` reports, the size of ``MPI_BYTE``, and one byte sent to
itself must agree with mpi4py, or construction raises and pycoll keeps
mpi4py's calls (Channel, pycoll/_p2p.py). ``PYCOLL_TRANSPORT=mpi4py``
forces the latter.

``Lane`` is the small-message lane of an allreduce or reduce plan: the
algorithm's schedule (pycoll/algorithms/_schedule.py) interpreted in C, with
these calls and the reduction kernels, when the whole vector is one message;
``ScanLane`` a scan's, likewise; ``ReduceScatterLane`` the ring
reduce-scatter's steps, when every block is;
``BroadcastLane`` a broadcast's tree edges, header and data; ``StepLane``
the messages and copies of a gather, allgather, alltoall or scatter
(``ScatterRoot`` and ``ScatterReceiver`` add scatter's header).
``allreduce``, ``reduce``, ``reduce_scatter``, ``scan``, ``broadcast``,
``gather``, ``allgather``, ``alltoall`` and ``scatter`` are the entries every
such call tries first;
they answer None (``allreduce``, ``reduce_scatter``) or NOT_TAKEN (the
others, whose result may be None) whenever the call is not the plain case
(no plan yet, non-contiguous input, an out the Python path must check or
write back), and the Python path takes the call. Either path sends the
same messages with the same tags, so ranks taking different paths in one
call still meet.
"""

from libc.stdint cimport int64_t, intptr_t, uintptr_t
from libc.string cimport memcmp, memcpy, memset
from posix.time cimport CLOCK_MONOTONIC, clock_gettime, nanosleep, timespec
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE, PyBUF_WRITABLE
from cpython.pythread cimport PyThread_get_thread_ident

import logging

import numpy as np

from pycoll._memory import empty
from pycoll.errors import CollectiveTimeout
from pycoll._kernels.reduce cimport (convert_buffer, pycoll_binary_loop, itemsize_of, loop_for,
                                     scale_buffer)

cdef extern from "kernels.h" nogil:
    int pycoll_pages_ready()
    long long pycoll_huge_bytes(const void *buf, size_t n)
    void pycoll_stream_copy(void *dst, const void *src, size_t n)
    void pycoll_stream_fence()

ctypedef intptr_t handle_t

ctypedef int (*send_fn)(const void *buf, int count, handle_t dtype, int dest, int tag,
                        handle_t comm) noexcept nogil
ctypedef int (*recv_fn)(void *buf, int count, handle_t dtype, int source, int tag,
                        handle_t comm, void *status) noexcept nogil
ctypedef int (*sendrecv_fn)(const void *sbuf, int scount, handle_t stype, int dest, int stag,
                            void *rbuf, int rcount, handle_t rtype, int source, int rtag,
                            handle_t comm, void *status) noexcept nogil
# Nonblocking calls write an MPI_Request (an int in MPICH, a pointer in Open
# MPI) through *request*: pycoll passes an intptr_t that starts at 0, which
# holds either (little-endian, as LP64 x86-64 and AArch64 Linux are).
ctypedef int (*isend_fn)(const void *buf, int count, handle_t dtype, int dest, int tag,
                         handle_t comm, void *request) noexcept nogil
ctypedef int (*irecv_fn)(void *buf, int count, handle_t dtype, int source, int tag,
                         handle_t comm, void *request) noexcept nogil
ctypedef int (*wait_fn)(void *request, void *status) noexcept nogil
ctypedef int (*test_fn)(void *request, int *flag, void *status) noexcept nogil
ctypedef int (*cancel_fn)(void *request) noexcept nogil
ctypedef int (*comm_rank_fn)(handle_t comm, int *rank) noexcept nogil
ctypedef int (*type_size_fn)(handle_t dtype, int *size) noexcept nogil
ctypedef int (*get_count_fn)(const void *status, handle_t dtype, int *count) noexcept nogil

cdef send_fn c_send = NULL
cdef recv_fn c_recv = NULL
cdef sendrecv_fn c_sendrecv = NULL
cdef isend_fn c_isend = NULL
cdef irecv_fn c_irecv = NULL
cdef wait_fn c_wait = NULL
cdef test_fn c_test = NULL
cdef cancel_fn c_cancel = NULL
cdef comm_rank_fn c_comm_rank = NULL
cdef type_size_fn c_type_size = NULL
cdef get_count_fn c_get_count = NULL
cdef handle_t BYTE = 0
cdef bint LOADED = False


class TransportError(RuntimeError):
    """The C calls cannot be used with this MPI library."""


def _handle(obj) -> int:
    """An mpi4py object's handle as a signed intptr_t value (mpi4py reports
    an MPICH int handle sign-extended and read as unsigned)."""
    h = obj.handle
    return h - (1 << 64) if h >= (1 << 63) else h


def LOADED_FLAG() -> bool:
    """Whether load() has run."""
    return LOADED


def load(functions: dict, byte_handle) -> None:
    """Install the addresses of the MPI functions (name -> address)."""
    global c_send, c_recv, c_sendrecv, c_isend, c_irecv, c_wait, c_comm_rank, c_type_size
    global c_get_count, c_test, c_cancel
    global BYTE, LOADED
    c_send = <send_fn><uintptr_t>functions["MPI_Send"]
    c_recv = <recv_fn><uintptr_t>functions["MPI_Recv"]
    c_sendrecv = <sendrecv_fn><uintptr_t>functions["MPI_Sendrecv"]
    c_isend = <isend_fn><uintptr_t>functions["MPI_Isend"]
    c_irecv = <irecv_fn><uintptr_t>functions["MPI_Irecv"]
    c_wait = <wait_fn><uintptr_t>functions["MPI_Wait"]
    c_test = <test_fn><uintptr_t>functions["MPI_Test"]
    c_cancel = <cancel_fn><uintptr_t>functions["MPI_Cancel"]
    c_comm_rank = <comm_rank_fn><uintptr_t>functions["MPI_Comm_rank"]
    c_type_size = <type_size_fn><uintptr_t>functions["MPI_Type_size"]
    c_get_count = <get_count_fn><uintptr_t>functions["MPI_Get_count"]
    BYTE = byte_handle
    LOADED = True


cdef int check(int rc, str what) except -1:
    if rc != 0:
        raise TransportError(f"{what} returned MPI error {rc} ({error_string(rc)})")
    return 0


def error_string(int rc) -> str:
    """MPI's own words for error code *rc* (its first line), through mpi4py,
    which the transport has loaded already."""
    try:
        from mpi4py import MPI
        text = MPI.Get_error_string(rc).strip()
    except Exception:                   # (an error inside MPI's error reporting)
        return "no description from MPI"
    first = text.splitlines()[0].split(", error stack")[0].rstrip(",:; ") if text else ""
    return first or "no description from MPI"


cdef class Transport:
    """Blocking sends and receives of byte buffers on one communicator."""

    cdef handle_t comm
    cdef char status[64]

    def __cinit__(self, comm):
        if not LOADED:
            raise TransportError("the MPI functions are not loaded")
        self.comm = _handle(comm)
        cdef int rank = -1, size = -1
        check(c_comm_rank(self.comm, &rank), "MPI_Comm_rank")
        if rank != comm.Get_rank():
            raise TransportError(f"MPI_Comm_rank says {rank}, mpi4py says {comm.Get_rank()}")
        check(c_type_size(BYTE, &size), "MPI_Type_size")
        if size != 1:
            raise TransportError(f"MPI_BYTE has size {size}")
        cdef char out = 42
        cdef char back[2]
        cdef int count = -1
        back[0] = 0
        check(c_sendrecv(&out, 1, BYTE, rank, 0, back, 2, BYTE, rank, 0, self.comm,
                         self.status), "MPI_Sendrecv")
        if back[0] != 42:
            raise TransportError("a byte sent to this rank came back changed")
        check(c_get_count(self.status, BYTE, &count), "MPI_Get_count")
        if count != 1:
            raise TransportError(f"MPI_Get_count says {count} bytes arrived, not 1")

    def send(self, buf, int dest, int tag):
        cdef Py_buffer b
        cdef int rc
        PyObject_GetBuffer(buf, &b, PyBUF_SIMPLE)
        try:
            with nogil:
                rc = c_send(b.buf, <int>b.len, BYTE, dest, tag, self.comm)
        finally:
            PyBuffer_Release(&b)
        check(rc, "MPI_Send")

    def recv(self, buf, int source, int tag):
        cdef Py_buffer b
        cdef int rc
        PyObject_GetBuffer(buf, &b, PyBUF_SIMPLE | PyBUF_WRITABLE)
        try:
            with nogil:
                rc = c_recv(b.buf, <int>b.len, BYTE, source, tag, self.comm, self.status)
        finally:
            PyBuffer_Release(&b)
        check(rc, "MPI_Recv")

    def sendrecv(self, sendbuf, int dest, recvbuf, int source, int tag):
        cdef Py_buffer s, r
        cdef int rc
        PyObject_GetBuffer(sendbuf, &s, PyBUF_SIMPLE)
        try:
            PyObject_GetBuffer(recvbuf, &r, PyBUF_SIMPLE | PyBUF_WRITABLE)
            try:
                with nogil:
                    rc = c_sendrecv(s.buf, <int>s.len, BYTE, dest, tag, r.buf, <int>r.len, BYTE,
                                    source, tag, self.comm, self.status)
            finally:
                PyBuffer_Release(&r)
        finally:
            PyBuffer_Release(&s)
        check(rc, "MPI_Sendrecv")

    def sendrecv_copy(self, sendbuf, int dest, recvbuf, int source, int tag, copy):
        """sendrecv, and memcpy *sendbuf* into *copy* (as long, apart from
        both) while the two messages are in flight: an allgather's first
        step in one C call (Channel.sendrecv_copying)."""
        cdef Py_buffer s, r, c
        cdef int rc = 0, rc2
        cdef intptr_t rreq = 0, sreq = 0
        PyObject_GetBuffer(sendbuf, &s, PyBUF_SIMPLE)
        try:
            PyObject_GetBuffer(recvbuf, &r, PyBUF_SIMPLE | PyBUF_WRITABLE)
            try:
                PyObject_GetBuffer(copy, &c, PyBUF_SIMPLE | PyBUF_WRITABLE)
                try:
                    if c.len != s.len:
                        raise ValueError(f"copy has {c.len} bytes, sendbuf {s.len}")
                    with nogil:
                        rc = c_irecv(r.buf, <int>r.len, BYTE, source, tag, self.comm, &rreq)
                        if rc == 0:
                            rc = c_isend(s.buf, <int>s.len, BYTE, dest, tag, self.comm, &sreq)
                            memcpy(c.buf, s.buf, s.len)
                            if rc == 0:
                                rc = c_wait(&sreq, self.status)
                            rc2 = c_wait(&rreq, self.status)
                            if rc == 0:
                                rc = rc2
                finally:
                    PyBuffer_Release(&c)
            finally:
                PyBuffer_Release(&r)
        finally:
            PyBuffer_Release(&s)
        check(rc, "MPI_Isend/MPI_Irecv/MPI_Wait")


# ---------------------------------------------------------------------------
# The small-message lane

cdef enum:
    WORD_BYTES = 64     # the header word of broadcast and scatter (_header.py)
    MAX_CHILDREN = 64   # a rank's children in a binomial tree: up to log2(p)

cdef enum:
    SEND = 0            # the step kinds of pycoll/algorithms/_schedule.py
    RECV = 1
    RECV_REDUCE = 2
    EXCHANGE = 3
    SEED = 4            # a scan's (ScanLane)
    MAX_STEPS = 128

cdef enum:
    RS_SEND_PARTIAL = 1 # the flags of a reduce_scatter step (_schedule.py)
    RS_MINE_PARTIAL = 2
    RS_INTO_RESULT = 4
    RS_NO_REDUCE = 8
    RS_LEFT = 16
    RS_COPY = 32


cdef inline bint reduces_in_place(int flags) noexcept nogil:
    """A reduce_scatter step that reduces the partial sums' range into
    itself: what arrives must land in the "lane" scratch first."""
    return flags & RS_MINE_PARTIAL and not flags & (RS_INTO_RESULT | RS_NO_REDUCE)


cdef object ndarray = np.ndarray


cdef inline bint in_turn(object comm) except -1:
    """Whether a call may run now (Note [Issue order] in _async.py): no
    call is queued or running on the communicator, or this thread is the
    one running its queued calls, this call among them (Note [Async
    lanes] in api.py)."""
    progress = comm._progress
    return not progress._pending or progress._runner == PyThread_get_thread_ident()


# What Lane.call answers for a call the Python path must take.
NOT_TAKEN = object()
# The most steps a lane runs (a schedule's, or a ring's p - 1).
MAX_LANE_STEPS = MAX_STEPS


cdef object lane_output(out, shape, dtype):
    """A lane's result array: out, or a new one where out is None;
    NOT_TAKEN for an out the Python path must check or write back."""
    if out is None:
        return np.empty(shape, dtype)
    if type(out) is ndarray and out.dtype == dtype and out.shape == shape:
        return out
    return NOT_TAKEN

cdef struct Operands:
    # A lane's two caller buffers, held for one call (take_operands).
    Py_buffer x
    Py_buffer out
    char *xp                # NULL when x is not held
    char *outp              # NULL when out is not held
    bint have_x
    bint have_out


cdef int take_operands(Operands *o, x, bint with_x, Py_ssize_t xbytes, data,
                       Py_ssize_t align, Py_ssize_t same_at) except -1:
    """Hold x (if *with_x*: a scatter's receiver ignores it) and *data*,
    the buffer the lane writes (unless None): 1, or 0 with nothing held
    where the Python path must take the call, which then sends nothing.
    x must have *xbytes* bytes; both must be C-contiguous and
    *align*-aligned, and data writable and clear of x, or (*same_at* >= 0)
    x must be data's bytes from that offset on: an allreduce in place
    (0), an allgather's or gather's x in its own block of out (Note [Own
    blocks]). Release with release_operands."""
    o.xp = o.outp = NULL
    o.have_x = o.have_out = False
    try:
        if with_x:
            try:
                PyObject_GetBuffer(x, &o.x, PyBUF_SIMPLE)
            except (BufferError, ValueError, TypeError):
                return 0                # not C-contiguous: the Python path packs it
            o.have_x = True
            o.xp = <char *>o.x.buf
            if o.x.len != xbytes or <uintptr_t>o.xp % align:
                release_operands(o)
                return 0
        if data is not None:
            try:
                PyObject_GetBuffer(data, &o.out, PyBUF_SIMPLE | PyBUF_WRITABLE)
            except (BufferError, ValueError, TypeError):
                release_operands(o)
                return 0                # read-only or strided out: checked by Python
            o.have_out = True
            o.outp = <char *>o.out.buf
            if <uintptr_t>o.outp % align or (
                    o.have_x and o.outp < o.xp + xbytes and o.xp < o.outp + o.out.len
                    and not (same_at >= 0 and o.xp == o.outp + same_at)):
                release_operands(o)
                return 0                # out overlaps x: the Python path copies
    except BaseException:
        release_operands(o)
        raise
    return 1


cdef void release_operands(Operands *o) noexcept:
    if o.have_out:
        PyBuffer_Release(&o.out)
        o.have_out = False
    if o.have_x:
        PyBuffer_Release(&o.x)
        o.have_x = False
    o.xp = o.outp = NULL


# The scratch slots the lanes take from C (CallResources.borrow).
cdef enum:
    SLOT_LANE = 0               # what arrives before it is reduced in place
    SLOT_OUTPUT = 1             # a reduce_scatter's partial sums
    SLOT_WORK = 2               # a StepLane's work buffer; a widened ReduceScatterLane's
                                # float32 x and result (Note [Widened lanes])
    SLOT_STAGE = 3              # a send's copy on huge pages (Note [Staging sends])
    C_SLOTS = 4
SLOT_NAMES = ("lane", "output", "work", "stage")

# Note [Staging sends]
# ~~~~~~~~~~~~~~~~~~~~
# Between two ranks of this node, both MPI libraries move a large message
# with one copy that the receiver makes out of the sender's pages, and it
# costs several times more per byte when those are 4 KiB pages (Note [Huge
# pages] in pycoll/_memory.py); the receiver's own pages hardly matter.
# One MPI_Sendrecv each way at p = 2 between buffers on 4 KiB pages, as it
# is -> with the send first copied into a buffer on huge pages (the copy
# included), and pycoll's float32 allreduce of a numpy array with staging
# off -> on (`mpiexec -n 2 python bench/staging.py`, one launch each, us):
#
#              MPICH                                Open MPI
#              sendrecv     ring        rec. dbl.   sendrecv     ring        rec. dbl.
#     128 KiB    12 -> 15     24 -> 24    13 -> 14    10 -> 13     21 -> 21    12 -> 12
#     256 KiB    19 -> 13     33 -> 34    25 -> 17    18 -> 13     31 -> 33    23 -> 17
#     1 MiB      72 -> 47     98 -> 72    98 -> 76    72 -> 45     93 -> 65    97 -> 68
#     4 MiB     424 -> 236   278 -> 223  258 -> 264  375 -> 217   245 -> 192  155 -> 167
#     8 MiB    1151 -> 1014  530 -> 529  620 -> 613 1186 -> 880   511 -> 518  634 -> 610
#     16 MiB   2494 -> 2701 1293 -> 1252 2176 -> 2108 2473 -> 2531 1190 -> 1206 2027 -> 2220
#
# (The ring sends half the vector per step, so its 256 KiB call sends
# 128 KiB messages; recursive doubling's 4 MiB numpy input is half on huge
# pages and goes as it is.)
#
# So a send of STAGE_FROM to STAGE_UP_TO bytes from a buffer mostly on
# small pages (a numpy array under 4 MiB, usually) may be copied into the
# communicator's "stage" scratch, on huge pages, and sent from there; how
# (as it is, memcpy, non-temporal copy) each lane chooses by timing itself
# (Note [Choosing the way]). The kernel tells which pages are huge: one
# PAGEMAP_SCAN ioctl on /proc/self/pagemap (Linux 6.7 and later; a few us
# for a range of this size). Where it cannot tell, nothing is staged.
# Below STAGE_FROM the page size makes no difference (MPI's eager copies)
# and the copy is pure cost; from 16 MiB the transfer is as slow as memory
# either way. A 4 or 8 MiB numpy array is already half or more on huge
# pages (numpy advises them) and goes as it is. The bytes sent are the
# same, so results do not change.
# Every lane stages its sends, one at a time (a broadcast's data once for
# all its children); the general path stages its blocking sends only, as
# its concurrent ones (Channel.isend) may leave from several buffers at
# once and there is one stage. For the data-movement lanes at p = 2, a
# 1 MiB numpy array (allgather, gather: 512 KiB from each rank), as is ->
# memcpy into the stage, us (bench/staging.py; MPICH, then Open MPI):
#
#     broadcast 73 -> 48, 73 -> 48    allgather 49 -> 36, 48 -> 35
#     gather    47 -> 25, 46 -> 23    scatter   45 -> 31, 42 -> 31
#     alltoall  49 -> 37, 49 -> 38
#
# The stage costs memory: up to STAGE_UP_TO bytes (whole 2 MiB pages) per
# communicator that has staged a send.
cdef enum:
    STAGE_FROM = 256 << 10
    STAGE_UP_TO = 8 << 20

# The ways a send worth staging may go (Note [Choosing the way]).
cdef enum:
    WAY_AS_IS = 0               # from the caller's buffer
    WAY_COPY = 1                # from a memcpy into the stage
    WAY_STREAM = 2              # from a copy with non-temporal stores
    NWAYS = 3
    WAY_AUTO = -1               # the mode: each lane times the ways and keeps the fastest
    TRIAL_CALLS = 2             # calls in a row that try one way (the first is not counted)
    SETTLE_CALLS = TRIAL_CALLS * NWAYS  # a lane's first calls: each way tried once
    EXPLORE_EVERY = 32          # then from every 32nd call, one of the three tried, in turn
WAYS = {"off": WAY_AS_IS, "copy": WAY_COPY, "stream": WAY_STREAM, "auto": WAY_AUTO}
EXPLORE = EXPLORE_EVERY
SETTLE = SETTLE_CALLS           # a lane's first calls, which try each way twice
cdef double EWMA = 0.25        # the weight of a call in its way's mean

# Note [Choosing the way]
# ~~~~~~~~~~~~~~~~~~~~~~~
# This host has two modes, each lasting minutes, and the way of sending
# that wins in one loses in the other. A 1 MiB MPI_Sendrecv at p = 2
# between numpy buffers on Open MPI, us, launches 45 s apart:
#
#                         as is   memcpy + send   non-temporal copy + send
#     fast mode (4)         76-83        47-57          102-108
#     slow mode (3)         85-89      165-169           68-69
#
# and the one-way send of a broadcast 71-75 / 40-44 / 63-68 against
# 80-82 / 156-158 / 63-66. In the slow mode a send out of a buffer just
# written with ordinary stores is slow, while one out of a buffer written
# long ago is not (24-26 us in both modes); non-temporal stores leave
# nothing in the writer's caches. That matches the two ranks sharing a
# last-level cache in the fast mode and not in the slow one, which this
# guest cannot see. The modes also depend on size: in one launch a 1 MiB
# memcpy + send was fast (49 us) and a 4 MiB one slow (667 us, against
# 414 as is and 244 streamed). The first p = 2 report with staging
# (always memcpy, on 1e0cb8c) met the slow mode in three of its six
# broadcast launches: 162-180 us at 1 MiB against native's 107-116.
#
# So no way is right everywhere, and each lane chooses by timing itself:
# its first six calls take each of the three ways twice in a row, keeping
# each way's time; from then on every call takes the way with the lowest
# mean time (an exponential average of its calls), and every
# EXPLORE_EVERY-th call and the one after it take the next of the three
# in turn, whose time replaces that way's mean (or, for the way already
# chosen, moves it): so the choice follows the host from one mode to the
# other within a few explorations. Three things keep those times honest:
#
# - The first call after a change of way is not counted. It pays for the
#   change: on MPICH, recursive doubling's 256 KiB allreduce at p = 2 took
#   68 us as is right after copied calls, 36 us the call after, and 65 us
#   every copied call, so an exploration timed by its one call kept the
#   copy at twice the time.
# - Every rank explores the same way at the same call (the k-th
#   exploration takes way k mod 3), as every rank takes the same ways in
#   the first six calls. The messages are the same bytes whichever way
#   they leave, so ranks need not agree for the result; but an exchange
#   lasts as long as its slower side, and when each rank explored "the
#   other two" of its own choice, two ranks that had settled on different
#   ways only ever timed mixed pairs and stayed apart (the same allreduce,
#   one rank as is and the other copying: 54-66 us a call in all 20 rounds
#   of one launch, where in another both went as is from the third round
#   on, at 29-41).
# - A lane keeps the ways of its in-place calls apart from the others':
#   in place a call sends what the call before it wrote, which goes at
#   another speed (there, as is 74 us against the copy's 61-68 in place,
#   33 against 62 out of place).
#
# Together they took that allreduce out of place from 0.71-0.74x native
# MPICH's time to 0.39-0.41x, and from 0.81-0.93x native Open MPI's to
# 0.50-0.51x (bench/NOTES.md, "Staging: the first call after a change").
# The general path times each staged blocking send the same way, one
# WayChooser per plan (its sends out of place and in place alike).
# set_staging() fixes one way for the process (A/B measurements, tests).
# In the fast mode "auto" costs what its explorations cost: in two Open
# MPI launches of bench/staging.py (16 calls between explorations then)
# and one MPICH launch (32), 1 MiB, us, as is / memcpy / stream / auto:
#
#                       Open MPI                                   MPICH
#     allreduce ring    103 / 74 / 125 / 77   105 / 75 / 124 / 76   104 / 75 / 132 / 77
#     broadcast          74 / 48 /  67 / 51    76 / 50 /  66 / 52    75 / 49 /  71 / 50
#     gather             49 / 25 /  37 / 26    48 / 25 /  36 / 26    49 / 27 /  39 / 26
#
cdef int staging_mode = WAY_AUTO


def set_staging(str mode) -> str:
    """Fix how sends worth staging go, in this process: "off" (as they
    are), "copy", "stream" (non-temporal copy), or "auto" (each lane times
    the three, Note [Choosing the way]). The messages are the same bytes
    either way. Returns the previous mode."""
    global staging_mode
    if mode not in WAYS:
        raise ValueError(f"staging mode {mode!r}: expected one of {', '.join(WAYS)}")
    was = next(name for name, way in WAYS.items() if way == staging_mode)
    staging_mode = WAYS[mode]
    return was


cdef struct Ways:
    double mean[NWAYS]          # each way's mean call time (s); 0: not timed yet
    long calls
    int last                    # 1 + the way of the call before; 0: none yet


cdef struct Stage:
    char *ptr                   # the stage; NULL: every send goes as it is
    bint stream                 # fill it with non-temporal stores
    int way                     # the way this call takes; -1: nothing to time
    double started


cdef inline int best_way(Ways *w) noexcept nogil:
    """The way with the lowest mean time so far."""
    cdef int i, best = WAY_COPY
    for i in range(NWAYS):
        if w.mean[i] < w.mean[best]:
            best = i
    return best


cdef inline int pick_way(Ways *w) noexcept nogil:
    """The way of a lane's next call (Note [Choosing the way])."""
    if staging_mode != WAY_AUTO:
        return staging_mode
    if w.calls < SETTLE_CALLS:          # each way tried in turn
        return w.calls // TRIAL_CALLS
    if w.calls % EXPLORE_EVERY < TRIAL_CALLS:   # the same way on every rank
        return (w.calls // EXPLORE_EVERY) % NWAYS
    return best_way(w)


cdef inline void note_time(Ways *w, int way, double t) noexcept nogil:
    """A call of *way* took *t* seconds. A call that took another way than
    the one before it is not counted: the first call after a change pays
    for the change. In the first calls each way keeps its fastest; then
    the chosen way's mean moves toward each call's time, and a way tried
    in passing takes that call's time as it is (its old mean is stale: the
    host may have changed mode since)."""
    cdef bint settling = w.calls < SETTLE_CALLS, changed = w.last != way + 1
    w.calls += 1
    w.last = way + 1
    if changed:
        return
    if w.mean[way] == 0.0 or settling and t < w.mean[way]:
        w.mean[way] = t
    elif not settling:
        if way == best_way(w):
            w.mean[way] += EWMA * (t - w.mean[way])
        else:
            w.mean[way] = t


cdef inline void settle(Ways *w, Stage *st, int rc) noexcept nogil:
    """Time a lane's call when it took a way of its choosing."""
    if st.way >= 0 and rc == 0:
        note_time(w, st.way, monotonic() - st.started)


def _ways_chosen(seconds, int calls, int ranks=1) -> list:
    """The ways (names) a lane takes in *calls* calls in "auto" mode when
    each call of way i takes seconds(i, k) at call k (for tests). With
    *ranks* > 1, that many lanes call together, one per rank: seconds(ways,
    k) gets the tuple of their ways and gives each rank's time (a sequence)
    or one time for all, and each entry is the tuple of their ways."""
    cdef Ways[8] w
    cdef int k, i
    if not 1 <= ranks <= 8:
        raise ValueError(f"ranks={ranks}: expected 1 to 8")
    was = set_staging("auto")
    try:
        memset(w, 0, sizeof(w))
        chosen = []
        for k in range(calls):
            ways = tuple(pick_way(&w[i]) for i in range(ranks))
            t = seconds(ways, k) if ranks > 1 else seconds(ways[0], k)
            times = list(t) if hasattr(t, "__len__") else [t] * ranks
            for i in range(ranks):
                note_time(&w[i], ways[i], times[i])
            names = tuple(("off", "copy", "stream")[way] for way in ways)
            chosen.append(names if ranks > 1 else names[0])
        return chosen
    finally:
        set_staging(was)


cdef class StagedSends:
    """What a lane, or a general-path plan's WayChooser, keeps of its
    staged sends: the ways it has timed (Note [Choosing the way])."""

    cdef Ways ways[2]               # [0]: out of place; [1]: in place (Note [Choosing the way])

    cdef Ways *ways_for(self, Operands *o) noexcept:
        """The ways of calls like this one: an in-place call sends what the
        call before it wrote, which goes another speed each way."""
        return &self.ways[o.xp != NULL and o.xp == o.outp]

    @property
    def stage_ways(self) -> dict:
        """For tests and benchmarks: the calls timed so far and each way's
        mean time (s; 0: not timed yet), out of place and (under
        "in_place") in place."""
        return {**ways_dict(&self.ways[0]), "in_place": ways_dict(&self.ways[1])}


cdef dict ways_dict(Ways *w):
    return {"calls": w.calls, "off": w.mean[WAY_AS_IS], "copy": w.mean[WAY_COPY],
            "stream": w.mean[WAY_STREAM]}


cdef inline bint may_stage(buf):
    """Whether the general path's send of *buf* is one worth staging: a
    numpy array of STAGE_FROM to STAGE_UP_TO bytes, where the kernel can
    tell its pages (Note [Staging sends])."""
    return type(buf) is ndarray and STAGE_FROM <= buf.nbytes <= STAGE_UP_TO \
        and pycoll_pages_ready()


cdef inline const char *staged(const char *buf, Py_ssize_t n, Stage *st) noexcept nogil:
    """*buf*, or its copy in the stage (st.ptr: room for STAGE_UP_TO
    bytes, or NULL: stage nothing) when it is a send worth staging (Note
    [Staging sends])."""
    cdef long long huge
    if st.ptr == NULL or n < STAGE_FROM or n > STAGE_UP_TO:
        return buf
    huge = pycoll_huge_bytes(buf, n)
    if huge < 0 or 2 * huge >= n:
        return buf
    if st.stream:
        pycoll_stream_copy(st.ptr, buf, n)
        pycoll_stream_fence()
    else:
        memcpy(st.ptr, buf, n)
    return st.ptr


def huge_page_bytes(buf):
    """How many bytes of *buf* (a contiguous buffer) lie on huge pages, or
    None where the kernel cannot tell (Note [Staging sends])."""
    cdef Py_buffer b
    cdef long long huge
    PyObject_GetBuffer(buf, &b, PyBUF_SIMPLE)
    try:
        if not pycoll_pages_ready():
            return None
        huge = pycoll_huge_bytes(b.buf, b.len)
    finally:
        PyBuffer_Release(&b)
    return None if huge < 0 else huge


cdef class CallResources:
    """A communicator's tag counter and scratch buffers (Note [Tag
    discipline] in pycoll/_comm.py), kept in C so that a lane call takes
    its tag and buffers without a Python call (about 0.2 us of an 8-byte
    allreduce's 0.8 at p = 1). The general path takes them through
    next_tag() and scratch(), from the same counter and the same buffers.

    Scratch is one uint8 buffer per slot name, grown as needed (never
    shrunk). The same slot is never used by two live transfers of one
    call; its contents do not survive the call.
    """

    cdef int tag, tag_ub
    cdef dict buffers, views
    cdef list held              # the C slots' buffers, or None
    cdef char *ptr[C_SLOTS]
    cdef Py_ssize_t room[C_SLOTS]

    def __cinit__(self, int tag_ub):
        self.tag, self.tag_ub = 0, tag_ub
        self.buffers, self.views = {}, {}
        self.held = [None] * C_SLOTS

    @property
    def tags_taken(self) -> int:
        """The tags taken so far (mod tag_ub + 1): the next tag."""
        return self.tag

    cpdef int next_tag(self):
        """The tag of the next collective call (Note [Tag discipline])."""
        cdef int tag = self.tag
        self.tag = tag + 1 if tag < self.tag_ub else 0
        return tag

    def scratch(self, str slot, Py_ssize_t nbytes):
        """A uint8 view of *nbytes* of *slot*'s buffer."""
        view = self.views.get((slot, nbytes))
        if view is not None:
            return view
        buf = self.buffers.get(slot)
        if buf is None or buf.size < nbytes:
            buf = self.grow(slot, nbytes)
        if len(self.views) > 256:
            self.views.clear()
        view = self.views[(slot, nbytes)] = buf[:nbytes]
        return view

    cdef object grow(self, str slot, Py_ssize_t nbytes):
        cdef Py_buffer b
        buf = empty(max(nbytes, 64), np.uint8)    # Note [Huge pages] in pycoll/_memory.py
        self.buffers[slot] = buf
        self.views = {k: v for k, v in self.views.items() if k[0] != slot}
        if slot in SLOT_NAMES:
            i = SLOT_NAMES.index(slot)
            PyObject_GetBuffer(buf, &b, PyBUF_SIMPLE | PyBUF_WRITABLE)
            self.ptr[i], self.room[i] = <char *>b.buf, b.len
            PyBuffer_Release(&b)            # buf owns its memory; held keeps it
            self.held[i] = buf
        return buf

    cdef object borrow(self, int slot, Py_ssize_t nbytes, char **data):
        """*slot*'s buffer, at least *nbytes*, through *data*. The caller
        keeps the returned array while it uses *data*: it stays valid if
        the slot grows meanwhile."""
        if self.ptr[slot] == NULL or self.room[slot] < nbytes:
            self.grow(SLOT_NAMES[slot], nbytes)
        data[0] = self.ptr[slot]
        return self.held[slot]

    cdef object stage(self, Ways *ways, Py_ssize_t largest, Stage *st):
        """Set *st* for a lane's call whose sends are of up to *largest*
        bytes: the way it takes (pick_way; Note [Choosing the way]) and, for
        a copy, the "stage" slot (Note [Staging sends]). Returns the slot's
        buffer, which the caller keeps while it uses st.ptr, or None. Where
        no send of the call could be staged, or the way is fixed
        (set_staging), st.way is -1: nothing to time."""
        cdef int way
        st.ptr, st.stream, st.way = NULL, False, -1
        if staging_mode == WAY_AS_IS or largest < STAGE_FROM or not pycoll_pages_ready():
            return None
        way = pick_way(ways)
        if staging_mode == WAY_AUTO:        # a fixed way is not timed
            st.way, st.started = way, monotonic()
        if way == WAY_AS_IS:
            return None
        st.stream = way == WAY_STREAM
        return self.borrow(SLOT_STAGE, min(largest, <Py_ssize_t>STAGE_UP_TO), &st.ptr)

    def staged(self, buf, int way=WAY_COPY):
        """*buf*, or a copy of it in the "stage" scratch made *way* (the
        mode's way when set_staging fixed one) when it is a send worth
        staging (Note [Staging sends]). The copy is valid until the next
        staged send. The general path stages through a WayChooser."""
        cdef Py_buffer b
        cdef const char *source
        cdef Stage st
        if staging_mode != WAY_AUTO:
            way = staging_mode
        if way == WAY_AS_IS or not may_stage(buf):
            return buf
        try:
            PyObject_GetBuffer(buf, &b, PyBUF_SIMPLE)
        except (BufferError, ValueError, TypeError):
            return buf
        try:
            held = self.borrow(SLOT_STAGE, b.len, &st.ptr)
            st.stream = way == WAY_STREAM
            with nogil:
                source = staged(<const char *>b.buf, b.len, &st)
        finally:
            PyBuffer_Release(&b)
        return buf if source != st.ptr else self.scratch("stage", b.len)

    def clear(self) -> None:
        """Release every buffer (Communicator.free)."""
        self.buffers.clear()
        self.views.clear()
        self.held = [None] * C_SLOTS
        for i in range(C_SLOTS):
            self.ptr[i], self.room[i] = NULL, 0

cdef class WayChooser(StagedSends):
    """The ways of one general-path plan's staged sends (pycoll/_p2p.py's
    Channel), chosen as a lane chooses them (Note [Choosing the way]),
    each send timed on its own: staged(buf) before the send, done() once
    it has completed.

        sendbuf = ways.staged(sendbuf)      # buf, or its copy in the stage
        ...                                 # the blocking send of sendbuf
        ways.done()                         # times it, if a way was chosen
    """

    cdef CallResources calls
    cdef Stage st

    def __cinit__(self, CallResources calls):
        self.calls = calls
        self.st.way = -1

    def staged(self, buf):
        """*buf*, or its copy in the stage, the way this send takes."""
        cdef int way
        self.st.way = -1
        if staging_mode != WAY_AUTO:
            return self.calls.staged(buf)
        if not may_stage(buf):
            return buf
        way = pick_way(&self.ways[0])
        self.st.way, self.st.started = way, monotonic()
        return buf if way == WAY_AS_IS else self.calls.staged(buf, way)

    def done(self) -> None:
        """The send of the last staged() has completed: time its way."""
        settle(&self.ways[0], &self.st, 0)
        self.st.way = -1


# Note [Lane deadlines]
# ~~~~~~~~~~~~~~~~~~~~~
# A call with timeout= (or PYCOLL_TIMEOUT) takes its lane too: frameworks
# pass a timeout on every call, and the general path costs 6-15 us of
# Python more at 8 B. The call then has a deadline, a time.monotonic()
# value (CLOCK_MONOTONIC, the clock Python's monotonic reads on Linux):
# each step posts MPI_Irecv and MPI_Isend and tests them, as
# Channel.wait (pycoll/_p2p.py) does, sleeping NAP between tests after
# SPIN of them. When the deadline passes, the pending receive is
# cancelled and the call raises CollectiveTimeout naming the peer and the
# step, after breaking the communicator: what the general path does. The
# messages and tags are the same either way, so a rank on the general
# path, or without a deadline, still meets it. A lane that hands its call
# to the general path part-way (a broadcast's or scatter's receiver
# meeting a header it did not expect, a scatter's out its data lane
# declines) hands the deadline on with it.

cdef enum:
    TIMED_OUT = -1          # not an MPI error code (those are >= 0)
    SPIN = 2000             # as pycoll/_p2p.py
    NAP_NS = 50000


cdef double monotonic() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return <double>ts.tv_sec + <double>ts.tv_nsec * 1e-9


cdef int transfer_by(const char *sbuf, int sn, int dest, char *rbuf, int rn, int source,
                     int tag, handle_t comm, void *status, double deadline,
                     int *stuck) noexcept nogil:
    """Send sn bytes of sbuf to dest, receive rn bytes from source into
    rbuf (either buffer NULL: that half is not done), by *deadline* (Note
    [Lane deadlines]): 0, an MPI error code, or TIMED_OUT with the receive
    cancelled if it was still pending and *stuck* the peer of the first
    pending message."""
    cdef intptr_t requests[2]
    cdef int done[2]
    cdef int count = 0, i, rc, flag, pending, tries = 0
    cdef timespec nap
    nap.tv_sec, nap.tv_nsec = 0, NAP_NS
    requests[0] = requests[1] = 0
    done[0] = done[1] = 0
    if rbuf != NULL:
        rc = c_irecv(rbuf, rn, BYTE, source, tag, comm, &requests[0])
        if rc != 0:
            return rc
        count = 1
    if sbuf != NULL:
        rc = c_isend(sbuf, sn, BYTE, dest, tag, comm, &requests[count])
        if rc != 0:
            return rc
        count += 1
    while True:
        pending = 0
        for i in range(count):
            if not done[i]:
                flag = 0
                rc = c_test(&requests[i], &flag, status)
                if rc != 0:
                    return rc
                done[i] = flag
                pending += not flag
        if pending == 0:
            return 0
        if monotonic() > deadline:
            if rbuf != NULL and not done[0]:
                stuck[0] = source
                c_cancel(&requests[0])      # the communicator is broken from here on
            else:
                stuck[0] = dest
            return TIMED_OUT
        tries += 1
        if tries > SPIN:
            nanosleep(&nap, NULL)


cdef int send_by(const char *buf, int n, int dest, int tag, handle_t comm, void *status,
                 double deadline, int *stuck) noexcept nogil:
    """One message to dest: MPI_Send, or by *deadline* when it is not 0."""
    if deadline > 0.0:
        return transfer_by(buf, n, dest, NULL, 0, 0, tag, comm, status, deadline, stuck)
    return c_send(buf, n, BYTE, dest, tag, comm)


cdef int recv_by(char *buf, int n, int source, int tag, handle_t comm, void *status,
                 double deadline, int *stuck) noexcept nogil:
    """One message from source into *status*: MPI_Recv, or by *deadline*
    when it is not 0."""
    if deadline > 0.0:
        return transfer_by(NULL, 0, 0, buf, n, source, tag, comm, status, deadline, stuck)
    return c_recv(buf, n, BYTE, source, tag, comm, status)


cdef object timed_out(base, int peer, collective, algorithm, int step, int steps,
                      double waited):
    """The CollectiveTimeout of a lane call whose deadline passed, after
    breaking the communicator *base* (as Channel._expire in pycoll/_p2p.py)."""
    error = CollectiveTimeout(base.rank, peer, collective, algorithm, step, steps, waited)
    base._break(error)
    logging.getLogger("pycoll").warning("%s; the communicator is broken", error)
    return error


cdef object api_lane_deadline = None      # pycoll.api._lane_deadline, once imported


cdef double lane_deadline(comm, timeout) except? -1.0:
    """The deadline of a lane call (Note [Lane deadlines]): 0 when neither
    timeout= nor PYCOLL_TIMEOUT sets one, without a Python call; else
    pycoll.api._lane_deadline's, which checks the timeout first (a bad one
    raises before any message)."""
    global api_lane_deadline
    if timeout is None and comm.settings.timeout is None:
        return 0.0
    if api_lane_deadline is None:
        from pycoll.api import _lane_deadline   # pycoll.api imports this module
        api_lane_deadline = _lane_deadline
    return api_lane_deadline(comm, timeout)


# Note [Widened lanes]
# ~~~~~~~~~~~~~~~~~~~~
# accumulate="float32" runs a float16 or bfloat16 reduction in float32:
# the general path widens x into scratch, runs the schedule on float32
# bytes, divides (AVG) and narrows the result once (_plan._send_bytes,
# _finish). A Lane made with a result_code does the same in C, with the
# same conversion kernels: x and the result are of result_code, the
# schedule, its messages and its kernel of code (float32), and the widened
# input and partial live in the "lane" scratch after the schedule's own
# room. ReduceScatterLane (reduce_scatter, the ring's allreduce) does the
# same in its "work" scratch. Before, such a call took the general path at
# every size: an 8 B bfloat16 allreduce with accumulate took 15.7 us at
# p = 2 against 3.7 without.

cdef class Lane(StagedSends):
    """One allreduce or reduce plan, run in C: its schedule, kernel and buffers.

    Made by _plan.Plan when the plan's algorithm has a schedule, the vector is
    one segment, and the communicator has a Transport. *gets_result*: this
    rank ends with the result (every rank of an allreduce, the root of a
    reduce); elsewhere the partial lives in scratch and the call returns
    None. *collective* and *algorithm* name the call in a CollectiveTimeout
    (Note [Lane deadlines]). *result_code*: x's and the result's dtype when
    the schedule runs in *code*, wider (Note [Widened lanes]); *shape* and
    *dtype* are the result's.
    """

    cdef Transport transport
    cdef CallResources calls
    cdef object base, shape, dtype, collective
    cdef readonly object algorithm     # _plan.py, Note [One plan per algorithm]
    cdef pycoll_binary_loop loop
    cdef int code, result_code, nsteps, divisor, stuck_peer, stuck_step
    cdef bint gets_result, sends
    cdef double deadline
    cdef Py_ssize_t nbytes, xbytes, count, align, room
    cdef int kinds[MAX_STEPS]
    cdef int peers[MAX_STEPS]
    cdef int lefts[MAX_STEPS]

    def __cinit__(self, base, Transport transport, steps, int op, int code, shape, dtype,
                  Py_ssize_t nbytes, int divisor, bint gets_result=True,
                  collective="allreduce", algorithm="?", int result_code=-1):
        if len(steps) > MAX_STEPS:
            raise ValueError(f"a schedule of {len(steps)} steps is too long for the lane")
        self.loop = loop_for(op, code)
        if self.loop is NULL:
            raise ValueError(f"no kernel for op {op}, dtype {code}")
        self.base, self.transport = base, transport
        self.code, self.shape, self.dtype = code, shape, dtype
        self.nbytes = self.room = nbytes    # room: the "lane" scratch a call borrows
        self.count = nbytes // itemsize_of(code)
        # Note [Widened lanes]: x and the result in result_code, the
        # schedule in code (float32)
        self.result_code = result_code if result_code >= 0 else code
        self.xbytes = self.count * itemsize_of(self.result_code)
        self.align = 8 if itemsize_of(self.result_code) == 16 else itemsize_of(self.result_code)
        self.divisor = divisor              # AVG: divide by p; 0: no division
        self.gets_result = gets_result
        self.collective, self.algorithm = collective, algorithm
        self.deadline = 0.0
        self.nsteps = len(steps)
        self.sends = False
        for i, step in enumerate(steps):
            self.kinds[i], self.peers[i] = step[0], step[1]
            self.lefts[i] = step[2] if len(step) > 2 else 0
            self.sends |= step[0] in (SEND, EXCHANGE)
        # The received partial lands in the communicator's scratch, borrowed
        # per call: plans are many, one buffer per plan would add up.
        self.calls = base._calls

    cdef int transfer(self, const char *sbuf, char *rbuf, int peer, int n, int tag,
                      handle_t comm) noexcept nogil:
        """One step's messages with *peer*: a send (rbuf NULL), a receive
        (sbuf NULL) or both; by the call's deadline when it has one."""
        if self.deadline > 0:
            return transfer_by(sbuf, n, peer, rbuf, n, peer, tag, comm, self.transport.status,
                               self.deadline, &self.stuck_peer)
        if rbuf == NULL:
            return c_send(sbuf, n, BYTE, peer, tag, comm)
        if sbuf == NULL:
            return c_recv(rbuf, n, BYTE, peer, tag, comm, self.transport.status)
        return c_sendrecv(sbuf, n, BYTE, peer, tag, rbuf, n, BYTE, peer, tag, comm,
                          self.transport.status)

    cdef int execute(self, char *send, char *data, char *theirs, Stage *stage,
                     int tag) noexcept nogil:
        """The schedule: the partial starts in send and lives in data from
        its first receipt or reduction (as _schedule.execute). What it
        sends goes through *stage* when that pays (Note [Staging sends])."""
        cdef char *mine = send
        cdef char *into
        cdef handle_t comm = self.transport.comm
        cdef int n = <int>self.nbytes
        cdef int i, rc = 0, peer
        for i in range(self.nsteps):
            peer = self.peers[i]
            if self.kinds[i] == SEND:
                rc = self.transfer(staged(mine, n, stage), NULL, peer, n, tag, comm)
            elif self.kinds[i] == RECV:
                rc = self.transfer(NULL, data, peer, n, tag, comm)
                mine = data
            else:
                # Straight into data while the partial is still the input
                # (they are apart: run() refuses partial overlaps), as in
                # Note [Reduce in place] of pycoll/_p2p.py.
                into = data if mine != data else theirs
                if self.kinds[i] == RECV_REDUCE:
                    rc = self.transfer(NULL, into, peer, n, tag, comm)
                else:
                    rc = self.transfer(staged(mine, n, stage), into, peer, n, tag, comm)
                if rc == 0:
                    if self.lefts[i]:
                        self.loop(data, into, mine, self.count)
                    else:
                        self.loop(data, mine, into, self.count)
                mine = data
            if rc != 0:
                self.stuck_step = i + 1
                return rc
        # As _schedule.execute: a rank whose last step sent keeps no result.
        if mine != data and not (self.nsteps and self.kinds[self.nsteps - 1] == SEND):
            memcpy(data, mine, self.nbytes)
        return 0

    def run(self, x, out, double deadline=0.0):
        """allreduce(x, out=out) in C, or None if the Python path must take it."""
        result = self.call(x, out, deadline)
        return None if result is NOT_TAKEN else result

    cdef object call(self, x, out, double deadline=0.0):
        """The call in C: the result (None off a reduce's root), or
        NOT_TAKEN, with nothing sent, if the Python path must take it.
        *deadline*: 0, or the time.monotonic() by which it must be done
        (Note [Lane deadlines])."""
        cdef Operands o
        cdef char *theirs
        cdef char *send
        cdef char *data
        cdef Stage st
        cdef Ways *ways
        cdef int rc, tag
        cdef bint wide = self.result_code != self.code
        cdef double started = 0.0
        if not self.gets_result:
            result = None                   # out is ignored here; the partial lives in scratch
            output = None if wide else self.calls.scratch("lane-data", self.nbytes)
        else:
            result = output = lane_output(out, self.shape, self.dtype)
            if result is NOT_TAKEN:
                return NOT_TAKEN
        if not take_operands(&o, x, True, self.xbytes, output, self.align, 0):
            return NOT_TAKEN
        try:
            tag = self.calls.next_tag()
            held = self.calls.borrow(SLOT_LANE, self.room + (2 * self.nbytes if wide else 0),
                                     &theirs)
            send, data = o.xp, o.outp
            if wide:
                send = theirs + self.room
                data = send + self.nbytes
            ways = self.ways_for(&o)
            stage_held = self.calls.stage(ways, self.nbytes if self.sends else 0, &st)
            self.deadline = deadline
            with nogil:
                started = monotonic()
                if wide:
                    convert_buffer(self.result_code, self.code, send, o.xp, self.count)
                rc = self.execute(send, data, theirs, &st, tag)
                settle(ways, &st, rc)
                if rc == 0 and self.gets_result:
                    if self.divisor:
                        scale_buffer(self.code, data, data, self.divisor, self.count)
                    if wide:
                        convert_buffer(self.code, self.result_code, o.outp, data, self.count)
        finally:
            release_operands(&o)
        if rc == TIMED_OUT:
            raise timed_out(self.base, self.stuck_peer, self.collective, self.algorithm,
                            self.stuck_step, self.nsteps, monotonic() - started)
        check(rc, "the lane")
        return result


cdef class ScanLane(Lane):
    """One scan plan, run in C: Lane's call with a scan's schedule
    (SEED, EXCHANGE, RECV_REDUCE and SEND steps, as
    pycoll/algorithms/_schedule.execute_scan reads them). The partial
    lives in the second half of the "lane" scratch, after what arrives;
    the result in out. Made with Lane's arguments: *gets_result* is False
    on rank 0 of an exclusive scan, which gets None, and *divisor* is AVG's
    count of contributions to this rank's result."""

    def __cinit__(self, *args, **kwargs):
        self.room = 2 * self.nbytes

    cdef int execute(self, char *send, char *data, char *theirs, Stage *stage,
                     int tag) noexcept nogil:
        cdef char *mine = send
        cdef char *partial = theirs + self.nbytes
        cdef handle_t comm = self.transport.comm
        cdef int n = <int>self.nbytes
        cdef int i, rc = 0, peer
        cdef bint have_result = False
        for i in range(self.nsteps):
            peer = self.peers[i]
            if self.kinds[i] == SEED:
                if data != send:
                    memcpy(data, send, self.nbytes)
                have_result = True
            elif self.kinds[i] == SEND:
                rc = self.transfer(staged(mine, n, stage), NULL, peer, n, tag, comm)
            else:
                if self.kinds[i] == EXCHANGE:
                    rc = self.transfer(staged(mine, n, stage), theirs, peer, n, tag, comm)
                else:
                    rc = self.transfer(NULL, theirs, peer, n, tag, comm)
                if rc == 0:
                    if self.lefts[i]:
                        # the partial first: in place, the result is the input
                        self.loop(partial, theirs, mine, self.count)
                        if have_result:
                            self.loop(data, theirs, data, self.count)
                        else:
                            memcpy(data, theirs, self.nbytes)
                            have_result = True
                    else:
                        self.loop(partial, mine, theirs, self.count)
                    mine = partial
            if rc != 0:
                self.stuck_step = i + 1
                return rc
        return 0

    def take(self, x, out, double deadline=0.0):
        """scan(x, out=out) in C: the result (None on rank 0 of an
        exclusive scan), or NOT_TAKEN if the Python path must take it."""
        return self.call(x, out, deadline)


cdef class ReduceScatterLane(StagedSends):
    """One reduce_scatter plan of the ring or of recursive halving, or
    (*whole*) one allreduce plan of the ring, run in C when every message
    is one segment. The messages, tags, operands and their order are those
    of reduce_scatter_ring.run, reduce_scatter_recursive_halving.run and
    allreduce_ring.run, so ranks taking either path meet and agree bitwise.

    Before and after, at rank r of p (blocks of np.array_split)::

        x:      this rank's whole vector      ->  unchanged
        result: -                             ->  block r of x_0 op ... op x_(p-1)
                                                  (whole: all of it)

    The steps are the algorithm's schedule() (the form and its flags are
    in pycoll/algorithms/_schedule.py). A step sends a range of x or of
    the partial sums (the communicator's "output" scratch) while it
    receives a range and reduces it with this rank's operand of that range,
    into the partial sums or the result. The ring's operand is always x's
    block; recursive halving's is the partial sums' after its first
    exchange, and a step that reduces them into themselves receives into
    the "lane" scratch first. An allreduce's partial sums are its result
    (allreduce_ring.chunk_schedule), which may be x itself (in place):
    then what arrives lands in the "lane" scratch too.
    """

    cdef Transport transport
    cdef CallResources calls
    cdef object base, shape, dtype, collective
    cdef readonly object algorithm
    cdef pycoll_binary_loop loop
    cdef int code, result_code, nsteps, divisor, stuck_peer, stuck_step
    cdef double deadline
    cdef Py_ssize_t nbytes, total, align, tempbytes, largest_send
    cdef bint uses_partial, whole
    cdef int dest[MAX_STEPS]
    cdef int source[MAX_STEPS]
    cdef int flags[MAX_STEPS]
    cdef Py_ssize_t send_lo[MAX_STEPS]
    cdef Py_ssize_t send_n[MAX_STEPS]
    cdef Py_ssize_t recv_lo[MAX_STEPS]
    cdef Py_ssize_t recv_n[MAX_STEPS]

    def __cinit__(self, base, Transport transport, steps, int op, int code, shape, dtype,
                  Py_ssize_t total, int divisor, algorithm="ring", bint whole=False,
                  int result_code=-1):
        """*steps*: the algorithm's schedule(p, r, counts), or (*whole*)
        allreduce_ring.chunk_schedule; *total*: the bytes of x in *code*;
        *result_code*: x's and the result's dtype when the steps run in
        *code*, wider (Note [Widened lanes]); *shape* and *dtype*: the
        result's."""
        if len(steps) > MAX_STEPS:
            raise ValueError(f"a reduce_scatter of {len(steps)} steps does not fit the lane")
        self.loop = loop_for(op, code)
        if self.loop is NULL:
            raise ValueError(f"no kernel for op {op}, dtype {code}")
        self.base, self.calls, self.transport = base, base._calls, transport
        self.code, self.shape, self.dtype = code, shape, dtype
        self.algorithm, self.deadline, self.whole = algorithm, 0.0, whole
        self.collective = "allreduce" if whole else "reduce_scatter"
        self.divisor = divisor              # AVG: divide by p; 0: no division
        self.result_code = result_code if result_code >= 0 else code
        self.align = 8 if itemsize_of(self.result_code) == 16 else itemsize_of(self.result_code)
        self.nsteps = len(steps)
        self.tempbytes, self.uses_partial, self.largest_send = 0, False, 0
        for i, (dest, source, (slo, sn), (rlo, rn), flags) in enumerate(steps):
            self.dest[i], self.source[i], self.flags[i] = dest, source, flags
            self.send_lo[i], self.send_n[i], self.recv_lo[i], self.recv_n[i] = slo, sn, rlo, rn
            if flags & (RS_SEND_PARTIAL | RS_MINE_PARTIAL | RS_COPY) or not flags & RS_INTO_RESULT:
                self.uses_partial = True
            if reduces_in_place(flags) or whole and source >= 0 and not flags & RS_NO_REDUCE:
                self.tempbytes = max(self.tempbytes, rn)
            if dest >= 0:
                self.largest_send = max(self.largest_send, sn)
        self.total = total
        if whole:
            self.uses_partial = False       # the partial sums are the result
            self.nbytes = total
        else:
            # This rank's block; no steps: every block is empty (_lanes.py, Note [Empty lanes]).
            self.nbytes = self.recv_n[self.nsteps - 1] if self.nsteps else 0

    cdef int execute(self, char *send, char *partial, char *result, char *temp, Stage *stage,
                     int tag) noexcept nogil:
        cdef handle_t comm = self.transport.comm
        cdef const char *sbuf
        cdef char *rbuf
        cdef char *into
        cdef char *mine
        cdef int i, f, rc
        cdef size_t count
        for i in range(self.nsteps):
            f = self.flags[i]
            if f & RS_COPY:
                memcpy(result, partial + self.recv_lo[i], self.recv_n[i])
                continue
            if self.dest[i] < 0 and self.source[i] < 0:
                continue                    # both halves empty (_plan._schedule_without_empty)
            sbuf = NULL
            if self.dest[i] >= 0:
                sbuf = staged((partial if f & RS_SEND_PARTIAL else send) + self.send_lo[i],
                              self.send_n[i], stage)
            into = result if f & RS_INTO_RESULT else partial + self.recv_lo[i]
            mine = (partial if f & RS_MINE_PARTIAL else send) + self.recv_lo[i]
            rbuf = NULL
            if self.source[i] >= 0:
                # Apart from this rank's operand, what arrives lands in place.
                rbuf = temp if into == mine and not f & RS_NO_REDUCE else into
            if self.deadline > 0:
                rc = transfer_by(sbuf, <int>self.send_n[i], self.dest[i], rbuf,
                                 <int>self.recv_n[i], self.source[i], tag, comm,
                                 self.transport.status, self.deadline, &self.stuck_peer)
            elif rbuf == NULL:
                rc = c_send(sbuf, <int>self.send_n[i], BYTE, self.dest[i], tag, comm)
            elif sbuf == NULL:
                rc = c_recv(rbuf, <int>self.recv_n[i], BYTE, self.source[i], tag, comm,
                            self.transport.status)
            else:
                rc = c_sendrecv(sbuf, <int>self.send_n[i], BYTE, self.dest[i], tag,
                                rbuf, <int>self.recv_n[i], BYTE, self.source[i], tag, comm,
                                self.transport.status)
            if rc != 0:
                self.stuck_step = i + 1
                return rc
            if rbuf == NULL or f & RS_NO_REDUCE:
                continue
            count = <size_t>self.recv_n[i] // itemsize_of(self.code)
            if f & RS_LEFT:
                self.loop(into, rbuf, mine, count)
            else:
                self.loop(into, mine, rbuf, count)
        return 0

    def run(self, x, out, double deadline=0.0):
        """reduce_scatter(x, out=out) in C, or None (nothing sent) if the
        Python path must take it. *deadline*: as Lane.call's."""
        cdef Operands o
        cdef int rc = 0, tag
        cdef double started = 0.0
        cdef char *pp = NULL
        cdef char *tp = NULL
        cdef char *send
        cdef char *res
        cdef Stage st
        cdef Ways *ways
        cdef bint wide = self.result_code != self.code
        cdef size_t item = itemsize_of(self.code)
        cdef size_t narrow = itemsize_of(self.result_code)
        result = lane_output(out, self.shape, self.dtype)
        if result is NOT_TAKEN or not take_operands(&o, x, True, self.total // item * narrow,
                                                    result, self.align, 0 if self.whole else -1):
            return None
        try:
            tag = self.calls.next_tag()
            partial = self.calls.borrow(SLOT_OUTPUT, self.total, &pp) if self.uses_partial else None
            send, res = o.xp, o.outp
            if wide:                        # x widened, then the result (Note [Widened lanes])
                work = self.calls.borrow(SLOT_WORK, self.total + self.nbytes, &send)
                res = send + self.total
            if self.whole:
                pp = res
            temp = self.calls.borrow(SLOT_LANE, self.tempbytes, &tp) if self.tempbytes else None
            ways = self.ways_for(&o)
            stage_held = self.calls.stage(ways, self.largest_send, &st)
            self.deadline = deadline
            with nogil:
                started = monotonic()
                if wide:
                    convert_buffer(self.result_code, self.code, send, o.xp, self.total // item)
                rc = self.execute(send, pp, res, tp, &st, tag)
                settle(ways, &st, rc)
                if rc == 0 and self.divisor:
                    scale_buffer(self.code, res, res, self.divisor, self.nbytes // item)
                if rc == 0 and wide:
                    convert_buffer(self.code, self.result_code, o.outp, res, self.nbytes // item)
        finally:
            release_operands(&o)
        if rc == TIMED_OUT:
            raise timed_out(self.base, self.stuck_peer, self.collective, self.algorithm,
                            self.stuck_step, self.nsteps, monotonic() - started)
        check(rc, f"the {self.collective} lane")
        return result


cdef enum:
    STEP_SEND = 0               # the step kinds of a StepLane
    STEP_RECV = 1
    STEP_COPY = 2
    STEP_SENDRECV = 3
    STEP_SENDRECV_COPY = 4
    BUF_X = 0                   # the buffers its steps name
    BUF_OUT = 1
    BUF_WORK = 2
    BUF_WORD = 3                # a constant of the lane's own (an inline scatter's header word)


cdef inline void copy_apart(char *dst, const char *src, Py_ssize_t n) noexcept nogil:
    """memcpy, but for a span onto itself (x in its own block of out)."""
    if dst != src:
        memcpy(dst, src, n)


cdef class StepLane(StagedSends):
    """One repeated, plain gather, allgather, alltoall or scatter (its data,
    after the header), run in C: this rank's part
    of its algorithm as a program of steps over three byte buffers, x (this
    rank's input), out (the result) and work (the communicator's scratch),
    made once per signature by pycoll/_lanes.py (_RootedLane.gather_steps and
    scatter_steps, _allgather_ring_program, _allgather_rd_program,
    _alltoall_program) with the messages, tags and order of the general
    path, so ranks taking either path meet.

    A step is 11 ints (kind, dest, send buffer, offset, bytes, source,
    receive buffer, offset, bytes, copy buffer, offset):

        STEP_SEND            send a span to dest
        STEP_RECV            receive a span from source
        STEP_COPY            copy the send span to the receive span
        STEP_SENDRECV        both messages at once
        STEP_SENDRECV_COPY   both, and copy the send span to the copy
                             span while they are in flight

    With a deadline (gather, allgather and alltoall; Note [Lane
    deadlines]) every message is posted and tested against it, and a
    STEP_SENDRECV_COPY copies before posting. *collective* and *algorithm*
    name the call in a CollectiveTimeout.

    *has_result*: this rank returns out (every rank of an allgather, an
    alltoall or a scatter, a gather's root); elsewhere out is ignored and
    the call returns None. Without x bytes (a scatter off its root) x is
    ignored. *own_at* >= 0: x may be out's bytes from there, its own block
    (an allgather or a gather's root in place, Note [Own blocks] in
    _lanes.py); a copy onto itself is skipped.
    """

    cdef Transport transport
    cdef CallResources calls
    cdef object base, shape, dtype, word, collective
    cdef readonly object algorithm
    cdef Py_ssize_t xbytes, outbytes, workbytes, align, largest_send, own_at
    cdef bint has_result
    cdef int nsteps, stuck_peer, stuck_step
    cdef int kind[MAX_STEPS]
    cdef int dest[MAX_STEPS]
    cdef int source[MAX_STEPS]
    cdef int sbuf[MAX_STEPS]
    cdef int rbuf[MAX_STEPS]
    cdef int cbuf[MAX_STEPS]
    cdef Py_ssize_t slo[MAX_STEPS]
    cdef Py_ssize_t sn[MAX_STEPS]
    cdef Py_ssize_t rlo[MAX_STEPS]
    cdef Py_ssize_t rn[MAX_STEPS]
    cdef Py_ssize_t clo[MAX_STEPS]

    def __cinit__(self, base, Transport transport, steps, shape, dtype, Py_ssize_t xbytes,
                  Py_ssize_t outbytes, Py_ssize_t workbytes, bint has_result, word=b"",
                  collective="", algorithm="", Py_ssize_t own_at=-1):
        if len(steps) > MAX_STEPS:
            raise ValueError(f"{len(steps)} steps are too many for the lane")
        if own_at >= 0 and not (has_result and own_at + xbytes <= outbytes):
            raise ValueError(f"x's {xbytes} bytes at {own_at} are not within out's {outbytes}")
        self.own_at = own_at
        self.base, self.calls, self.transport = base, base._calls, transport
        self.shape, self.dtype = shape, dtype
        self.xbytes, self.outbytes, self.workbytes = xbytes, outbytes, workbytes
        self.align = dtype.alignment
        self.has_result = has_result
        self.word = bytes(word)
        self.collective, self.algorithm = collective, algorithm
        self.nsteps = len(steps)
        self.largest_send = 0
        sizes = {BUF_X: xbytes, BUF_OUT: outbytes if has_result else 0, BUF_WORK: workbytes,
                 BUF_WORD: len(self.word)}
        for i, step in enumerate(steps):
            (self.kind[i], self.dest[i], self.sbuf[i], self.slo[i], self.sn[i], self.source[i],
             self.rbuf[i], self.rlo[i], self.rn[i], self.cbuf[i], self.clo[i]) = step
            if self.kind[i] in (STEP_SEND, STEP_SENDRECV, STEP_SENDRECV_COPY):
                self.largest_send = max(self.largest_send, self.sn[i])
            # Every span within its buffer, checked once here.
            spans = {STEP_SEND: [(self.sbuf[i], self.slo[i], self.sn[i])],
                     STEP_RECV: [(self.rbuf[i], self.rlo[i], self.rn[i])],
                     STEP_COPY: [(self.sbuf[i], self.slo[i], self.sn[i]),
                                 (self.rbuf[i], self.rlo[i], self.sn[i])],
                     STEP_SENDRECV: [(self.sbuf[i], self.slo[i], self.sn[i]),
                                     (self.rbuf[i], self.rlo[i], self.rn[i])],
                     STEP_SENDRECV_COPY: [(self.sbuf[i], self.slo[i], self.sn[i]),
                                          (self.rbuf[i], self.rlo[i], self.rn[i]),
                                          (self.cbuf[i], self.clo[i], self.sn[i])]}[self.kind[i]]
            for buf, lo, n in spans:
                # no empty message of data; a barrier's are the word's, of 0 bytes
                if not (0 <= lo and (0 < n or buf == BUF_WORD) and lo + n <= sizes.get(buf, 0)):
                    raise ValueError(f"step {i} {step}: span [{lo}, {lo + n}) outside "
                                     f"buffer {buf} of {sizes.get(buf, 0)} bytes")

    cdef int execute(self, char **bufs, int tag, double deadline, Stage *stage) noexcept nogil:
        """The program. A send goes out of *stage* when that pays (Note
        [Staging sends]); a copy step and the copy beside a send read the
        send span itself."""
        cdef handle_t comm = self.transport.comm
        cdef void *status = self.transport.status
        cdef intptr_t rreq, sreq
        cdef const char *sb
        cdef int i, k, rc = 0, rc2
        for i in range(self.nsteps):
            k = self.kind[i]
            sb = NULL
            if k == STEP_SEND or k == STEP_SENDRECV or k == STEP_SENDRECV_COPY:
                sb = staged(bufs[self.sbuf[i]] + self.slo[i], self.sn[i], stage)
            if k == STEP_SEND:
                rc = send_by(sb, <int>self.sn[i], self.dest[i],
                             tag, comm, status, deadline, &self.stuck_peer)
            elif k == STEP_RECV:
                rc = recv_by(bufs[self.rbuf[i]] + self.rlo[i], <int>self.rn[i], self.source[i],
                             tag, comm, status, deadline, &self.stuck_peer)
            elif k == STEP_COPY:
                copy_apart(bufs[self.rbuf[i]] + self.rlo[i], bufs[self.sbuf[i]] + self.slo[i],
                           self.sn[i])
            elif deadline > 0.0:            # both messages, tested against the deadline
                if k == STEP_SENDRECV_COPY:
                    copy_apart(bufs[self.cbuf[i]] + self.clo[i], bufs[self.sbuf[i]] + self.slo[i],
                               self.sn[i])
                rc = transfer_by(sb, <int>self.sn[i], self.dest[i],
                                 bufs[self.rbuf[i]] + self.rlo[i], <int>self.rn[i],
                                 self.source[i], tag, comm, status, deadline, &self.stuck_peer)
            elif k == STEP_SENDRECV:
                rc = c_sendrecv(sb, <int>self.sn[i], BYTE,
                                self.dest[i], tag, bufs[self.rbuf[i]] + self.rlo[i],
                                <int>self.rn[i], BYTE, self.source[i], tag, comm, status)
            else:
                rreq = sreq = 0
                rc = c_irecv(bufs[self.rbuf[i]] + self.rlo[i], <int>self.rn[i], BYTE,
                             self.source[i], tag, comm, &rreq)
                if rc == 0:
                    rc = c_isend(sb, <int>self.sn[i], BYTE, self.dest[i], tag, comm, &sreq)
                    copy_apart(bufs[self.cbuf[i]] + self.clo[i], bufs[self.sbuf[i]] + self.slo[i],
                               self.sn[i])
                    if rc == 0:
                        rc = c_wait(&sreq, status)
                    rc2 = c_wait(&rreq, status)
                    if rc == 0:
                        rc = rc2
            if rc != 0:
                self.stuck_step = i
                return rc
        return 0

    cdef object call(self, x, out, int tag=-1, double deadline=0.0):
        """The result (None where this rank has none), or NOT_TAKEN, with
        nothing sent, if the Python path must take the call. The call takes
        the next tag, or runs on *tag* (>= 0: one its caller took).
        *deadline*: 0, or the time.monotonic() by which it must be done
        (Note [Lane deadlines])."""
        cdef Operands o
        cdef char *bufs[4]
        cdef Stage st
        cdef Ways *ways
        cdef int rc
        cdef double started = 0.0
        result = None
        if self.has_result:
            result = lane_output(out, self.shape, self.dtype)
            if result is NOT_TAKEN:
                return NOT_TAKEN
        # Without xbytes (a scatter's receiver) x is ignored.
        if not take_operands(&o, x, self.xbytes != 0, self.xbytes, result, self.align,
                             self.own_at):
            return NOT_TAKEN
        try:
            bufs[BUF_X], bufs[BUF_OUT] = o.xp, o.outp
            bufs[BUF_WORK] = NULL
            bufs[BUF_WORD] = <char *>self.word
            work = self.calls.borrow(SLOT_WORK, self.workbytes, &bufs[BUF_WORK]) \
                if self.workbytes else None
            ways = self.ways_for(&o)
            stage_held = self.calls.stage(ways, self.largest_send, &st)
            if tag < 0:
                tag = self.calls.next_tag()
            with nogil:
                if deadline > 0.0:
                    started = monotonic()
                rc = self.execute(bufs, tag, deadline, &st)
                settle(ways, &st, rc)
        finally:
            release_operands(&o)
        if rc == TIMED_OUT:
            raise timed_out(self.base, self.stuck_peer, self.collective, self.algorithm,
                            self.stuck_step, self.nsteps, monotonic() - started)
        check(rc, "the lane")
        return result

    def run(self, x, out, double deadline=0.0):
        """call() from Python: the result, None, or NOT_TAKEN."""
        return self.call(x, out, -1, deadline)


cdef class ScatterRoot:
    """The root's part of one repeated, plain scatter of an array of one
    (dtype, shape, algorithm) whose header is the short word: the word down
    the header's binomial tree, then the data lane (a StepLane); or, when
    *inline*, the data lane alone, whose program sends each child the word
    and its subtree's blocks in one message (_header.py, Note [Inline
    scatter]). x is checked before anything leaves; an out the data lane
    declines goes to *rest(x, out, deadline)*, the general path's data
    phase (never when inline: the lane then takes any out the general path
    would). With a deadline every message is posted and tested against it
    (Note [Lane deadlines])."""

    cdef Transport transport
    cdef CallResources calls
    cdef object base, word, rest
    cdef StepLane data
    cdef bint inline
    cdef int nchildren, stuck_peer
    cdef int children[MAX_CHILDREN]

    def __cinit__(self, base, Transport transport, word, children, StepLane data, rest,
                  bint inline=False):
        if len(children) > MAX_CHILDREN or len(word) != WORD_BYTES:
            raise ValueError(f"{len(children)} children, a word of {len(word)} bytes")
        self.base, self.calls, self.transport = base, base._calls, transport
        self.data, self.rest = data, rest
        self.inline = inline
        self.word = np.array(word, np.uint8)
        self.nchildren = len(children)
        for i, child in enumerate(children):
            self.children[i] = child

    cdef object call(self, x, out, double deadline=0.0):
        cdef Py_buffer b
        cdef int i, rc = 0, tag
        cdef bint fits
        cdef double started = monotonic() if deadline > 0.0 else 0.0
        try:
            PyObject_GetBuffer(x, &b, PyBUF_SIMPLE)
        except (BufferError, ValueError, TypeError):
            return NOT_TAKEN                # not C-contiguous: the Python path packs it
        fits = b.len == self.data.xbytes and <uintptr_t>b.buf % self.data.align == 0
        PyBuffer_Release(&b)
        if not fits:
            return NOT_TAKEN
        if self.inline:                     # NOT_TAKEN: nothing sent, the general path's turn
            return self.data.call(x, out, -1, deadline)
        PyObject_GetBuffer(self.word, &b, PyBUF_SIMPLE)
        try:
            tag = self.calls.next_tag()
            with nogil:
                for i in range(self.nchildren):
                    rc = send_by(<char *>b.buf, WORD_BYTES, self.children[i], tag,
                                 self.transport.comm, self.transport.status, deadline,
                                 &self.stuck_peer)
                    if rc != 0:
                        break
        finally:
            PyBuffer_Release(&b)
        if rc == TIMED_OUT:
            raise timed_out(self.base, self.stuck_peer, "scatter", "header", i,
                            self.nchildren, monotonic() - started)
        check(rc, "the scatter header")
        result = self.data.call(x, out, -1, deadline)
        return self.rest(x, out, deadline) if result is NOT_TAKEN else result


cdef class ScatterReceiver:
    """A non-root's part of repeated scatters from one (root, algorithm):
    the header message from its parent in the header's binomial tree, room
    bytes at most. A short word is passed on to its children, then the
    data lane of the last signature seen (*expect*) runs when the word
    names it again. An inline word (*inline_code*; _header.py, Note [Inline
    scatter]) brings this rank's subtree's blocks along: the data lane of
    its signature passes them on and keeps its own block, on the same tag.
    Any other word, or an out the lane declines, goes to *rest(message,
    out, tag, deadline)*, which finds or makes the lane of the new word or
    takes the general path from there. With a deadline every message is
    posted and tested against it (Note [Lane deadlines])."""

    cdef Transport transport
    cdef CallResources calls
    cdef object base, message, expected, lane, lane_x, rest
    cdef int parent, nchildren, room, stuck_peer, done
    cdef int64_t inline_code
    cdef int children[MAX_CHILDREN]

    def __cinit__(self, base, Transport transport, int parent, children, rest, int room,
                  int64_t inline_code):
        if len(children) > MAX_CHILDREN or room < WORD_BYTES:
            raise ValueError(f"{len(children)} children, room for {room} bytes")
        self.base, self.calls, self.transport, self.rest = base, base._calls, transport, rest
        self.parent, self.nchildren = parent, len(children)
        for i, child in enumerate(children):
            self.children[i] = child
        self.room, self.inline_code = room, inline_code
        self.message = np.zeros(room, np.uint8)
        self.expected, self.lane, self.lane_x = None, None, None

    def expect(self, bytes word, lane) -> None:
        """The data lane (a StepLane, or None) of the signature *word* names;
        for an inline word the lane reads the received message as its x."""
        self.expected, self.lane, self.lane_x = word, lane, None
        if lane is not None and np.frombuffer(word[:8], np.int64)[0] == self.inline_code:
            self.lane_x = self.message[:(<StepLane>lane).xbytes]

    cdef object call(self, out, double deadline=0.0):
        cdef Py_buffer b
        cdef int i, rc, tag
        cdef bint same, inline
        cdef double started = monotonic() if deadline > 0.0 else 0.0
        PyObject_GetBuffer(self.message, &b, PyBUF_SIMPLE | PyBUF_WRITABLE)
        try:
            tag = self.calls.next_tag()
            with nogil:
                self.done = 0
                rc = recv_by(<char *>b.buf, self.room, self.parent, tag, self.transport.comm,
                             self.transport.status, deadline, &self.stuck_peer)
                inline = rc == 0 and (<int64_t *>b.buf)[0] == self.inline_code
                for i in range(self.nchildren):
                    if rc != 0 or inline:
                        break
                    self.done += 1
                    rc = send_by(<char *>b.buf, WORD_BYTES, self.children[i], tag,
                                 self.transport.comm, self.transport.status, deadline,
                                 &self.stuck_peer)
            same = self.lane is not None and \
                memcmp(b.buf, <char *>self.expected, WORD_BYTES) == 0
        finally:
            PyBuffer_Release(&b)
        if rc == TIMED_OUT:
            raise timed_out(self.base, self.stuck_peer, "scatter", "header", self.done,
                            1 + self.nchildren, monotonic() - started)
        check(rc, "the scatter header")
        if same:
            if inline:
                result = (<StepLane>self.lane).call(self.lane_x, out, tag, deadline)
            else:
                result = (<StepLane>self.lane).call(None, out, -1, deadline)
            if result is not NOT_TAKEN:
                return result
        return self.rest(self.message.copy(), out, tag, deadline)


# The names pycoll/_lanes.py builds StepLane programs with.
STEP = {"send": STEP_SEND, "recv": STEP_RECV, "copy": STEP_COPY, "sendrecv": STEP_SENDRECV,
        "sendrecv_copy": STEP_SENDRECV_COPY}
BUFFER = {"x": BUF_X, "out": BUF_OUT, "work": BUF_WORK, "word": BUF_WORD}


def _step_lane_call(comm, kind, x, rest, out, timeout):
    """The call on the StepLane made for (kind, x's dtype and shape, *rest),
    with *timeout* (Note [Lane deadlines]), if one was; NOT_TAKEN (nothing
    sent) otherwise."""
    if type(x) is not ndarray or not in_turn(comm):
        return NOT_TAKEN                    # queued calls first (Note [Issue order])
    try:
        lane = comm._plans.get((kind, x.dtype, x.shape) + rest)
    except TypeError:
        return NOT_TAKEN
    if lane is None:
        return NOT_TAKEN
    return (<StepLane>lane).call(x, out, -1, lane_deadline(comm, timeout))


# The entries of the lanes: each call's arguments as the collective got
# them (timeout= included), the result or, for any call its lane does not
# take, NOT_TAKEN (allreduce, reduce_scatter: None) with nothing sent.

def sizes_key(sizes):
    """A gather's or allgather's sizes= as its lane's key ends: () for None,
    (a tuple of ints,) for a list or tuple of Python ints (not bools) or a
    1-d integer ndarray; None for anything else, which the general path
    checks (_plan._check_sizes). A float equals its int as a key, so it
    must not find an int's lane (Note [Equal keys], api.py)."""
    cdef object kind = type(sizes)
    if sizes is None:
        return ()
    if kind is list or kind is tuple:
        for s in sizes:
            if type(s) is not int:
                return None
        return (tuple(sizes),)
    if kind is ndarray and sizes.ndim == 1 and sizes.dtype.kind in "iu":
        return (tuple(sizes.tolist()),)
    return None


def gather(comm, x, root, algorithm, out, timeout=None, sizes=None):
    """The lane of a repeated, plain gather: the root's result, None
    elsewhere."""
    if type(root) is not int:
        return NOT_TAKEN                    # the general path checks it (Note [Equal keys], api.py)
    key = () if sizes is None else sizes_key(sizes)
    if key is None:
        return NOT_TAKEN
    return _step_lane_call(comm, "gather-lane", x, (root, algorithm) + key, out, timeout)


def alltoall(comm, x, algorithm, out, timeout=None):
    """The lane of a repeated, plain alltoall: the result."""
    return _step_lane_call(comm, "alltoall-lane", x, (algorithm,), out, timeout)


def scatter(comm, x, root, algorithm, out, timeout=None):
    """The lane of a repeated, plain scatter: this rank's block."""
    if type(root) is not int or not in_turn(comm):
        return NOT_TAKEN                    # queued calls first (Note [Issue order])
    if comm.rank == root:
        if type(x) is not ndarray:
            return NOT_TAKEN
        try:
            lane = comm._plans.get(("scatter-lane-root", x.dtype, x.shape, root, algorithm))
        except TypeError:
            return NOT_TAKEN
        return NOT_TAKEN if lane is None else (<ScatterRoot>lane).call(
            x, out, lane_deadline(comm, timeout))
    try:
        lane = comm._plans.get(("scatter-header", root, algorithm))
    except TypeError:
        return NOT_TAKEN
    return NOT_TAKEN if lane is None else (<ScatterReceiver>lane).call(
        out, lane_deadline(comm, timeout))


def allgather(comm, x, algorithm, out, timeout=None, sizes=None):
    """The lane of a repeated, plain allgather: the result."""
    key = () if sizes is None else sizes_key(sizes)
    if key is None:
        return NOT_TAKEN
    return _step_lane_call(comm, "allgather-lane", x, (algorithm,) + key, out, timeout)


def barrier(comm, timeout=None):
    """The lane of a barrier: None once every rank has entered it."""
    if not in_turn(comm):
        return NOT_TAKEN                    # queued calls first (Note [Issue order])
    lane = comm._plans.get(("barrier-lane",))
    if lane is None:
        return NOT_TAKEN
    return (<StepLane>lane).call(None, None, -1, lane_deadline(comm, timeout))


cdef class BroadcastLane(StagedSends):
    """One repeated, plain broadcast of an array of one (dtype, shape, root,
    algorithm) on the binomial tree (or, at p = 2, the pipeline: the same
    single message), run in C. Per tree edge, as _header.exchange and the
    general path send them: the header word and the data in one message
    when the data fits (*inline*), else the word, then the data on the next
    tag.

    Before and after (every rank passes an array of the root's shape)::

        root:   x = the data      ->  x unchanged
        others: x = anything      ->  x = the root's data

    A receiver forwards the header it got, whatever it holds, before
    comparing it with the one it expects; when they differ (the root sent
    another signature, or an error) *rest(x, message, deadline, algorithm)*
    takes the call on from there, the general path, with the algorithm the
    caller named: the lane serves "auto" and the name it resolves to at
    this size alike (Note [One plan per algorithm] in _plan.py), and at the
    root's size "auto" may resolve to another. With a deadline every message
    is posted and tested against it (Note [Lane deadlines]); *algorithm*
    names the call in a CollectiveTimeout.
    """

    cdef Transport transport
    cdef CallResources calls
    cdef object base, message, expected, rest
    cdef readonly object algorithm
    cdef Py_ssize_t nbytes, align, capacity
    cdef int parent, nchildren, nmessages, done, stuck_peer
    cdef int children[MAX_CHILDREN]
    cdef bint inline

    def __cinit__(self, base, Transport transport, word, int parent, children,
                  Py_ssize_t nbytes, Py_ssize_t align, bint inline, Py_ssize_t capacity, rest,
                  algorithm=""):
        if len(children) > MAX_CHILDREN:
            raise ValueError(f"{len(children)} children: more than the lane holds")
        if len(word) != WORD_BYTES or capacity < WORD_BYTES + (nbytes if inline else 0):
            raise ValueError(f"a header of {len(word)} bytes in {capacity}")
        self.base, self.calls, self.transport, self.rest = base, base._calls, transport, rest
        self.parent, self.nchildren = parent, len(children)
        for i, child in enumerate(children):
            self.children[i] = child
        self.nbytes, self.align, self.inline, self.capacity = nbytes, align, inline, capacity
        self.algorithm = algorithm
        self.nmessages = (self.nchildren + (parent >= 0)) * (1 if inline else 2)
        self.expected = bytes(word)
        # The root's message (the word, then the data when inline); a
        # receiver's room for whatever header the root may send.
        self.message = np.zeros(capacity, np.uint8)
        self.message[:WORD_BYTES] = np.frombuffer(self.expected, np.uint8)

    cdef int forward(self, const char *buf, int n, int tag, double deadline) noexcept nogil:
        cdef int i, rc = 0
        for i in range(self.nchildren):
            rc = send_by(buf, n, self.children[i], tag, self.transport.comm,
                         self.transport.status, deadline, &self.stuck_peer)
            if rc != 0:
                break
            self.done += 1
        return rc

    cdef int receive(self, char *buf, int n, int tag, double deadline) noexcept nogil:
        cdef int rc = recv_by(buf, n, self.parent, tag, self.transport.comm,
                              self.transport.status, deadline, &self.stuck_peer)
        self.done += rc == 0
        return rc

    cdef object call(self, x, algorithm, double deadline=0.0, bint guessed=False):
        """x after the broadcast, or NOT_TAKEN (nothing sent) for an x the
        general path must take. *algorithm*: the caller's. *deadline*: 0,
        or the time.monotonic() by which it must be done (Note [Lane
        deadlines]). *guessed*: x is this lane's guess for a caller's None
        (Note [Broadcasts into None] in pycoll/_lanes.py), which rest() then
        gets back as None."""
        cdef Py_buffer xb, mb
        cdef int rc = 0, tag, count = 0
        cdef char *xp
        cdef char *mp
        cdef Stage st
        cdef bint matched = True
        cdef double started = monotonic() if deadline > 0.0 else 0.0
        st.way = -1                         # nothing to time until stage() says otherwise
        self.done = 0
        try:
            PyObject_GetBuffer(x, &xb, PyBUF_SIMPLE | PyBUF_WRITABLE)
        except (BufferError, ValueError, TypeError):
            return NOT_TAKEN                # read-only or not C-contiguous
        try:
            xp = <char *>xb.buf
            if xb.len != self.nbytes or <uintptr_t>xp % self.align:
                return NOT_TAKEN
            PyObject_GetBuffer(self.message, &mb, PyBUF_SIMPLE | PyBUF_WRITABLE)
            try:
                mp = <char *>mb.buf
                # The data goes to each child out of one copy on huge pages,
                # when that pays (Note [Staging sends]).
                stage_held = self.calls.stage(&self.ways[0], 0 if self.inline or not self.nchildren
                                              else self.nbytes, &st)
                tag = self.calls.next_tag()
                if self.parent < 0:
                    with nogil:
                        if self.inline:
                            memcpy(mp + WORD_BYTES, xp, self.nbytes)
                            rc = self.forward(mp, <int>(WORD_BYTES + self.nbytes), tag, deadline)
                        else:
                            rc = self.forward(mp, WORD_BYTES, tag, deadline)
                    if rc == 0 and not self.inline:
                        tag = self.calls.next_tag()
                        with nogil:
                            rc = self.forward(staged(xp, self.nbytes, &st), <int>self.nbytes,
                                              tag, deadline)
                else:
                    with nogil:
                        rc = self.receive(mp, <int>self.capacity, tag, deadline)
                        if rc == 0:
                            rc = c_get_count(self.transport.status, BYTE, &count)
                        if rc == 0:
                            rc = self.forward(mp, count, tag, deadline)
                    matched = count == WORD_BYTES + (self.nbytes if self.inline else 0) \
                        and memcmp(mp, <char *>self.expected, WORD_BYTES) == 0
                    if rc == 0 and matched:
                        if self.inline:
                            memcpy(xp, mp + WORD_BYTES, self.nbytes)
                        else:
                            tag = self.calls.next_tag()
                            with nogil:
                                rc = self.receive(xp, <int>self.nbytes, tag, deadline)
                                if rc == 0 and self.nchildren:
                                    rc = self.forward(staged(xp, self.nbytes, &st),
                                                      <int>self.nbytes, tag, deadline)
            finally:
                PyBuffer_Release(&mb)
        finally:
            PyBuffer_Release(&xb)
        if matched:
            settle(&self.ways[0], &st, rc)
        if rc == TIMED_OUT:
            raise timed_out(self.base, self.stuck_peer, "broadcast", self.algorithm, self.done,
                            self.nmessages, monotonic() - started)
        check(rc, "the broadcast lane")
        if not matched:
            return self.rest(None if guessed else x, self.message[:count], deadline, algorithm)
        return x


def broadcast(comm, x, root, algorithm, timeout=None):
    """The lane of a repeated, plain broadcast: x, filled; off the root,
    for x None, a new array (Note [Broadcasts into None] in
    pycoll/_lanes.py)."""
    if type(root) is not int or not in_turn(comm):
        return NOT_TAKEN                    # queued calls first (Note [Issue order])
    guessed = x is None
    try:
        if guessed:
            last = comm._plans.get(("broadcast-none", root, algorithm))
            if last is None:
                return NOT_TAKEN
            dtype, shape = last
        elif type(x) is ndarray:
            dtype, shape = x.dtype, x.shape
        else:
            return NOT_TAKEN
        lane = comm._plans.get(("broadcast-lane", dtype, shape, root, algorithm))
    except TypeError:
        return NOT_TAKEN
    if lane is None:
        return NOT_TAKEN
    if guessed:
        x = np.empty(shape, dtype)
    return (<BroadcastLane>lane).call(x, algorithm, lane_deadline(comm, timeout), guessed)


def allreduce(comm, x, op, algorithm, out, accumulate, timeout=None):
    """The lane of a repeated, plain allreduce: the result; None for any
    other call."""
    if type(x) is not ndarray or not in_turn(comm):
        return None                         # queued calls first (Note [Issue order])
    try:
        plan = comm._plans.get(("allreduce", x.dtype, x.shape, op, algorithm, accumulate))
    except TypeError:
        return None
    if plan is None:
        return None
    lane = plan.lane
    if lane is None:
        return None
    if type(lane) is ReduceScatterLane:     # the ring (allreduce_ring.chunk_schedule)
        return (<ReduceScatterLane>lane).run(x, out, lane_deadline(comm, timeout))
    result = (<Lane>lane).call(x, out, lane_deadline(comm, timeout))
    return None if result is NOT_TAKEN else result


def reduce(comm, x, op, root, algorithm, out, accumulate, timeout=None):
    """The lane of a repeated, plain reduce: the result on the root, None
    elsewhere."""
    if type(x) is not ndarray or type(root) is not int or not in_turn(comm):
        return NOT_TAKEN                    # queued calls first (Note [Issue order])
    return plan_lane_call(comm, ("reduce", x.dtype, x.shape, op, root, algorithm, accumulate),
                          x, out, timeout)


def scan(comm, x, op, exclusive, algorithm, out, accumulate, timeout=None):
    """The lane of a repeated, plain scan: the result (None on rank 0 of
    an exclusive scan)."""
    if type(x) is not ndarray or type(exclusive) is not bool or not in_turn(comm):
        return NOT_TAKEN                    # queued calls first (Note [Issue order])
    return plan_lane_call(comm, ("scan", x.dtype, x.shape, op, exclusive, algorithm, accumulate),
                          x, out, timeout)


cdef object plan_lane_call(comm, tuple key, x, out, timeout):
    """The call on the Lane (or ScanLane) of the plan kept under *key*;
    NOT_TAKEN, with nothing sent, when there is none or it declines."""
    try:
        plan = comm._plans.get(key)
    except TypeError:
        return NOT_TAKEN
    if plan is None or plan.lane is None:
        return NOT_TAKEN
    return (<Lane>plan.lane).call(x, out, lane_deadline(comm, timeout))


def reduce_scatter(comm, x, op, algorithm, out, accumulate, timeout=None):
    """The lane of a repeated, plain reduce_scatter: this rank's block;
    None for any other call."""
    if type(x) is not ndarray or not in_turn(comm):
        return None                         # queued calls first (Note [Issue order])
    try:
        plan = comm._plans.get(("reduce_scatter", x.dtype, x.shape, op, algorithm, accumulate))
    except TypeError:
        return None
    if plan is None or plan.lane is None:
        return None
    if type(plan.lane) is Lane:             # p = 1 (_lanes.py, Note [Solo lanes])
        return (<Lane>plan.lane).run(x, out, lane_deadline(comm, timeout))
    return (<ReduceScatterLane>plan.lane).run(x, out, lane_deadline(comm, timeout))
