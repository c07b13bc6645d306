# Strided copies between arrays and contiguous buffers, for modules that
# cimport them (see copy.pyx).

from libc.stdint cimport uint64_t

cdef enum:
    MAX_DIMS = 64       # numpy's NPY_MAXDIMS

ctypedef struct item128:
    uint64_t lo
    uint64_t hi

cdef struct Region:
    # A strided n-d region of memory: dims of length 1 dropped, a dim merged
    # into the one before it where the two are contiguous; ndim -1 = empty.
    char *ptr
    int ndim
    Py_ssize_t itemsize
    Py_ssize_t shape[MAX_DIMS]
    Py_ssize_t strides[MAX_DIMS]

cpdef tuple block(Py_ssize_t n, Py_ssize_t parts, Py_ssize_t index)
cdef void region_init(Region *r, Py_buffer *view, Py_ssize_t axis,
                      Py_ssize_t start, Py_ssize_t length) noexcept nogil
cdef void copy_region(Region *r, char *buf, bint to_buffer) noexcept nogil

cdef class PackPlan:
    cdef Py_buffer *views
    cdef Py_ssize_t *starts
    cdef bint *contiguous
    cdef Py_ssize_t count
    cdef readonly Py_ssize_t nbytes
    cdef readonly bint writable
    cdef readonly tuple offsets
    cdef int _run(self, buffer, bint to_buffer, Py_ssize_t start, Py_ssize_t stop) except -1
