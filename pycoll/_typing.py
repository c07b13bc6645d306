"""The types of the public API's arguments, for type checkers.

What ``_message.as_array`` accepts, written as types: a numpy array or
scalar, an object with the buffer protocol (``bytearray``, ``array.array``,
``memoryview``), with ``__array_interface__``, or with ``__dlpack__`` (CPU
torch tensors, JAX arrays). Python lists and numbers are refused at run time
(TypeError), so ``numpy.typing.ArrayLike``, which admits them, is not used.

api.py, _async.py, the FusionManager, parallel.py and layout.py import
these names only under ``TYPE_CHECKING``: nothing here runs on a call.
"""
from __future__ import annotations

import datetime
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, SupportsIndex, Union

import numpy as np

if TYPE_CHECKING:
    from numpy.typing import DTypeLike
    from typing_extensions import Buffer, TypeAlias

    from mpi4py import MPI

    from pycoll._dtypes import Op
    from pycoll.api import Communicator


class SupportsDLPack(Protocol):
    def __dlpack__(self) -> Any: ...


class SupportsArrayInterface(Protocol):
    @property
    def __array_interface__(self) -> dict[str, Any]: ...


ArrayIn: TypeAlias = Union[np.ndarray, np.generic, "Buffer", SupportsDLPack,
                           SupportsArrayInterface]
"""An input array: anything ``_message.as_array`` takes."""

CommArg: TypeAlias = Union["Communicator", "MPI.Intracomm", None]
"""``comm=``: a Communicator, an mpi4py intracommunicator, or None (the default)."""

OpArg: TypeAlias = Union["Op", str, "MPI.Op", Any]
"""``op=``: an Op, its name, or the mpi4py or torch.distributed op of that name
(``Any`` stands for torch's ``ReduceOp``, which pycoll does not import)."""

Ids: TypeAlias = Union[Iterable[SupportsIndex], None]
"""A FusionManager's ``fusion=`` (one id per array) or ``split_indices=``."""

Sizes: TypeAlias = Union[Iterable[SupportsIndex], None]
"""``sizes=``: every rank's axis-0 length, or None (all equal, or np.array_split's)."""

Matrix: TypeAlias = Union[Iterable[Iterable[SupportsIndex]], None]
"""alltoall's ``sizes=``: sizes[i][j], the rows rank i sends to rank j (a 2-d
integer array too), or None (np.array_split's)."""

Timeout: TypeAlias = Union[float, datetime.timedelta, None]
"""``timeout=``: seconds (any real number >= 0) or a timedelta; None: PYCOLL_TIMEOUT."""

Accumulate: TypeAlias = Union["DTypeLike", None]
"""``accumulate=``: None, or "float32" (also np.float32, "f4")."""

Placements: TypeAlias = Sequence[Union[int, str, None]]
"""A DeviceMesh layout: one placement per mesh dimension, None (replicated),
a tensor dimension (split) or "partial" (summands)."""

Update: TypeAlias = Callable[[list, list, dict], object]
"""ShardedOptimizer's ``update(params, grads, state)``: this rank's blocks of
the parameters and of the reduced gradients (numpy views), and its state."""
