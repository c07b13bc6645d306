# Buffer acquisition shared by the kernel modules: one place that turns the
# buffer protocol's errors into pycoll's (ValueError for a read-only or
# non-contiguous argument, TypeError for an object with no buffer).
#
# numpy exports any dtype, bfloat16 included, when no format is requested,
# so kernels take numpy arrays of every supported dtype without a view.
#
# Why Py_buffer and not typed memoryviews (STYLE.md's default): a typed
# memoryview asks for the format, which numpy refuses for bfloat16 ("cannot
# include dtype 'E' in a buffer"), and acquiring one cost 270 ns per
# argument here against 71 ns for a raw Py_buffer: about 0.6 us on every
# three-operand kernel call, half the time budget of an 8-byte allreduce.
# The element loops behind the buffers are typed (C, and the fused item_t
# of copy.pyx).

from cpython.buffer cimport (PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE,
                             PyBUF_WRITABLE, PyBUF_STRIDES)


cdef inline bint exports(object obj, int flags):
    """Whether *obj* can export a buffer with *flags*."""
    cdef Py_buffer view
    try:
        PyObject_GetBuffer(obj, &view, flags)
    except (BufferError, ValueError, TypeError):
        return False
    PyBuffer_Release(&view)
    return True


cdef inline int acquire(object obj, Py_buffer *view, bint writable, bint strided,
                        str name) except -1:
    """Fill *view* for *obj*: contiguous bytes, or shape and strides when
    *strided*; writable when asked. Raises with *name* in the message."""
    cdef int flags = PyBUF_STRIDES if strided else PyBUF_SIMPLE
    if writable:
        flags |= PyBUF_WRITABLE
    try:
        PyObject_GetBuffer(obj, view, flags)
    except (BufferError, ValueError):
        # numpy refuses a read-only array or a non-contiguous one; say which.
        if writable and exports(obj, flags & ~PyBUF_WRITABLE):
            raise ValueError(f"{name} is read-only") from None
        raise ValueError(f"{name} must be C-contiguous") from None
    except TypeError:
        raise TypeError(f"{name} does not support the buffer protocol "
                        f"(got {type(obj).__name__})") from None
    return 0
