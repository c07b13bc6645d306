"""Type stubs for pycoll._lane_move (see _lane_move.pyx)."""
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from pycoll._mpicall import Transport
from pycoll._resources import StagedSends

STEP: dict[str, int]
BUFFER: dict[str, int]

class StepLane(StagedSends):
    algorithm: str
    def __init__(self, base: Any, transport: Transport, steps: Sequence[tuple[int, ...]],
                 shape: tuple[int, ...], dtype: np.dtype, xbytes: int, outbytes: int,
                 workbytes: int, has_result: bool, word: bytes = ..., collective: str = ...,
                 algorithm: str = ..., own_at: int = ...) -> None: ...
    def run(self, x: Any, out: Any, deadline: float = ...) -> Any: ...

class ScatterRoot:
    def __init__(self, base: Any, transport: Transport, word: Any, children: Sequence[int],
                 data: StepLane, rest: Callable[..., Any], inline: bool = ...) -> None: ...

class ScatterReceiver:
    def __init__(self, base: Any, transport: Transport, parent: int, children: Sequence[int],
                 rest: Callable[..., Any], room: int, inline_code: int) -> None: ...
    def expect(self, word: bytes, lane: StepLane | None) -> None: ...

class BroadcastLane(StagedSends):
    algorithm: str
    def __init__(self, base: Any, transport: Transport, word: Any, parent: int,
                 children: Sequence[int], nbytes: int, align: int, inline: bool, capacity: int,
                 rest: Callable[..., Any], algorithm: str = ...) -> None: ...

def _step_lane_call(comm: Any, kind: str, x: Any, rest: tuple[Any, ...], out: Any,
                    timeout: Any) -> Any: ...

# The entries: the result (None where this rank has none), or NOT_TAKEN
# with nothing sent when the Python path must take the call.
def broadcast(comm: Any, x: Any, root: Any, algorithm: str, timeout: Any = ...) -> Any: ...
def gather(comm: Any, x: Any, root: Any, algorithm: str, out: Any, timeout: Any = ...,
           sizes: Any = ...) -> Any: ...
def scatter(comm: Any, x: Any, root: Any, algorithm: str, out: Any, timeout: Any = ...,
            sizes: Any = ...) -> Any: ...
def allgather(comm: Any, x: Any, algorithm: str, out: Any, timeout: Any = ...,
              sizes: Any = ...) -> Any: ...
def alltoall(comm: Any, x: Any, algorithm: str, out: Any, timeout: Any = ...,
             sizes: Any = ...) -> Any: ...
def barrier(comm: Any, timeout: Any = ...) -> Any: ...
