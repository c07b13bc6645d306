"""The MPI side of a communicator: a private context, tags, scratch, settings.

Note [Tag discipline]: a Communicator ``Dup()``s the communicator it wraps
once, so pycoll's traffic lives in its own context and never matches a
user's ``Recv(ANY_TAG)``. Every collective call takes the next tag from a
counter that advances identically on every rank (collectives are called in
the same order everywhere), and all messages of that call use it. MPI keeps
messages between one pair of ranks with one tag in order, so the segments of
one transfer, and the transfers of one call, match in the order they are
posted; two calls in flight never mix.
"""
from __future__ import annotations

import json
import operator
import os
from dataclasses import asdict, dataclass, field

import numpy as np

from pycoll._async import Progress
from pycoll._mpi import c_transport, mpi
from pycoll._resources import CallResources

MAX_SEGMENT_BYTES = 1 << 30


@dataclass(frozen=True)
class Settings:
    """``PYCOLL_*`` settings, read on rank 0 and agreed at creation.

    segment_bytes   PYCOLL_SEGMENT_BYTES: the size of one message of every
                    segmented transfer, overriding the tuner's choice per
                    algorithm and size (tests make it tiny); at most 1 GiB,
                    so that no message's count reaches 2^31
    algorithms      PYCOLL_ALGORITHM_<COLLECTIVE>=name: overrides "auto"
    transport       PYCOLL_TRANSPORT: "c" (single messages through C calls
                    into the MPI library, pycoll/_mpicall.pyx, where they
                    pass their checks) or "mpi4py" (every call through mpi4py)
    params          the cost model's calibration (pycoll/tuning.py), or None
                    for its defaults
    checks          PYCOLL_CHECKS=1: checks mode for every call (api.set_checks)
    timeout         PYCOLL_TIMEOUT: seconds, the default deadline of a call
    autotune        PYCOLL_AUTOTUNE=1: "auto" times its candidates and keeps
                    the fastest (Note [Tuning online] in _trials.py)
    """

    segment_bytes: int | None = None
    algorithms: dict = field(default_factory=dict)
    transport: str = "c"
    params: dict | None = None
    checks: bool = False
    timeout: float | None = None
    autotune: bool = False

    @classmethod
    def from_env(cls, environ=os.environ) -> "Settings":
        segment = environ.get("PYCOLL_SEGMENT_BYTES", "").strip() or None
        try:
            segment = int(segment) if segment else None
        except ValueError:
            raise ValueError(f"PYCOLL_SEGMENT_BYTES={segment!r} is not an integer") from None
        if segment is not None and not 1 <= segment <= MAX_SEGMENT_BYTES:
            raise ValueError(f"PYCOLL_SEGMENT_BYTES={segment} must be between 1 and "
                             f"{MAX_SEGMENT_BYTES}")
        prefix = "PYCOLL_ALGORITHM_"
        algorithms = {key[len(prefix):].lower(): value.strip().lower()
                      for key, value in environ.items() if key.startswith(prefix) and value.strip()}
        transport = environ.get("PYCOLL_TRANSPORT", "c").strip().lower() or "c"
        if transport not in ("c", "mpi4py"):
            raise ValueError(f"PYCOLL_TRANSPORT={transport!r}: expected 'c' or 'mpi4py'")
        checks, autotune = (_switch(environ, name) for name in ("PYCOLL_CHECKS", "PYCOLL_AUTOTUNE"))
        timeout = environ.get("PYCOLL_TIMEOUT", "").strip()
        try:
            timeout = float(timeout) if timeout else None
        except ValueError:
            raise ValueError(f"PYCOLL_TIMEOUT={timeout!r} is not a number of seconds") from None
        if timeout is not None and not timeout >= 0:
            raise ValueError(f"PYCOLL_TIMEOUT={timeout} must be >= 0 seconds")
        return cls(segment, algorithms, transport, None, checks, timeout, autotune)

    def to_bytes(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> "Settings":
        return cls(**json.loads(data.decode()))


def _switch(environ, name: str) -> bool:
    """An on/off PYCOLL_* variable (unset: off)."""
    given = environ.get(name, "")
    value = given.strip().lower()
    if value not in ("", "0", "1", "false", "true", "no", "yes", "off", "on"):
        raise ValueError(f"{name}={given!r}: expected 0 or 1 (or false/true, no/yes, off/on)")
    return value in ("1", "true", "yes", "on")


INT_MAX = (1 << 31) - 1                 # MPI's colors, keys and counts are C ints


def flag(value, name: str) -> bool:
    """An on/off argument: a bool (numpy's too). Anything else is a
    TypeError, as scan's exclusive is: bool("no") would be on."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise TypeError(f"{name} must be a bool, got {type(value).__name__}")


class CommBase:
    """A private duplicate of an MPI intracommunicator.

    Owns the context (Note [Tag discipline]), the tag counter, the scratch
    buffers the algorithms reuse from call to call, and the settings. The
    public ``pycoll.Communicator`` adds the collectives.
    """

    def __init__(self, comm=None):
        MPI = mpi()
        if comm is None:
            comm = MPI.COMM_WORLD
        elif isinstance(comm, CommBase):
            comm = comm._live()
        if isinstance(comm, MPI.Comm) and comm == MPI.COMM_NULL:
            # MPI.COMM_NULL itself is a plain Comm: a ValueError as a freed one's
            raise ValueError("comm is MPI.COMM_NULL")
        if not isinstance(comm, MPI.Intracomm):
            raise TypeError(f"comm must be a pycoll.Communicator or an mpi4py "
                            f"intracommunicator, got {type(comm).__name__}")
        self._comm = comm.Dup()
        self.rank: int = self._comm.Get_rank()
        self.size: int = self._comm.Get_size()
        # Tags and scratch, shared with the C lanes.
        self._calls = CallResources(MPI.COMM_WORLD.Get_attr(MPI.TAG_UB))
        self._plans: dict = {}              # call signature -> _plan.Plan
        self.settings = Settings()
        self.transport = None               # a pycoll._mpicall.Transport, or None
        self.transport_info = "mpi4py"
        self._progress = Progress(f"rank{self.rank}")   # Note [Issue order] in _async.py
        self._broken = None                 # the CollectiveTimeout that broke this communicator
        self._lane_settings = True          # the C lanes: no checks mode
        self._tuner = None                  # a _trials.AlgorithmTuner under autotune

    def _use_settings(self, settings: Settings) -> None:
        """Adopt the agreed settings, and the C transport if they allow it."""
        self.settings = settings
        self._plans.clear()
        # The lanes keep a deadline (Note [Lane deadlines] in _mpicall.pyx),
        # so a default timeout leaves them on.
        self._lane_settings = not settings.checks
        if settings.transport == "c":
            self.transport, reason = c_transport(self._comm)
            self.transport_info = reason if self.transport is not None else f"mpi4py ({reason})"
        else:
            self.transport, self.transport_info = None, "mpi4py (PYCOLL_TRANSPORT=mpi4py)"

    # -- lifetime -------------------------------------------------------

    def _live(self):
        if self._comm is None:
            raise ValueError("this Communicator has been freed")
        if self._broken is not None:
            raise RuntimeError(f"this Communicator is broken since a collective timed out "
                               f"({self._broken}); report it and end the job (comm.abort())")
        return self._comm

    def _break(self, error) -> None:
        """A call timed out: no later call can match its messages."""
        self._broken = error
        self._plans.clear()

    @property
    def broken(self):
        """The CollectiveTimeout that broke this communicator, or None."""
        return self._broken

    def abort(self, errorcode: int = 1) -> None:
        """End the whole job (MPI_Abort on this communicator). For the caller
        after a CollectiveTimeout; pycoll itself never calls it."""
        comm = self._comm
        if comm is None:
            raise ValueError("this Communicator has been freed")
        comm.Abort(errorcode)

    def free(self) -> None:
        """Release the private MPI communicator (a collective call). Idempotent."""
        if self._comm is not None:
            if self._broken is None:
                self._progress.close()
            self._comm.Free()
            self._comm = None
            self.transport = None
            self._calls.clear()
            self._plans.clear()

    @property
    def freed(self) -> bool:
        return self._comm is None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.free()

    def split(self, color: int, key: int = 0):
        """Partition like ``MPI.Comm.Split``: ranks with the same *color* form
        a new Communicator, ordered by *key* then by rank. A rank passing
        ``MPI.UNDEFINED`` takes part and gets None. Any other color below 0
        (erroneous in MPI; MPICH takes it as a color), and a color or key
        past a C int, is a ValueError, raised before the split."""
        comm = self._live()
        try:
            color, key = operator.index(color), operator.index(key)
        except TypeError:
            raise TypeError(f"color and key must be ints, got {color!r} and {key!r}") from None
        if color < 0 and color != mpi().UNDEFINED or color > INT_MAX:
            raise ValueError(f"color must be in [0, 2**31) or MPI.UNDEFINED, got {color}")
        if not -INT_MAX - 1 <= key <= INT_MAX:
            raise ValueError(f"key must fit a C int, got {key}")
        part = comm.Split(color, key)
        if part == mpi().COMM_NULL:
            return None
        try:
            return type(self)(part)
        finally:
            part.Free()

    # -- per-call resources ---------------------------------------------

    def _progress_call(self, run, name: str):
        """Queue *run* behind every collective issued so far (a Handle)."""
        return self._progress.call(run, name, async_op=True)

    def next_tag(self) -> int:
        """The tag of the next collective call (Note [Tag discipline])."""
        return self._calls.next_tag()

    def scratch(self, slot: str, nbytes: int) -> np.ndarray:
        """A reusable uint8 buffer of *nbytes* for *slot*, grown as needed.

        The same slot is never used by two live transfers of one call; its
        contents do not survive the call.
        """
        return self._calls.scratch(slot, nbytes)

    def __repr__(self) -> str:
        state = "freed" if self._comm is None else f"rank {self.rank} of {self.size}"
        return f"<{type(self).__name__} {state}>"
