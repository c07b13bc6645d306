"""The element types and reduction ops pycoll supports, and their kernel codes.

One table says which (op, dtype) pairs exist; the API checks against it
before any message is sent, and the kernels trust it.

- SUM, PROD, MAX, MIN: every dtype, except MAX/MIN on complex.
- BAND, BOR, BXOR: integers and bool.
- AVG: SUM and one division, for floating and complex dtypes.
- On bool, SUM = OR, PROD = AND, MAX = OR, MIN = AND (numpy's add and
  multiply on bools).
"""
from __future__ import annotations

import enum
import functools
from dataclasses import dataclass

import ml_dtypes
import numpy as np

from pycoll._kernels import reduce as _kernels
from pycoll._mpi import mpi


class Op(enum.Enum):
    """A reduction op. Functions also take the lower-case name ("sum")."""

    SUM = "sum"
    PROD = "prod"
    MAX = "max"
    MIN = "min"
    AVG = "avg"
    BAND = "band"
    BOR = "bor"
    BXOR = "bxor"

    @property
    def kernel(self) -> int:
        """The code of the kernel loop; AVG reduces with SUM."""
        return _kernels.OPS["sum" if self is Op.AVG else self.value]

    def __repr__(self) -> str:
        return f"pycoll.{self.name}"

    # Members are singletons: hash by identity, in C (Enum's __hash__ is
    # Python code, and every call hashes its op into the plan key).
    __hash__ = object.__hash__


@dataclass(frozen=True)
class DType:
    """A supported element type: its name, numpy dtype and kernel code."""

    name: str
    numpy: np.dtype
    code: int
    itemsize: int
    kind: str           # "b" bool, "i" signed, "u" unsigned, "f" floating, "c" complex

    @property
    def half(self) -> bool:
        """float16 or bfloat16: reduced in float32, rounded once per step."""
        return self.name in ("float16", "bfloat16")


def _dtype(numpy_dtype) -> DType:
    dt = np.dtype(numpy_dtype)
    kind = "f" if dt == ml_dtypes.bfloat16 else dt.kind
    return DType(dt.name, dt, _kernels.DTYPES[dt.name], dt.itemsize, kind)


DTYPES: dict[np.dtype, DType] = {
    d.numpy: d
    for d in map(_dtype, [
        np.bool_, np.int8, np.int16, np.int32, np.int64,
        np.uint8, np.uint16, np.uint32, np.uint64,
        np.float16, ml_dtypes.bfloat16, np.float32, np.float64,
        np.complex64, np.complex128,
    ])
}
BY_NAME: dict[str, DType] = {d.name: d for d in DTYPES.values()}
BY_CODE: dict[int, DType] = {d.code: d for d in DTYPES.values()}
FLOAT32 = BY_NAME["float32"]

_OPS: dict[object, Op] = {**{op: op for op in Op}, **{op.value: op for op in Op}}


def dtype_of(numpy_dtype, name: str = "x") -> DType:
    """The DType of a numpy dtype; TypeError if pycoll cannot reduce or move it."""
    try:
        return DTYPES[numpy_dtype]
    except (KeyError, TypeError):
        pass
    try:
        # Equal but distinct dtype objects: a scalar type, "<f4", one unpickled.
        return DTYPES[np.dtype(numpy_dtype)]
    except (KeyError, TypeError):
        pass
    swapped = _native(numpy_dtype)
    if swapped is not None:
        raise TypeError(f"{name} has dtype {numpy_dtype} (not this machine's byte order), "
                        f"which pycoll does not support; {name}.astype({swapped.numpy.name!r}) "
                        f"converts it") from None
    supported = ", ".join(BY_NAME)
    raise TypeError(f"{name} has dtype {numpy_dtype}, which pycoll does not support "
                    f"(supported: {supported})") from None


def _native(numpy_dtype) -> DType | None:
    """The supported dtype that *numpy_dtype* is in the other byte order, if any."""
    try:
        return DTYPES.get(np.dtype(numpy_dtype).newbyteorder("="))
    except (TypeError, ValueError):
        return None


def op_of(op) -> Op:
    """Parse an op: a pycoll.Op, its lower-case name, or the mpi4py or
    torch.distributed op of the same reduction (``MPI.SUM`` and
    ``dist.ReduceOp.SUM`` are ``pycoll.SUM``)."""
    try:
        return _OPS[op]
    except (KeyError, TypeError):
        pass
    if isinstance(op, str):
        raise ValueError(f"unknown op {op!r}; expected one of "
                         f"{', '.join(o.value for o in Op)}")
    if type(ours := key_op(op)) is Op:
        return ours
    if type(op).__module__ == "mpi4py.MPI" and type(op).__name__ == "Op":
        known = next((f"MPI.{name}" for name in _MPI_ONLY
                      if op == getattr(mpi(), name, None)), "a user-defined MPI op")
        raise ValueError(f"op is {known}, which pycoll has no kernel for; expected one of "
                         f"{', '.join(o.value for o in Op)} or MPI.{', MPI.'.join(_MPI_OPS)}")
    if (name := _torch_name(op)) is not None:
        raise ValueError(f"op is ReduceOp.{name}, which pycoll has no kernel for; expected one "
                         f"of {', '.join(o.value for o in Op)} or "
                         f"ReduceOp.{', ReduceOp.'.join(_TORCH_OPS)}")
    raise TypeError(f"op must be a pycoll.Op, its name, an mpi4py op or a "
                    f"torch.distributed.ReduceOp, got {type(op).__name__}")


# The mpi4py ops with a pycoll op that reduces alike, and those without
# one: MPI's logical ops give 0 or 1 on integers (LAND is not BAND),
# MAXLOC and MINLOC need pairs, REPLACE and NO_OP windows.
_MPI_OPS = ("SUM", "PROD", "MAX", "MIN", "BAND", "BOR", "BXOR")
_MPI_ONLY = ("LAND", "LOR", "LXOR", "MAXLOC", "MINLOC", "REPLACE", "NO_OP", "OP_NULL")


@functools.cache
def _mpi_pairs() -> tuple:
    """(mpi4py op, Op) of _MPI_OPS; mpi4py.MPI is imported already when a
    caller holds one of its ops."""
    return tuple((getattr(mpi(), name), Op[name]) for name in _MPI_OPS)


# torch.distributed's ReduceOp members with a pycoll op; PREMUL_SUM (NCCL's
# sum of scaled inputs) has none.
_TORCH_OPS = {"SUM": Op.SUM, "AVG": Op.AVG, "PRODUCT": Op.PROD, "MIN": Op.MIN,
              "MAX": Op.MAX, "BAND": Op.BAND, "BOR": Op.BOR, "BXOR": Op.BXOR}


def _torch_name(op) -> str | None:
    """The member name of a torch.distributed op: ``ReduceOp.SUM`` (a
    RedOpType) or a ``ReduceOp`` object, which wraps one in ``.op``."""
    red = getattr(op, "op", op)
    if type(red).__name__ == "RedOpType" and type(red).__module__.startswith("torch"):
        return red.name
    return None


def key_op(op):
    """*op* as a plan key: the pycoll Op of an mpi4py or torch.distributed
    op that has one (``MPI.SUM``, which is unhashable, and
    ``dist.ReduceOp.SUM``, which equals 0, are ``pycoll.SUM``), anything
    else as given, for op_of to check where the plan is built."""
    module = type(op).__module__
    if module == "mpi4py.MPI":
        for theirs, ours in _mpi_pairs():
            if op == theirs:
                return ours
    elif module.startswith("torch"):
        return _TORCH_OPS.get(_torch_name(op), op)
    return op


def check_op(op: Op, dtype: DType) -> None:
    """TypeError unless *op* is defined for *dtype*."""
    if op is Op.AVG:
        if dtype.kind not in "fc":
            raise TypeError(f"AVG needs a floating or complex dtype, got {dtype.name}")
    elif not _kernels.supports(op.kernel, dtype.code):
        raise TypeError(f"{op.name} is not defined for {dtype.name}")
