"""Normalise at the edge: any array-like to a contiguous array and byte view.

Everything the caller passes (numpy arrays of any layout, ml_dtypes bfloat16
arrays, objects with the buffer protocol, ``__array_interface__`` or
``__dlpack__`` such as CPU torch tensors) becomes a ``Message`` once, at the
API edge. Algorithms see only ``Message.data``, a flat uint8 view, and the
dtype code; they never meet a numpy quirk or a torch object.

- Zero-copy when the input is C-contiguous and aligned; otherwise a packed
  copy (for an output, with a write-back to the caller's view at the end).
- Errors name the argument and the numbers: "out has shape (4, 3), expected
  (8, 3)".
"""
from __future__ import annotations

import sys

import numpy as np

from pycoll._dtypes import BY_NAME, DType, dtype_of
from pycoll._kernels.copy import pack, unpack

_ACCEPTED = "a numpy array or an object with the buffer protocol, __array_interface__ or __dlpack__"


class Message:
    """A caller's array as pycoll moves it.

    array      C-contiguous, aligned ndarray with the caller's shape and dtype
               (the caller's own memory, or a packed copy of it)
    data       flat uint8 view of ``array``: what goes on the wire
    dtype      the DType (kernel code, itemsize)
    writeback  the caller's array when ``array`` is a copy that must be
               written back after the collective, else None
    """

    __slots__ = ("array", "data", "dtype", "writeback")

    def __init__(self, array: np.ndarray, dtype: DType, writeback: np.ndarray | None = None):
        self.array = array
        self.data = array.reshape(-1).view(np.uint8)
        self.dtype = dtype
        self.writeback = writeback

    @property
    def shape(self) -> tuple:
        return self.array.shape

    @property
    def count(self) -> int:
        return self.array.size

    @property
    def nbytes(self) -> int:
        return self.array.nbytes

    def finish(self) -> np.ndarray:
        """Write back to the caller's view if needed; return the caller's array."""
        if self.writeback is None:
            return self.array
        unpack(self.data, [self.writeback])
        return self.writeback

    def __repr__(self) -> str:
        copy = ", copy" if self.writeback is not None else ""
        return f"Message({self.dtype.name}, shape={self.shape}{copy})"


def as_array(x, name: str = "x") -> np.ndarray:
    """View *x* as a numpy array without copying where the source allows.

    TypeError for objects that are not arrays (lists, scalars of Python,
    None) and for dtypes pycoll does not support.
    """
    if type(x) is np.ndarray:
        return x
    if type(x) is _TENSOR[0] and not x.requires_grad and x.dtype is not _TENSOR[1]:
        try:
            return x.numpy()                # Note [Reading a tensor]
        except (TypeError, RuntimeError, NotImplementedError):
            pass                            # _from_torch says why
    if isinstance(x, np.ndarray):
        return x.view(np.ndarray)
    if isinstance(x, np.generic):
        # A read-only view of the scalar's bytes. np.asarray would copy
        # them into a writable 0-d array, and a result written there
        # would never reach the (immutable) scalar.
        return np.ndarray((), x.dtype, buffer=x)
    if hasattr(x, "__dlpack__"):
        array = _from_dlpack(x, name)
    elif hasattr(x, "__array_interface__"):
        array = np.asarray(x)
    else:
        if type(x).__name__ in _MPI_SENTINELS and type(x).__module__ == "mpi4py.MPI":
            # buffers of no bytes at address 0 (IN_PLACE) or anywhere (BOTTOM)
            raise TypeError(f"{name} is {_MPI_SENTINELS[type(x).__name__]}")
        try:
            array = np.asarray(memoryview(x))
        except TypeError:
            raise TypeError(f"{name} must be {_ACCEPTED}; got {type(x).__name__}") from None
    return array


_MPI_SENTINELS = {
    "InPlaceType": "MPI.IN_PLACE; for a call in place, pass the array as both x and "
                   "out: pycoll.allreduce(buf, out=buf)",
    "BottomType": "MPI.BOTTOM; pycoll takes arrays, not MPI datatypes of absolute addresses",
}


def _from_dlpack(x, name: str) -> np.ndarray:
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor):
        return _from_torch(torch, x, name)
    return _dlpack(x, name)


def _dlpack(x, name: str) -> np.ndarray:
    try:
        return np.from_dlpack(x)
    except (BufferError, TypeError, RuntimeError) as exc:
        raise TypeError(f"{name} cannot be read through DLPack ({exc}); pass a CPU array") from None


# What np.from_dlpack hangs its arrays on.
_CAPSULE = type(np.empty(0).__dlpack__())


def check_writable(array: np.ndarray, name: str, why: str = "") -> None:
    """Raise ValueError("<name> is read-only<why>") unless *array* can be
    written. One that came through DLPack says why it cannot: numpy
    imports it read-only when its exporter marks it so, and numpy before
    2.2.5 imports every DLPack array read-only, whatever the exporter
    allows."""
    if array.flags.writeable:
        return
    if isinstance(array.base, np.generic):
        cause = " (numpy scalars are immutable: pass a 0-d array, np.array(value))"
    elif type(array.base) is not _CAPSULE:
        cause = ""
    elif np.lib.NumpyVersion(np.__version__) < "2.2.5":
        cause = (f" (it came through DLPack, which numpy {np.__version__} imports read-only; "
                 "numpy 2.2.5 and later keep a writable export writable)")
    else:
        cause = " (it came through DLPack, and its exporter marks it read-only)"
    raise ValueError(f"{name} is read-only{cause}{why}")


# Note [Reading a tensor]
# ~~~~~~~~~~~~~~~~~~~~~~~
# A plain CPU tensor (torch.Tensor itself, no autograd, not bfloat16) is
# read with one type test and Tensor.numpy() before the general checks
# (isinstance, hasattr __dlpack__, sys.modules): as_array took 1.29 us a
# call, Tensor.numpy() alone 0.67. _TENSOR holds (torch.Tensor,
# torch.bfloat16) once _from_torch has seen torch, so pycoll never imports
# torch itself; until then, and for anything else, the general path runs.
_TENSOR = (None, None)


def _from_torch(torch, x, name: str) -> np.ndarray:
    """A CPU tensor's memory as numpy, through ``Tensor.numpy()``: the same
    zero-copy view as its DLPack export, for about a third of the cost
    (1.8 against 6.2 us per call here, most of a small call's time). A
    tensor ``numpy()`` refuses (on a GPU, sparse, conjugate bit set) goes
    to DLPack, whose message the error carries."""
    global _TENSOR
    _TENSOR = (torch.Tensor, torch.bfloat16)
    if x.requires_grad:
        x = x.detach()
    # numpy has no bfloat16: move the bits as int16 and view them as
    # ml_dtypes.bfloat16.
    bits = x.dtype == torch.bfloat16
    try:
        if bits:
            x = x.view(torch.int16)
        array = x.numpy()
    except (TypeError, RuntimeError, NotImplementedError):
        array = _dlpack(x, name)
    return array.view(BY_NAME["bfloat16"].numpy) if bits else array


def message(x, name: str = "x") -> Message:
    """The Message of an input array: zero-copy where possible."""
    array = as_array(x, name)
    dtype = dtype_of(array.dtype, name)
    if not (array.flags.c_contiguous and array.flags.aligned):
        array = packed_copy(array)
    return Message(array, dtype)


def output(out, shape: tuple, dtype: DType, name: str = "out") -> Message:
    """The Message of an ``out=`` array: checked against the expected shape
    and dtype, writable; a non-contiguous view gets a copy and a write-back."""
    array = as_array(out, name)
    if array.dtype != dtype.numpy:
        raise TypeError(f"{name} has dtype {array.dtype}, expected {dtype.name}")
    if array.shape != tuple(shape):
        raise ValueError(f"{name} has shape {array.shape}, expected {tuple(shape)}")
    check_writable(array, name)
    if array.flags.c_contiguous and array.flags.aligned:
        return Message(array, dtype)
    return Message(np.empty(array.shape, array.dtype), dtype, writeback=array)


def new(shape: tuple, dtype: DType) -> Message:
    """A Message over a fresh array (a result pycoll allocates)."""
    return Message(np.empty(shape, dtype.numpy), dtype)


def packed_copy(array: np.ndarray) -> np.ndarray:
    """A C-contiguous copy of any layout (numpy's own copy of a bfloat16
    array goes element by element through the dtype's slow path)."""
    copy = np.empty(array.shape, array.dtype)
    pack([array], copy)
    return copy
