# The C element loops under pycoll._kernels.reduce, for modules that cimport
# them (a Cython step loop calls a loop from the table without Python).

cdef extern from "kernels.h" nogil:
    enum pycoll_op:
        PYCOLL_SUM
        PYCOLL_PROD
        PYCOLL_MAX
        PYCOLL_MIN
        PYCOLL_BAND
        PYCOLL_BOR
        PYCOLL_BXOR
        PYCOLL_NUM_OPS

    enum pycoll_dtype:
        PYCOLL_BOOL
        PYCOLL_INT8
        PYCOLL_INT16
        PYCOLL_INT32
        PYCOLL_INT64
        PYCOLL_UINT8
        PYCOLL_UINT16
        PYCOLL_UINT32
        PYCOLL_UINT64
        PYCOLL_FLOAT16
        PYCOLL_BFLOAT16
        PYCOLL_FLOAT32
        PYCOLL_FLOAT64
        PYCOLL_COMPLEX64
        PYCOLL_COMPLEX128
        PYCOLL_NUM_DTYPES

    ctypedef void (*pycoll_binary_loop)(void *out, const void *a, const void *b, size_t n) noexcept nogil

    pycoll_binary_loop pycoll_reduce_loop(int op, int dtype) noexcept
    size_t pycoll_itemsize(int dtype) noexcept
    int pycoll_scale(int dtype, void *out, const void *x, double divisor, size_t n) noexcept
    int pycoll_convert(int src_dtype, int dst_dtype, void *out, const void *x, size_t n) noexcept
    const char *pycoll_half_isa() noexcept
    int pycoll_set_half_isa(const char *name) noexcept


# For other extension modules (pycoll/_lane_reduce.pyx): the C loops live in
# this module's shared object, so they are reached through these functions,
# which Cython exports with the module.
cdef pycoll_binary_loop loop_for(int op, int dtype) noexcept nogil
cdef int scale_buffer(int dtype, void *out, const void *x, double divisor, size_t n) noexcept nogil
cdef size_t itemsize_of(int dtype) noexcept nogil
cdef int convert_buffer(int src_dtype, int dst_dtype, void *out, const void *x,
                        size_t n) noexcept nogil
