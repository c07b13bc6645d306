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
import sys
from dataclasses import dataclass

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


# Note [Importing ml_dtypes]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~
# numpy has no bfloat16; ml_dtypes provides it, and pycoll imports it on
# first use of that dtype, not on import: ml_dtypes 0.7.0 takes 1.1 s of
# CPU to import here (numpy 2.4; it registers its ufunc loops one by one,
# each a linear search of the loops before it), against 0.1 s for 0.6.0
# and 0.11 s for numpy itself. That was 80% of ``import pycoll``, paid by
# every rank of every job, bfloat16 or not. The bfloat16 DType exists from
# the start (its name and code are all a plan or a header needs); its
# ``numpy`` imports ml_dtypes. A caller that holds a bfloat16 array has
# imported ml_dtypes already, so dtype_of looks for it in sys.modules
# before it calls a dtype unsupported. A rank that first hears of bfloat16
# in a root's header (broadcast or scatter into None) imports ml_dtypes in
# that call, as mpi4py's pickled messages import their classes' modules:
# about a second, once, which a root sending it a large message waits
# for (a root's timeout of 0.5 s expired there: a broadcast of 1M
# elements, MPICH, p = 2). Programs that make bfloat16 arrays import
# ml_dtypes on every rank and never pay it inside a call.


@dataclass(frozen=True)
class DType:
    """A supported element type: its name, kernel code and numpy dtype."""

    name: str
    code: int
    itemsize: int
    kind: str           # "b" bool, "i" signed, "u" unsigned, "f" floating, "c" complex

    @functools.cached_property
    def numpy(self) -> np.dtype:
        """numpy's dtype; bfloat16's comes from ml_dtypes (Note [Importing ml_dtypes])."""
        if self.name != "bfloat16":
            return np.dtype(self.name)
        import ml_dtypes
        dt = np.dtype(ml_dtypes.bfloat16)
        DTYPES[dt] = self
        return dt

    @property
    def half(self) -> bool:
        """float16 or bfloat16: reduced in float32, rounded once per step."""
        return self.name in ("float16", "bfloat16")


def _dtype(name: str) -> DType:
    if name == "bfloat16":
        return DType(name, _kernels.DTYPES[name], 2, "f")
    dt = np.dtype(name)
    return DType(name, _kernels.DTYPES[name], dt.itemsize, dt.kind)


BY_NAME: dict[str, DType] = {
    name: _dtype(name)
    for name in ["bool", "int8", "int16", "int32", "int64",
                 "uint8", "uint16", "uint32", "uint64",
                 "float16", "bfloat16", "float32", "float64",
                 "complex64", "complex128"]
}
BY_CODE: dict[int, DType] = {d.code: d for d in BY_NAME.values()}
# By numpy dtype; bfloat16 joins when ml_dtypes is imported (DType.numpy).
DTYPES: dict[np.dtype, DType] = {d.numpy: d for d in BY_NAME.values() if d.name != "bfloat16"}
FLOAT32 = BY_NAME["float32"]

_OPS: dict[object, Op] = {**{op: op for op in Op}, **{op.value: op for op in Op}}


def numpy_dtype(spec) -> np.dtype:
    """``np.dtype(spec)``, and the name "bfloat16" before the caller has
    imported ml_dtypes (numpy learns the name from it; Note [Importing
    ml_dtypes])."""
    if isinstance(spec, str) and spec == "bfloat16":
        return BY_NAME["bfloat16"].numpy
    return np.dtype(spec)


def dtype_of(numpy_dtype, name: str = "x") -> DType:
    """The DType of a numpy dtype; TypeError if pycoll cannot reduce or move it."""
    try:
        return DTYPES[numpy_dtype]
    except (KeyError, TypeError):
        pass
    found = _equal(numpy_dtype)
    if found is None and "ml_dtypes" in sys.modules:
        BY_NAME["bfloat16"].numpy       # joins DTYPES (Note [Importing ml_dtypes])
        found = _equal(numpy_dtype)
    if found is not None:
        return found
    swapped = _native(numpy_dtype)
    if swapped is not None:
        raise TypeError(f"{name} has dtype {numpy_dtype} (not this machine's byte order), "
                        f"which pycoll does not support; {name}.astype({swapped.numpy.name!r}) "
                        f"converts it") from None
    supported = ", ".join(BY_NAME)
    raise TypeError(f"{name} has dtype {numpy_dtype}, which pycoll does not support "
                    f"(supported: {supported})") from None


def _equal(numpy_dtype) -> DType | None:
    """The DType of a dtype equal to *numpy_dtype* but a distinct object: a
    scalar type, "<f4", one unpickled."""
    try:
        return DTYPES.get(np.dtype(numpy_dtype))
    except TypeError:
        return None


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
