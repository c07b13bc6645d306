"""Type stubs for pycoll._lane_reduce (see _lane_reduce.pyx)."""
from collections.abc import Sequence
from typing import Any

import numpy as np

from pycoll._mpicall import Transport
from pycoll._resources import StagedSends

class Lane(StagedSends):
    algorithm: str
    def __init__(self, base: Any, transport: Transport, steps: Sequence[tuple[int, ...]],
                 op: int, code: int, shape: tuple[int, ...], dtype: np.dtype, nbytes: int,
                 divisor: int, gets_result: bool = ..., collective: str = ...,
                 algorithm: str = ..., result_code: int = ...) -> None: ...
    def run(self, x: np.ndarray, out: Any, deadline: float = ...) -> np.ndarray | None: ...

class ScanLane(Lane):
    def take(self, x: np.ndarray, out: Any, deadline: float = ...) -> Any: ...

class ReduceScatterLane(StagedSends):
    algorithm: str
    def __init__(self, base: Any, transport: Transport, steps: Sequence[tuple[Any, ...]],
                 op: int, code: int, shape: tuple[int, ...], dtype: np.dtype, total: int,
                 divisor: int, algorithm: str = ..., whole: bool = ...,
                 result_code: int = ...) -> None: ...
    def run(self, x: np.ndarray, out: Any, deadline: float = ...) -> np.ndarray | None: ...

# The entries: the result, or None (allreduce, reduce_scatter) or NOT_TAKEN
# (reduce, scan) with nothing sent when the Python path must take the call.
def allreduce(comm: Any, x: Any, op: Any, algorithm: str, out: Any, accumulate: Any,
              timeout: Any = ...) -> np.ndarray | None: ...
def reduce(comm: Any, x: Any, op: Any, root: Any, algorithm: str, out: Any, accumulate: Any,
           timeout: Any = ...) -> Any: ...
def scan(comm: Any, x: Any, op: Any, exclusive: Any, algorithm: str, out: Any, accumulate: Any,
         timeout: Any = ...) -> Any: ...
def reduce_scatter(comm: Any, x: Any, op: Any, algorithm: str, out: Any, accumulate: Any,
                   timeout: Any = ..., sizes: Any = ...) -> np.ndarray | None: ...
