# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
# cython: cdivision=True, embedsignature=True
"""Reductions, AVG's division and half-precision conversion on raw buffers.

Every function takes C-contiguous buffers (numpy arrays of any dtype,
bfloat16 included, byte views, bytearrays) and integer codes for the op and
the element type: the codes are the keys of ``OPS`` and ``DTYPES``.
``pycoll._dtypes`` maps numpy dtypes and op names to them; these kernels
trust the code and check only what they can see (sizes, writability,
alignment, overlap).

    >>> a = np.array([1, 2, 3], np.float32); b = np.array([10, 20, 30], np.float32)
    >>> reduce(OPS["sum"], DTYPES["float32"], a, a, b)     # in place: a += b
    >>> a
    array([11., 22., 33.], dtype=float32)

The loops are C (src/loops.c, src/half.c) so that they can be compiled for
several instruction sets and picked at run time; this module owns the
checks and the GIL.
"""

from libc.stdint cimport uintptr_t

from pycoll._kernels._buffer cimport acquire, PyBuffer_Release

# Names of the codes, for callers and for error messages.
OPS = {
    "sum": PYCOLL_SUM, "prod": PYCOLL_PROD, "max": PYCOLL_MAX, "min": PYCOLL_MIN,
    "band": PYCOLL_BAND, "bor": PYCOLL_BOR, "bxor": PYCOLL_BXOR,
}
DTYPES = {
    "bool": PYCOLL_BOOL,
    "int8": PYCOLL_INT8, "int16": PYCOLL_INT16, "int32": PYCOLL_INT32, "int64": PYCOLL_INT64,
    "uint8": PYCOLL_UINT8, "uint16": PYCOLL_UINT16, "uint32": PYCOLL_UINT32,
    "uint64": PYCOLL_UINT64,
    "float16": PYCOLL_FLOAT16, "bfloat16": PYCOLL_BFLOAT16,
    "float32": PYCOLL_FLOAT32, "float64": PYCOLL_FLOAT64,
    "complex64": PYCOLL_COMPLEX64, "complex128": PYCOLL_COMPLEX128,
}
_OP_NAMES = {code: name.upper() for name, code in OPS.items()}
_DTYPE_NAMES = {code: name for name, code in DTYPES.items()}

# Below this many bytes a loop is over before releasing the GIL would pay off.
cdef Py_ssize_t RELEASE_GIL_BYTES = 1 << 16


cdef pycoll_binary_loop loop_for(int op, int dtype) noexcept nogil:
    """The loop for (op, dtype), or NULL where the pair is undefined."""
    return pycoll_reduce_loop(op, dtype)


cdef int scale_buffer(int dtype, void *out, const void *x, double divisor, size_t n) noexcept nogil:
    """out = x / divisor for n elements; -1 for a dtype without division."""
    return pycoll_scale(dtype, out, x, divisor, n)


cdef size_t itemsize_of(int dtype) noexcept nogil:
    return pycoll_itemsize(dtype)


cdef int convert_buffer(int src_dtype, int dst_dtype, void *out, const void *x,
                        size_t n) noexcept nogil:
    """out = x converted, n elements between float32 and float16/bfloat16
    (as convert(), unchecked); -1 for another pair."""
    return pycoll_convert(src_dtype, dst_dtype, out, x, n)


def supports(int op, int dtype):
    """Whether the reduction *op* is defined for *dtype*."""
    return pycoll_reduce_loop(op, dtype) is not NULL


def itemsize(int dtype):
    """Bytes per element of *dtype*."""
    _check_dtype(dtype)
    return pycoll_itemsize(dtype)


# The float16/bfloat16 levels, fastest first (src/half.c).
HALF_ISAS = ("avx512bf16", "avx512", "avx2", "baseline")


def half_isa():
    """Instruction set of the float16/bfloat16 loops, one of HALF_ISAS."""
    return pycoll_half_isa().decode()


def half_isas():
    """The level this CPU runs and every level below it (what _set_half_isa
    accepts)."""
    return HALF_ISAS[HALF_ISAS.index(half_isa()):]


def _set_half_isa(str name):
    """Use the float16/bfloat16 loops of one instruction set (for tests)."""
    if pycoll_set_half_isa(name.encode()) != 0:
        raise ValueError(f"half-precision level {name!r} is not available on this CPU")


cdef int _check_dtype(int dtype) except -1:
    if not 0 <= dtype < PYCOLL_NUM_DTYPES:
        raise ValueError(f"unknown dtype code {dtype}")
    return 0


cdef int _check_operand(Py_buffer *view, Py_ssize_t nbytes, Py_ssize_t align,
                        str name) except -1:
    if view.len != nbytes:
        raise ValueError(f"{name} has {view.len} bytes, expected {nbytes}")
    if <uintptr_t>view.buf % align:
        raise ValueError(f"{name} is not aligned to {align} bytes")
    return 0


cdef int _check_overlap(Py_buffer *out, Py_buffer *x, str name) except -1:
    """out may be x itself (in place) but must not partly overlap it."""
    cdef char *o = <char *>out.buf
    cdef char *p = <char *>x.buf
    if o != p and o < p + x.len and p < o + out.len:
        raise ValueError(f"out partly overlaps {name}; pass the same buffer to work in place")
    return 0


def reduce(int op, int dtype, out, a, b):
    """out = a <op> b elementwise, with a on the left.

    out may be a or b (in place); all three hold the same number of
    elements of *dtype*. The result depends only on the values (Note
    [Operand order] in src/kernels.h), so every rank that reduces the same
    operands in the same order gets the same bits.

    Raises TypeError when *op* is not defined for *dtype*, ValueError for an
    unknown code, a size mismatch, a read-only out or a partial overlap;
    nothing is written then.
    """
    cdef pycoll_binary_loop loop = pycoll_reduce_loop(op, dtype)
    if loop is NULL:
        if op not in _OP_NAMES:
            raise ValueError(f"unknown op code {op}")
        _check_dtype(dtype)
        raise TypeError(f"{_OP_NAMES[op]} is not defined for {_DTYPE_NAMES[dtype]}")
    cdef Py_ssize_t size = pycoll_itemsize(dtype)
    cdef Py_ssize_t align = 8 if size == 16 else size
    cdef Py_buffer vo, va, vb
    acquire(a, &va, False, False, "a")
    try:
        acquire(b, &vb, False, False, "b")
        try:
            acquire(out, &vo, True, False, "out")
            try:
                if va.len % size:
                    raise ValueError(f"a has {va.len} bytes, not a multiple of "
                                     f"{_DTYPE_NAMES[dtype]}'s {size}")
                _check_operand(&va, va.len, align, "a")
                _check_operand(&vb, va.len, align, "b")
                _check_operand(&vo, va.len, align, "out")
                _check_overlap(&vo, &va, "a")
                _check_overlap(&vo, &vb, "b")
                if va.len >= RELEASE_GIL_BYTES:
                    with nogil:
                        loop(vo.buf, va.buf, vb.buf, va.len // size)
                else:
                    loop(vo.buf, va.buf, vb.buf, va.len // size)
            finally:
                PyBuffer_Release(&vo)
        finally:
            PyBuffer_Release(&vb)
    finally:
        PyBuffer_Release(&va)


def scale(int dtype, out, x, double divisor):
    """out = x / divisor elementwise, for floating and complex dtypes.

    AVG's last step. float16/bfloat16 divide in float32 and round once;
    complex values divide component-wise. out may be x.
    """
    _check_dtype(dtype)
    if dtype not in (PYCOLL_FLOAT16, PYCOLL_BFLOAT16, PYCOLL_FLOAT32, PYCOLL_FLOAT64,
                     PYCOLL_COMPLEX64, PYCOLL_COMPLEX128):
        raise TypeError(f"scale is not defined for {_DTYPE_NAMES[dtype]}")
    cdef Py_ssize_t size = pycoll_itemsize(dtype)
    cdef Py_ssize_t align = 8 if size == 16 else size
    cdef Py_buffer vo, vx
    cdef int rc
    acquire(x, &vx, False, False, "x")
    try:
        acquire(out, &vo, True, False, "out")
        try:
            if vx.len % size:
                raise ValueError(f"x has {vx.len} bytes, not a multiple of {size}")
            _check_operand(&vx, vx.len, align, "x")
            _check_operand(&vo, vx.len, align, "out")
            _check_overlap(&vo, &vx, "x")
            with nogil:
                rc = pycoll_scale(dtype, vo.buf, vx.buf, divisor, vx.len // size)
        finally:
            PyBuffer_Release(&vo)
    finally:
        PyBuffer_Release(&vx)


def convert(int src_dtype, int dst_dtype, out, x):
    """out = x converted elementwise, between float32 and float16/bfloat16.

    Widening is exact; narrowing rounds to nearest even. This is the
    accumulate="float32" path: widen once, reduce in float32, narrow once.
    """
    _check_dtype(src_dtype)
    _check_dtype(dst_dtype)
    cdef bint ok = ((src_dtype == PYCOLL_FLOAT32 and dst_dtype in (PYCOLL_FLOAT16, PYCOLL_BFLOAT16))
                    or (dst_dtype == PYCOLL_FLOAT32 and src_dtype in (PYCOLL_FLOAT16, PYCOLL_BFLOAT16)))
    if not ok:
        raise TypeError(f"convert goes between float32 and float16/bfloat16, "
                        f"not {_DTYPE_NAMES[src_dtype]} to {_DTYPE_NAMES[dst_dtype]}")
    cdef Py_ssize_t src_size = pycoll_itemsize(src_dtype), dst_size = pycoll_itemsize(dst_dtype)
    cdef Py_buffer vo, vx
    cdef Py_ssize_t n
    acquire(x, &vx, False, False, "x")
    try:
        acquire(out, &vo, True, False, "out")
        try:
            if vx.len % src_size:
                raise ValueError(f"x has {vx.len} bytes, not a multiple of {src_size}")
            n = vx.len // src_size
            _check_operand(&vx, vx.len, src_size, "x")
            _check_operand(&vo, n * dst_size, dst_size, "out")
            _check_overlap(&vo, &vx, "x")
            if vo.buf == vx.buf:
                raise ValueError("convert cannot work in place: out and x differ in size")
            with nogil:
                pycoll_convert(src_dtype, dst_dtype, vo.buf, vx.buf, n)
        finally:
            PyBuffer_Release(&vo)
    finally:
        PyBuffer_Release(&vx)
