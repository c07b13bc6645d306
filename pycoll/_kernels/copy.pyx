# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
# cython: cdivision=True, embedsignature=True
"""Copies between arrays of any layout and contiguous byte buffers.

Two building blocks of the collectives and of fusion:

- ``split_copy`` / ``concat_copy``: block *index* of
  ``np.array_split(array, parts, axis)`` to or from a contiguous buffer that
  holds the block in C order. Gather, scatter and alltoall along an axis are
  a loop over blocks.
- ``PackPlan`` (and the one-shot ``pack`` / ``unpack``): many arrays of any
  dtype and layout to or from one flat buffer at fixed byte offsets. The
  plan holds the arrays' buffers, so a fusion bucket packs with one call and
  no per-array Python work.

Arrays are taken through the buffer protocol without a format, which numpy
grants for every dtype (bfloat16 included) and every layout (Fortran order,
negative strides).
"""

from cpython.mem cimport PyMem_Calloc, PyMem_Free
from libc.string cimport memcpy
from libc.stdint cimport uint8_t, uint16_t, uint32_t, uint64_t

cdef extern from "kernels.h" nogil:
    void pycoll_stream_copy(void *dst, const void *src, size_t n) noexcept
    void pycoll_stream_fence() noexcept

# A pack at least this large streams its stores past the cache (stream.c).
cdef Py_ssize_t STREAM_BYTES = 16 << 20

from pycoll._kernels._buffer cimport (acquire, PyObject_GetBuffer, PyBuffer_Release,
                                     PyBUF_STRIDES, PyBUF_WRITABLE)

# One specialisation of the element copy per item size, so that each copy is
# a single fixed-size move (memcpy of a constant size compiles to one load
# and one store, aligned or not).
ctypedef fused item_t:
    uint8_t
    uint16_t
    uint32_t
    uint64_t
    item128

cpdef tuple block(Py_ssize_t n, Py_ssize_t parts, Py_ssize_t index):
    """(start, length) of block *index* of ``np.array_split`` of *n* items.

    The first ``n % parts`` blocks hold one item more than the others.
    """
    if parts < 1 or not 0 <= index < parts:
        raise ValueError(f"block {index} of {parts} does not exist")
    cdef Py_ssize_t base = n // parts, extra = n % parts
    return index * base + min(index, extra), base + (index < extra)


cdef void region_init(Region *r, Py_buffer *view, Py_ssize_t axis,
                      Py_ssize_t start, Py_ssize_t length) noexcept nogil:
    """*r* = the view, restricted to [start, start+length) along *axis*
    (axis -1: the whole view), in coalesced form."""
    cdef int k, nd = 0
    cdef Py_ssize_t n, s
    r.itemsize = view.itemsize
    r.ptr = <char *>view.buf
    for k in range(view.ndim):
        n = view.shape[k]
        s = view.strides[k]
        if k == axis:
            r.ptr += start * s
            n = length
        if n == 0:
            r.ndim = -1                 # empty: nothing to copy
            return
        if n == 1:
            continue
        if nd > 0 and r.strides[nd - 1] == n * s:
            r.shape[nd - 1] *= n        # merge with the previous dim
            r.strides[nd - 1] = s
        else:
            r.shape[nd] = n
            r.strides[nd] = s
            nd += 1
    r.ndim = nd


cdef inline void copy_items(item_t *kind, char *dst, Py_ssize_t dst_step,
                            const char *src, Py_ssize_t src_step, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i
    for i in range(n):
        memcpy(dst + i * dst_step, src + i * src_step, sizeof(item_t))


cdef void copy_row(char *dst, Py_ssize_t dst_step, const char *src, Py_ssize_t src_step,
                   Py_ssize_t n, Py_ssize_t itemsize) noexcept nogil:
    """Copy n items between two strided rows."""
    cdef Py_ssize_t i
    if dst_step == itemsize and src_step == itemsize:
        memcpy(dst, src, n * itemsize)
    elif itemsize == 1:
        copy_items(<uint8_t *>NULL, dst, dst_step, src, src_step, n)
    elif itemsize == 2:
        copy_items(<uint16_t *>NULL, dst, dst_step, src, src_step, n)
    elif itemsize == 4:
        copy_items(<uint32_t *>NULL, dst, dst_step, src, src_step, n)
    elif itemsize == 8:
        copy_items(<uint64_t *>NULL, dst, dst_step, src, src_step, n)
    elif itemsize == 16:
        copy_items(<item128 *>NULL, dst, dst_step, src, src_step, n)
    else:
        for i in range(n):
            memcpy(dst + i * dst_step, src + i * src_step, itemsize)


cdef void copy_region(Region *r, char *buf, bint to_buffer) noexcept nogil:
    """Copy region *r* to (or from) the contiguous buffer *buf*, in C order."""
    cdef Py_ssize_t index[MAX_DIMS]
    cdef Py_ssize_t inner, step, row, rows = 1
    cdef int k, nd = r.ndim
    cdef char *p = r.ptr
    if nd < 0:
        return
    if nd == 0:
        memcpy(buf if to_buffer else p, p if to_buffer else buf, r.itemsize)
        return
    inner = r.shape[nd - 1]
    step = r.strides[nd - 1]
    row = inner * r.itemsize
    for k in range(nd - 1):
        rows *= r.shape[k]
        index[k] = 0
    while rows > 0:
        if to_buffer:
            copy_row(buf, r.itemsize, p, step, inner, r.itemsize)
        else:
            copy_row(p, step, buf, r.itemsize, inner, r.itemsize)
        buf += row
        rows -= 1
        # Advance the outer index like an odometer, moving p along.
        k = nd - 2
        while k >= 0:
            index[k] += 1
            p += r.strides[k]
            if index[k] < r.shape[k]:
                break
            p -= r.strides[k] * r.shape[k]
            index[k] = 0
            k -= 1


cdef Py_ssize_t block_region(Region *r, Py_buffer *view, Py_ssize_t axis,
                             Py_ssize_t parts, Py_ssize_t index) except -1:
    """Set *r* to block *index* of *parts* along *axis*; return its bytes."""
    cdef Py_ssize_t k, nbytes, start, length
    if view.ndim == 0:
        raise ValueError("a 0-d array has no axis to split")
    if not -view.ndim <= axis < view.ndim:
        raise ValueError(f"axis {axis} is out of range for {view.ndim} dimensions")
    if axis < 0:
        axis += view.ndim
    start, length = block(view.shape[axis], parts, index)
    nbytes = length * view.itemsize
    for k in range(view.ndim):
        if k != axis:
            nbytes *= view.shape[k]
    region_init(r, view, axis, start, length)
    return nbytes


def split_copy(array, out, Py_ssize_t axis, Py_ssize_t parts, Py_ssize_t index):
    """out = block *index* of ``np.array_split(array, parts, axis)``, C order.

    *out* is a contiguous buffer of exactly the block's bytes. Returns the
    number of bytes copied.

        >>> x = np.arange(10).reshape(5, 2)          # blocks of 2, 2, 1 rows
        >>> out = np.empty((2, 2), x.dtype)
        >>> split_copy(x, out, 0, 3, 1); out
        array([[4, 5], [6, 7]])
    """
    cdef Py_buffer va, vo
    cdef Region r
    cdef Py_ssize_t nbytes
    acquire(array, &va, False, True, "array")
    try:
        nbytes = block_region(&r, &va, axis, parts, index)
        acquire(out, &vo, True, False, "out")
        try:
            if vo.len != nbytes:
                raise ValueError(f"out has {vo.len} bytes, block {index} of {parts} "
                                 f"along axis {axis} has {nbytes}")
            with nogil:
                copy_region(&r, <char *>vo.buf, True)
        finally:
            PyBuffer_Release(&vo)
    finally:
        PyBuffer_Release(&va)
    return nbytes


def concat_copy(buffer, out, Py_ssize_t axis, Py_ssize_t parts, Py_ssize_t index):
    """Block *index* of ``np.array_split(out, parts, axis)`` = *buffer*.

    The inverse of ``split_copy``: *buffer* holds the block in C order, *out*
    is a writable array of any layout. Returns the number of bytes copied.
    """
    cdef Py_buffer vb, vo
    cdef Region r
    cdef Py_ssize_t nbytes
    acquire(out, &vo, True, True, "out")
    try:
        nbytes = block_region(&r, &vo, axis, parts, index)
        acquire(buffer, &vb, False, False, "buffer")
        try:
            if vb.len != nbytes:
                raise ValueError(f"buffer has {vb.len} bytes, block {index} of {parts} "
                                 f"along axis {axis} has {nbytes}")
            with nogil:
                copy_region(&r, <char *>vb.buf, False)
        finally:
            PyBuffer_Release(&vb)
    finally:
        PyBuffer_Release(&vo)
    return nbytes


def stream_copy(out, buffer):
    """*out* = *buffer* (contiguous, the same number of bytes), written with
    non-temporal stores that leave nothing in this core's caches (stream.c):
    how a staged send may fill its stage (Note [Choosing the way] in
    pycoll/_resources.pyx). Returns the number of bytes copied."""
    cdef Py_buffer vb, vo
    acquire(out, &vo, True, False, "out")
    try:
        acquire(buffer, &vb, False, False, "buffer")
        try:
            if vb.len != vo.len:
                raise ValueError(f"buffer has {vb.len} bytes, out has {vo.len}")
            with nogil:
                pycoll_stream_copy(vo.buf, vb.buf, <size_t>vb.len)
                pycoll_stream_fence()
            return vb.len
        finally:
            PyBuffer_Release(&vb)
    finally:
        PyBuffer_Release(&vo)


cdef class PackPlan:
    """Where each of many arrays sits in one flat buffer, fixed once.

        >>> plan = PackPlan([a, b, c])            # offsets aligned to each itemsize
        >>> buf = np.empty(plan.nbytes, np.uint8)
        >>> plan.pack(buf)                         # a, b, c -> buf
        >>> plan.unpack(buf)                       # buf -> a, b, c, in place

    Arrays may have any dtype and layout; contiguous ones move with one
    memcpy each, others with a strided copy. The plan holds the arrays'
    buffers until it is released or collected, so their memory stays put.
    Explicit *offsets* (bytes) must not make two arrays overlap.
    """
    def __cinit__(self, arrays, offsets=None):
        arrays = list(arrays)
        self.count = 0
        self.views = <Py_buffer *>PyMem_Calloc(max(len(arrays), 1), sizeof(Py_buffer))
        self.starts = <Py_ssize_t *>PyMem_Calloc(max(len(arrays), 1), sizeof(Py_ssize_t))
        self.contiguous = <bint *>PyMem_Calloc(max(len(arrays), 1), sizeof(bint))
        if self.views == NULL or self.starts == NULL or self.contiguous == NULL:
            raise MemoryError()
        if offsets is not None and len(offsets) != len(arrays):
            raise ValueError(f"{len(offsets)} offsets for {len(arrays)} arrays")
        self.writable = True
        cdef Py_ssize_t i, end = 0, start
        cdef Py_buffer *v
        for i, array in enumerate(arrays):
            v = &self.views[i]
            try:
                PyObject_GetBuffer(array, v, PyBUF_STRIDES | PyBUF_WRITABLE)
            except (BufferError, ValueError, TypeError):
                # Read-only arrays can still be packed; the error, if any,
                # comes from acquire with the array's index in it.
                acquire(array, v, False, True, f"array {i}")
                self.writable = False
            self.count = i + 1
            self.contiguous[i] = _is_c_contiguous(v)
            if offsets is None:
                # the next multiple of the itemsize (natural alignment)
                start = (end + v.itemsize - 1) // v.itemsize * v.itemsize
            else:
                start = offsets[i]
                if start < 0:
                    raise ValueError(f"offset {start} of array {i} is negative")
            self.starts[i] = start
            end = max(end, start + v.len)
        if offsets is not None:
            _check_disjoint([(self.starts[i], self.views[i].len) for i in range(self.count)])
        self.nbytes = end
        self.offsets = tuple(self.starts[i] for i in range(self.count))

    def __dealloc__(self):
        cdef Py_ssize_t i
        if self.views != NULL:
            for i in range(self.count):
                PyBuffer_Release(&self.views[i])
        PyMem_Free(self.views)
        PyMem_Free(self.starts)
        PyMem_Free(self.contiguous)

    def __len__(self):
        return self.count

    def pack(self, out, Py_ssize_t start=0, stop=None):
        """Copy every array into *out* (a contiguous buffer of >= nbytes).

        With *start*/*stop*, only bytes [start, stop) of the packed layout,
        into out[0:stop - start]: a piece of a large bucket, packed while
        it is still in cache. A range may cut through a C-contiguous array,
        not through a strided one."""
        self._run(out, True, start, self.nbytes if stop is None else stop)

    def unpack(self, buffer, Py_ssize_t start=0, stop=None):
        """Copy *buffer*'s regions back into the arrays (with *start*/*stop*:
        buffer[0:stop - start] holds bytes [start, stop) of the layout)."""
        if not self.writable:
            raise ValueError("cannot unpack into read-only arrays")
        self._run(buffer, False, start, self.nbytes if stop is None else stop)

    cdef int _run(self, buffer, bint to_buffer, Py_ssize_t start, Py_ssize_t stop) except -1:
        cdef Py_buffer vb
        cdef Region r
        cdef Py_ssize_t i, lo, hi, a_lo, a_hi
        cdef char *base
        cdef char *array
        cdef bint stream
        if not 0 <= start <= stop <= self.nbytes:
            raise ValueError(f"range [{start}, {stop}) is outside the plan's {self.nbytes} bytes")
        for i in range(self.count):
            a_lo, a_hi = self.starts[i], self.starts[i] + self.views[i].len
            if not self.contiguous[i] and a_lo < stop and start < a_hi and not (
                    start <= a_lo and a_hi <= stop):
                raise ValueError(f"range [{start}, {stop}) cuts through array {i} "
                                 f"(bytes [{a_lo}, {a_hi}), not contiguous)")
        acquire(buffer, &vb, to_buffer, False, "out" if to_buffer else "buffer")
        try:
            if vb.len < stop - start:
                need = ("the plan needs" if start == 0 and stop == self.nbytes
                        else f"bytes [{start}, {stop}) need")
                raise ValueError(f"{'out' if to_buffer else 'buffer'} has {vb.len} bytes, "
                                 f"{need} {stop - start}")
            base = <char *>vb.buf - start          # base + k is byte k of the layout
            stream = to_buffer and stop - start >= STREAM_BYTES
            with nogil:
                for i in range(self.count):
                    a_lo = self.starts[i]
                    a_hi = a_lo + self.views[i].len
                    lo = max(a_lo, start)
                    hi = min(a_hi, stop)
                    if lo >= hi:
                        continue
                    if self.contiguous[i]:
                        array = <char *>self.views[i].buf + (lo - a_lo)
                        if stream:
                            pycoll_stream_copy(base + lo, array, hi - lo)
                        elif to_buffer:
                            memcpy(base + lo, array, hi - lo)
                        else:
                            memcpy(array, base + lo, hi - lo)
                    else:
                        region_init(&r, &self.views[i], -1, 0, 0)
                        copy_region(&r, base + lo, to_buffer)
                if stream:
                    pycoll_stream_fence()
        finally:
            PyBuffer_Release(&vb)
        return 0


cdef bint _is_c_contiguous(Py_buffer *v) noexcept:
    cdef Py_ssize_t expected = v.itemsize
    cdef int k
    if v.strides == NULL:
        return True
    for k in range(v.ndim - 1, -1, -1):
        if v.shape[k] > 1 and v.strides[k] != expected:
            return False
        expected *= v.shape[k]
    return True


def first_overlap(arrays, shares, allowed=None):
    """Two of *arrays* that share memory, as indices (i, j) with i < j, or
    None. Arrays of no bytes share nothing; nor does a pair (i, j), i < j,
    for which ``allowed(i, j)`` is true.

    Each array's extent (its lowest byte to one past its highest) comes
    from its buffer, any layout; sorted by start, only arrays whose extents
    intersect go to *shares* (numpy.shares_memory), which tells views that
    interleave without sharing an element (a[::2] and a[1::2]) from views
    that share one. About 0.5 us an array: the FusionManager checks every
    new list of arrays it is to write."""
    cdef Py_buffer v
    cdef Py_ssize_t i, k, lo, hi
    spans = []
    for i, array in enumerate(arrays):
        acquire(array, &v, False, True, f"array {i}")
        try:
            if v.len == 0:
                continue
            lo = hi = <Py_ssize_t>v.buf
            for k in range(v.ndim):
                if v.strides[k] < 0:
                    lo += (v.shape[k] - 1) * v.strides[k]
                else:
                    hi += (v.shape[k] - 1) * v.strides[k]
            spans.append((lo, hi + v.itemsize, i))
        finally:
            PyBuffer_Release(&v)
    spans.sort()
    reaching = []                       # (end, index) of earlier extents
    for lo, hi, i in spans:
        reaching = [(end, j) for end, j in reaching if end > lo]
        for _, j in reaching:
            pair = (i, j) if i < j else (j, i)
            if (allowed is None or not allowed(*pair)) and shares(arrays[i], arrays[j]):
                return pair
        reaching.append((hi, i))
    return None


def _check_disjoint(regions):
    regions = sorted((start, n) for start, n in regions if n)
    for (s0, n0), (s1, n1) in zip(regions, regions[1:]):
        if s0 + n0 > s1:
            raise ValueError(f"regions at offsets {s0} ({n0} bytes) and {s1} overlap")


def pack(arrays, out, offsets=None):
    """Copy *arrays* into the flat buffer *out*; returns the bytes used.

    Offsets default to consecutive places, each aligned to its array's
    itemsize. For repeated packing of the same arrays build a PackPlan once.
    """
    plan = PackPlan(arrays, offsets)
    plan.pack(out)
    return plan.nbytes


def unpack(buffer, arrays, offsets=None):
    """Copy regions of *buffer* back into *arrays* (the inverse of pack)."""
    plan = PackPlan(arrays, offsets)
    plan.unpack(buffer)
    return plan.nbytes
