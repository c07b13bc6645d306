"""pycoll's public collectives: one entry path for all of them.

Every call runs the same path: normalise the arguments at the edge
(``_message``); look up the ``Plan`` of the call's signature (``_plan.py``),
which on first use checks the arguments (before any message is sent),
describes the call in a frozen ``CollArgs`` and selects the algorithm
(``tuning``); run it on the plan's ``Channel`` with a fresh tag; finish
(AVG's division, the float32 accumulator's rounding, the write-back into a
non-contiguous ``out``).
A repeated call with the same dtype, shape and arguments skips straight to
binding its buffers: at 8 bytes the Python around MPI is most of the time.
A repeated plain call whose messages each fit a segment goes further: each
entry point first tries the signature's lane, its messages as C calls
(``_lane_reduce.pyx``, ``_lane_move.pyx``), which ``_lanes.py`` makes on the signature's first call.

Conventions shared by every collective (DESIGN.md, "Public API"):

- ``comm`` is a Communicator, an mpi4py intracommunicator (wrapped once and
  cached) or None (a Communicator over COMM_WORLD, made on first use).
- Blocks are ``np.array_split`` along axis 0; gathers concatenate along
  axis 0. ``sizes=`` gives each rank's length when they differ (gathers)
  or other blocks are wanted (scatter, reduce_scatter; alltoall's is a
  p x p matrix), as the counts of MPI's v-variants do.
- Results are new numpy arrays unless ``out=`` names the caller's memory;
  rooted results are None off the root.
- Argument errors raise before any message is sent: TypeError for types,
  dtypes and (op, dtype) pairs, ValueError for values.
- Every call takes ``async_op=False`` (True: a Handle at once, Note [Issue
  order] in _async.py) and ``timeout=None`` (seconds for the whole call,
  else PYCOLL_TIMEOUT; on expiry CollectiveTimeout and a broken
  communicator, errors.py). In checks mode (``set_checks``) the ranks first
  agree on what they are calling.
"""
from __future__ import annotations

import dataclasses
import hashlib
import inspect
import json
import operator
import threading
import time
from collections.abc import Iterator
from functools import partial
from typing import TYPE_CHECKING, SupportsIndex

import numpy as np

from pycoll import _header, _lane_move, _lane_reduce, _lanes, _message, tuning
from pycoll._async import as_seconds
from pycoll._comm import CommBase, Settings, flag
from pycoll._dtypes import BY_NAME, DType, Op, dtype_of, key_op, op_of
from pycoll._kernels.reduce import scale
from pycoll._mpi import mpi
from pycoll._header import HEADER_INLINE, HEADER_OK, WORD_BYTES
from pycoll._p2p import Channel
from pycoll._pieces import Pieces
from pycoll._plan import (CollArgs, Plan, _alltoall_args, _array, _broadcast_plan, _bytes,
                          _cached_lane, _check_algorithm, _check_counts, _check_exclusive,
                          _check_matrix, _check_root, _check_sizes, _done, _finish,
                          _gather_args, _in_place, _plan, _reduce_scatter_args,
                          _reduction_args, _result, _rows, _scan_args, _scatter_plan,
                          _send_bytes, _split_counts, _work_dtype, accumulate_of)
from pycoll._resources import NOT_TAKEN, matrix_key, sizes_key
from pycoll._trials import AlgorithmTuner
from pycoll.algorithms import REGISTRY, Task
from pycoll.algorithms._shape import same_bytes
from pycoll.errors import MismatchError

if TYPE_CHECKING:
    from pycoll._typing import Accumulate, ArrayIn, CommArg, Matrix, OpArg, Sizes, Timeout

SUM, PROD, MAX, MIN, AVG = Op.SUM, Op.PROD, Op.MAX, Op.MIN, Op.AVG
BAND, BOR, BXOR = Op.BAND, Op.BOR, Op.BXOR


# ---------------------------------------------------------------------------
# The Communicator


class Communicator(CommBase):
    """A group of ranks that run collectives together.

    ``Communicator()`` duplicates ``MPI.COMM_WORLD``; ``Communicator(c)``
    duplicates any mpi4py intracommunicator (a framework that owns MPI passes
    its own). Creation is collective: every rank of the group calls it, and
    rank 0's ``PYCOLL_*`` settings are agreed by all.

        >>> with pycoll.Communicator() as comm:
        ...     y = comm.allreduce(np.full(3, comm.rank + 1.0))
        # rank 0 and rank 1 of 2: y = [3., 3., 3.]

    ``autotune=True`` makes "auto" time the algorithms the model finds
    close and keep the fastest (Note [Tuning online] in _trials.py); None
    takes ``PYCOLL_AUTOTUNE``. Like the settings, rank 0's value holds.

    Every collective of this module exists as a method with the same
    arguments, minus ``comm``. Every collective takes ``async_op=True`` to
    return a Handle at once (``wait()`` gives the result); collectives run
    in the order they were issued (Note [Issue order] in _async.py).
    """

    def __init__(self, comm: CommArg = None, autotune: bool | None = None):
        if autotune is not None:
            autotune = flag(autotune, "autotune")
        super().__init__(comm)
        self._use_settings(_agree_settings(self, autotune))

    def _use_settings(self, settings: Settings) -> None:
        super()._use_settings(settings)
        self._tuner = None
        if settings.autotune:
            self._tuner = AlgorithmTuner(
                self, lambda times: allreduce(times, MAX, self, "recursive_doubling"))

    def autotune_choices(self) -> dict:
        """Under autotune (Note [Tuning online] in _trials.py): {call
        signature: the algorithm "auto" runs for it, None while its trials
        go on}, the same on every rank; {} without autotune."""
        return self._tuner.choices() if self._tuner is not None else {}

    @property
    def _lane_ready(self) -> bool:
        """Whether a plain call may take its C lane, which keeps any
        deadline (Note [Lane deadlines] in _mpicall.pyx): not in checks
        mode, which puts every call on the checked path."""
        return self._lane_settings and not _Switches.checks

    # Each method tries its lane's C entry first for a numpy array; the
    # module function behind it makes the lane on a signature's first call
    # and gives an array-like's numpy view to the lane (Note [Lane views]).
    def allreduce(self, x: ArrayIn, op: OpArg = SUM, algorithm: str = "auto",
                  out: ArrayIn | None = None, accumulate: Accumulate = None,
                  async_op: bool = False, timeout: Timeout = None):
        if self._tuner is not None or type(x) is not np.ndarray or _array_like(out):
            # the tuner (Note [Tuning online] in _trials.py), an array-like's view
            return allreduce(x, op, self, algorithm, out, accumulate, async_op, timeout)
        if not async_op and self._lane_ready:
            result = _lane_reduce.allreduce(self, x, op, algorithm, out, accumulate, timeout)
            if result is not None:
                return result
        return _allreduce(self, x, op, algorithm, out, accumulate, async_op, timeout)

    def broadcast(self, x: ArrayIn | None, root: SupportsIndex = 0, algorithm: str = "auto",
                  async_op: bool = False, timeout: Timeout = None):
        if not async_op and self._lane_ready:
            done = _lane_move.broadcast(self, x, root, algorithm, timeout)
            if done is not NOT_TAKEN:
                return done
        return broadcast(x, root, self, algorithm, async_op, timeout)

    def reduce(self, x: ArrayIn, op: OpArg = SUM, root: SupportsIndex = 0,
               algorithm: str = "auto", out: ArrayIn | None = None,
               accumulate: Accumulate = None, async_op: bool = False, timeout: Timeout = None):
        if self._tuner is not None or type(x) is not np.ndarray or type(root) is not int \
                or _array_like(out):
            # the tuner (Note [Tuning online] in _trials.py), an array-like's
            # view, a root to check (Note [Equal keys])
            return reduce(x, op, root, self, algorithm, out, accumulate, async_op, timeout)
        if not async_op and self._lane_ready:
            result = _lane_reduce.reduce(self, x, op, root, algorithm, out, accumulate, timeout)
            if result is not NOT_TAKEN:
                return result
        return _reduce(self, x, op, root, algorithm, out, accumulate, async_op, timeout)

    def gather(self, x: ArrayIn, root: SupportsIndex = 0, algorithm: str = "auto",
               sizes: Sizes = None, out: ArrayIn | None = None, async_op: bool = False,
               timeout: Timeout = None):
        if not async_op and self._lane_ready:
            result = _lane_move.gather(self, x, root, algorithm, out, timeout, sizes)
            if result is not NOT_TAKEN:
                return result
        return gather(x, root, self, algorithm, sizes, out, async_op, timeout)

    def scatter(self, x: ArrayIn | None, root: SupportsIndex = 0, algorithm: str = "auto",
                out: ArrayIn | None = None, async_op: bool = False, timeout: Timeout = None,
                *, sizes: Sizes = None):
        if not async_op and self._lane_ready:
            result = _lane_move.scatter(self, x, root, algorithm, out, timeout, sizes)
            if result is not NOT_TAKEN:
                return result
        return scatter(x, root, self, algorithm, out, async_op, timeout, sizes=sizes)

    def allgather(self, x: ArrayIn, algorithm: str = "auto", sizes: Sizes = None,
                  out: ArrayIn | None = None, async_op: bool = False, timeout: Timeout = None):
        if not async_op and self._lane_ready:
            result = _lane_move.allgather(self, x, algorithm, out, timeout, sizes)
            if result is not NOT_TAKEN:
                return result
        return allgather(x, self, algorithm, sizes, out, async_op, timeout)

    def reduce_scatter(self, x: ArrayIn, op: OpArg = SUM, algorithm: str = "auto",
                       out: ArrayIn | None = None, accumulate: Accumulate = None,
                       async_op: bool = False, timeout: Timeout = None, *, sizes: Sizes = None):
        if self._tuner is not None or type(x) is not np.ndarray or _array_like(out):
            # the tuner (Note [Tuning online] in _trials.py), an array-like's view
            return reduce_scatter(x, op, self, algorithm, out, accumulate, async_op, timeout,
                                  sizes=sizes)
        if not async_op and self._lane_ready:
            result = _lane_reduce.reduce_scatter(self, x, op, algorithm, out, accumulate, timeout,
                                                 sizes)
            if result is not None:
                return result
        return _reduce_scatter(self, x, op, algorithm, out, accumulate, async_op, timeout,
                               _kept_sizes(sizes))

    def alltoall(self, x: ArrayIn, algorithm: str = "auto", out: ArrayIn | None = None,
                 async_op: bool = False, timeout: Timeout = None, *, sizes: Matrix = None):
        if not async_op and self._lane_ready:
            result = _lane_move.alltoall(self, x, algorithm, out, timeout, sizes)
            if result is not NOT_TAKEN:
                return result
        return alltoall(x, self, algorithm, out, async_op, timeout, sizes=sizes)

    def scan(self, x: ArrayIn, op: OpArg = SUM, exclusive: bool = False,
             algorithm: str = "auto", out: ArrayIn | None = None, accumulate: Accumulate = None,
             async_op: bool = False, timeout: Timeout = None):
        return scan(x, op, self, exclusive, algorithm, out, accumulate, async_op, timeout)

    def barrier(self, async_op: bool = False, timeout: Timeout = None):
        return barrier(self, async_op, timeout)


def _agree_settings(comm: Communicator, autotune=None) -> Settings:
    """Rank 0's PYCOLL_* settings (and its *autotune*, when not None),
    broadcast once so that every rank selects the same algorithms (Note
    [Same choice everywhere] in tuning.py). A bad setting on rank 0 raises
    the same ValueError on every rank; any other failure there raises on
    rank 0 and a RuntimeError saying so on the others, which would
    otherwise wait for the broadcast forever."""
    failure = None
    if comm.rank == 0:
        try:
            settings = Settings.from_env()
            if autotune is not None:
                settings = dataclasses.replace(settings, autotune=autotune)
            params = tuning.load_params(mpi().Get_library_version(), comm.size)
            settings = dataclasses.replace(settings, params=params)
            payload = {"settings": json.loads(settings.to_bytes())}
        except ValueError as exc:
            payload = {"error": "ValueError", "message": str(exc)}
        except Exception as exc:
            failure = exc
            payload = {"error": "RuntimeError", "message": f"rank 0 could not make its "
                       f"settings: {type(exc).__name__}: {exc}"}
    else:
        payload = None
    agreed = _header.broadcast_json(comm, payload, sized=True)
    if failure is not None:
        raise failure
    _header.raise_carried(agreed)
    settings = Settings(**agreed["settings"])
    tuning.check_settings(settings)
    return settings


_default: Communicator | None = None
_wrapped: dict[int, tuple[object, Communicator]] = {}
_lock = threading.Lock()


def _comm_of(comm) -> Communicator:
    """The Communicator of a ``comm=`` argument (see the module docstring)."""
    global _default
    if comm is None and _default is not None and not _default.freed:
        return _default
    if isinstance(comm, Communicator):
        comm._live()
        return comm
    with _lock:
        if comm is None:
            if _default is None or _default.freed:
                _default = Communicator()
            return _default
        # Keyed by identity, holding the object so the id is not reused.
        # One its owner has freed (false: MPI_COMM_NULL) gets no wrapper:
        # its old one is freed, and Communicator() refuses it.
        hit = _wrapped.get(id(comm))
        if hit is None or hit[1].freed or not comm:
            _forget_freed()
            hit = (comm, Communicator(comm))
            _wrapped[id(comm)] = hit
        return hit[1]


# Note [Wrapped communicators]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# A call given an mpi4py communicator runs on a Communicator made for it
# once (a Dup, its own tags and progress thread), kept in _wrapped for as
# long as the caller's communicator lives. When the caller frees theirs
# (mpi4py then holds MPI_COMM_NULL in it), the Dup would outlive it with
# nothing left to free it, and MPI has a bounded number of communicators
# (MPICH: 2,048 context ids): a framework that makes and frees a
# sub-communicator per step and passes each to pycoll ran out after about
# 2,000 steps. So before wrapping a new communicator, _forget_freed frees
# the Communicators of those the caller has freed (running their queued
# calls first). Every rank makes its wraps in the same program order, so
# the frees come in the same order on every rank of each group.


def _forget_freed() -> None:
    """Free and forget the Communicators of wrapped mpi4py communicators
    that their owner has freed (Note [Wrapped communicators]); _lock held."""
    null = mpi().COMM_NULL
    for key, (theirs, ours) in list(_wrapped.items()):
        if theirs == null:
            del _wrapped[key]
            ours.free()


# ---------------------------------------------------------------------------
# The collectives
#
# Each is a prepare() that checks the arguments and returns the call's
# record (what checks mode compares across ranks) and its run(deadline),
# handed to _call: the one place for checks mode, deadlines, and async and
# blocking dispatch.


class _Switches:
    """Process-wide switches (pycoll.set_checks)."""

    checks = False


def set_checks(enabled: bool = True) -> None:
    """Checks mode: before each collective the ranks agree on what they are
    calling (collective, op, dtype, shape or trailing shape, root,
    algorithm) and a mismatch raises MismatchError on every rank. Off by
    default (PYCOLL_CHECKS=1 turns it on at Communicator creation); costs
    nothing when off."""
    _Switches.checks = flag(enabled, "enabled")


def _checks_on(c) -> bool:
    return _Switches.checks or c.settings.checks


def _timeout(c, timeout):
    """The call's timeout in seconds (argument, else PYCOLL_TIMEOUT), or None:
    any real number of seconds, or a datetime.timedelta (_async.as_seconds)."""
    return c.settings.timeout if timeout is None else as_seconds(timeout)


def _async_flag(value) -> bool:
    """An async_op other than True or False, read as the methods' lane
    checks read it (`not async_op`), so that a call does not depend on
    whether its lane is ready: a false value (None, 0, "") runs the call
    blocking; of the true ones 1 and numpy's True are taken, anything else
    is a TypeError ("no" would be true: a Handle)."""
    if not value:
        return False
    if type(value) is int and value == 1:
        return True
    return flag(value, "async_op")


def _call(c, name: str, async_op: bool, timeout, prepare, lane=None):
    """Run one collective: prepare() checks its arguments (on this thread,
    before any message, unless checks mode must first tell the other ranks)
    and returns (record, run); run(deadline) is queued or called in issue
    order (Note [Issue order] in _async.py). An async call's *lane* (a
    function of no arguments: the call on its lane, or NOT_TAKEN with
    nothing sent) is tried first when its turn comes (Note [Async lanes])."""
    if async_op is not True and async_op is not False:
        async_op = _async_flag(async_op)
    if not _checks_on(c):
        seconds = _timeout(c, timeout)
        record, run = prepare()

        def now():
            c._live()                   # queued before a timeout broke the communicator
            return run(_deadline(seconds))
        if lane is not None and async_op and c._lane_ready:
            def queued():
                result = lane()
                return now() if result is NOT_TAKEN else result
            return c._progress.call(queued, name, True)
        return c._progress.call(now, name, async_op)

    def checked():
        c._live()                       # (as now() above)
        deadline = None                 # a bad timeout is this rank's error, shared untimed
        try:
            deadline = _deadline(_timeout(c, timeout))
            record, run = prepare()
        except (TypeError, ValueError) as exc:
            _agree(c, {"collective": name, "error": f"{type(exc).__name__}: {exc}"}, deadline, mine=exc)
            raise
        _agree(c, record, deadline)
        return run(deadline)
    return c._progress.call(checked, name, async_op)


# Note [Async lanes]
# ~~~~~~~~~~~~~~~~~~
# An async call is checked on the caller's thread (prepare()) and queued;
# when its turn comes, on the progress thread or on a thread waiting for
# it (Note [Waiting runs the queue] in _async.py), it tries its lane first,
# with the caller's arguments, as the blocking call does at once. The
# lanes (_lane_reduce.pyx, _lane_move.pyx) run only in a call's turn (``in_turn``: nothing
# queued, or this thread running the queue), so a lane never overtakes a
# queued call, and a queued call on its lane is one. Before, async calls
# always took the general path, 25-100 us of Python at 8 B on two ranks
# (an async scatter 104 us, broadcast 55 us, allgather 62 us, against
# 2-4 us natively; bench/latency.py --async). allreduce and reduce_scatter
# reach their lanes through their plans (plan.lane) instead.


# Note [Lane views]
# ~~~~~~~~~~~~~~~~~
# The lanes (pycoll/_lane_*.pyx) take numpy arrays only. A CPU torch
# tensor, a JAX array or a buffer is read through the numpy view the
# general path would make of it anyway (_message.as_array, no copy), and
# that view goes to the lane, and to the general path where the lane
# declines (it is made once). The lane's messages and result are the
# general path's, so the call is the same, without its Python (at p = 2,
# 8 B, 1.3-9x faster than on the general path, bench/NOTES.md, "Lanes,
# before and after"). So is an out= that is not a numpy array
# (_out_view): the lane writes the result through its view, and the call
# returns that view, a numpy array in the caller's memory, as the general
# path does (_done; it returned the torch tensor itself on some paths and
# the view on others). A torch tensor as out took an allreduce of 8 B 20
# us on the general path, 11.5 through its view, and in place (out=x,
# one view for both) 7.9 (numpy: 4.1; p = 2, MPICH). A blocking call
# only: an async call still takes its out to the general path. A
# broadcast returns the caller's x, which the lane filled through its
# view (its general path takes x itself: a later wait() returns it too).


# Note [Equal keys]
# ~~~~~~~~~~~~~~~~~
# A call's plan and lane are cached under keys that hold its arguments,
# and Python's dicts match keys by equality: 1.0 and True equal 1 and hash
# alike. So a root of 1.0 found the plan of root 1 and skipped the check
# that rejects it, and ran as rank 1; so did sizes=[1.0, 2.0] after
# [1, 2], scan's exclusive=1 after True, and a FusionManager's float ids.
# Each such argument is made what its key expects (an int, a tuple of
# ints, a bool; a numpy integer or bool becomes one) or refused before a
# key holds it, inside prepare() (so that in checks mode a rank's bad
# argument reaches every rank). The lane entries of pycoll/_lane_*.pyx
# take an int root only; the module functions turn a numpy integer root
# into an int first (_index_root), so that it takes the lanes too, and
# leave any other root to prepare()'s check. Their sizes= likewise: a
# list or tuple of Python ints or an integer array becomes the tuple the
# lane is keyed by (_resources.sizes_key), anything else goes to prepare().


def _index_root(root):
    """A numpy integer root as an int (Note [Equal keys]); any other root
    unchanged, for prepare() to check."""
    if isinstance(root, (bool, np.bool_)):
        return root
    try:
        return operator.index(root)
    except TypeError:
        return root


def _lane_view(x):
    """x as a lane takes it: x itself when it is a numpy array or None; else
    its numpy view (Note [Lane views]), or x again when it has none (the
    general path then says why)."""
    if type(x) is np.ndarray or x is None:
        return x
    try:
        return _message.as_array(x)
    except (TypeError, ValueError):
        return x


def _array_like(out) -> bool:
    """Whether out= is neither None nor a numpy array (_out_view makes its
    view for the lane)."""
    return out is not None and type(out) is not np.ndarray


def _out_view(out):
    """out= as a lane takes it (Note [Lane views]): None or a numpy array
    itself, an array-like's numpy view (the lane writes through it and the
    call returns it, _lane_result), or NOT_TAKEN where it has none (the
    general path then says why)."""
    if not _array_like(out):
        return out
    try:
        return _message.as_array(out, "out")
    except (TypeError, ValueError):
        return NOT_TAKEN


def _lane_result(result, view, out):
    """What a call on its lane returns, as _done (pycoll/_plan.py) has it:
    out itself for a numpy out, else the numpy array the result is in
    (for an array-like out, the view the lane wrote through), or None
    where this rank gets no result."""
    if view is out or result is None or not isinstance(out, np.ndarray):
        return result
    return out


def _tunable(c, x: np.ndarray) -> bool:
    """Whether an "auto" call goes to c's tuner (Note [Tuning online] in
    _trials.py): outside checks mode, on an array of at least
    TUNE_MIN_BYTES (the same on every rank: the collectives tuned
    take the same shape and dtype everywhere). Any other call runs the
    model's choice."""
    return x.nbytes >= tuning.TUNE_MIN_BYTES and not _checks_on(c)


def _deadline(seconds):
    return None if seconds is None else time.monotonic() + seconds


def _lane_deadline(c, timeout) -> float:
    """The time.monotonic() by which a lane call must finish (Note [Lane
    deadlines] in _mpicall.pyx), from timeout=, else PYCOLL_TIMEOUT; 0.0
    (none) without either. A bad timeout raises here, before any message.
    _mpicall.lane_deadline calls it only when there is a timeout: a plain
    call pays no Python call for its deadline of 0."""
    seconds = _timeout(c, timeout)
    return 0.0 if seconds is None else time.monotonic() + seconds


RECORD_BYTES = 512
ANY = "<any>"       # a record's value that a rank does not know, equal to every value
_AGREE_KEY = ("allreduce", np.dtype(np.int64), (2,), Op.MAX, "recursive_doubling", None)


def _agree(c, record: dict, deadline, mine=None) -> None:
    """Checks mode: MismatchError on every rank unless every rank's record
    of this call is the same. *mine*: this rank's own argument error,
    raised by the caller after the exchange when it is the only problem.

    Two steps, the second only on a mismatch: a MAX allreduce of
    (digest, -digest), 16 bytes (every rank then knows whether the smallest
    and largest digests differ), then an allgather of the records, so that
    the error lists each rank's values."""
    digest, text = _digest(record)
    pair = np.array([digest, -digest], np.int64)
    extremes = np.empty(2, np.int64)
    plan = _plan(c, _AGREE_KEY, lambda: _reduction_args("allreduce", c, pair, Op.MAX,
                                                        "recursive_doubling", None))
    if deadline is not None or plan.lane is None or plan.lane.run(pair, extremes) is None:
        plan.run(send=_bytes(pair), data=_bytes(extremes), deadline=deadline)
    if extremes[0] == -extremes[1]:
        return
    _disagree(c, record, text, deadline, mine)


_digests: dict = {}


def _digest(record: dict) -> tuple[int, str]:
    """(a 63-bit digest of *record*, its JSON text): the same on every rank
    for equal records (not Python's hash(), which is salted per process)."""
    key: tuple | None = tuple((k, tuple(v) if isinstance(v, list) else v)
                              for k, v in sorted(record.items()))
    try:
        return _digests[key]
    except KeyError:
        pass
    except TypeError:                   # an unhashable value: no caching
        key = None
    text = json.dumps(record, sort_keys=True, default=str)
    digest = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little") >> 1
    if key is not None:
        if len(_digests) >= 1024:
            _digests.clear()
        _digests[key] = digest, text
    return digest, text


def _disagree(c, record: dict, text: str, deadline, mine) -> None:
    """Every rank's record on every rank (an allgather of RECORD_BYTES per
    rank): raise MismatchError naming each rank's values."""
    if len(text) > RECORD_BYTES:
        digest = hashlib.sha1(text.encode()).hexdigest()
        text = json.dumps({"collective": record.get("collective"), "digest": digest})
    buf = np.zeros(RECORD_BYTES * c.size, np.uint8)
    buf[c.rank * RECORD_BYTES:c.rank * RECORD_BYTES + len(text)] = np.frombuffer(text.encode(), np.uint8)
    channel = Channel(c, c.next_tag())
    bruck = REGISTRY["allgather"]["bruck"]
    channel.begin(deadline, record.get("collective", "?"), "checks", bruck.steps(c.size))
    counts = (RECORD_BYTES,) * c.size
    bruck.run(Task(channel, c.rank, c.size, send=None, out=buf, counts=counts))
    records = {r: json.loads(bytes(buf[r * RECORD_BYTES:(r + 1) * RECORD_BYTES]).rstrip(b"\0").decode())
               for r in range(c.size)}
    if all(len({json.dumps(rec.get(k)) for rec in records.values() if rec.get(k) != ANY}) <= 1
           for k in {k for rec in records.values() for k in rec}):
        return                                  # equal where every rank knows the value
    if mine is not None and all(rec == records[c.rank] or "error" not in rec for rec in records.values()):
        return                                  # only this rank erred: the caller raises its own error
    fields = sorted({k for rec in records.values() for k in rec})
    lines = [f"  rank {r}: " + ", ".join(f"{k}={rec.get(k, '-')}" for k in fields)
             for r, rec in records.items()]
    raise MismatchError(f"ranks disagree about {record.get('collective', 'the call')} "
                        f"(checks mode):\n" + "\n".join(lines), records)


def _reduction_record(name, x, op, algorithm, accumulate, **more) -> dict:
    op = op.value if isinstance(op, Op) else op
    return {"collective": name, "op": op, "dtype": x.dtype, "shape": x.shape,
            "algorithm": algorithm, "accumulate": accumulate_of(accumulate), **more}


def allreduce(x: ArrayIn, op: OpArg = SUM, comm: CommArg = None, algorithm: str = "auto",
              out: ArrayIn | None = None, accumulate: Accumulate = None, async_op: bool = False,
              timeout: Timeout = None):
    """Reduce x elementwise over all ranks; every rank gets the result.

    Args:
        x: this rank's array (same shape and dtype on every rank).
        op: SUM, PROD, MAX, MIN, AVG, BAND, BOR or BXOR (or its name, or
            the mpi4py or torch.distributed op of that name: MPI.SUM
            and dist.ReduceOp.SUM are SUM).
        comm: a Communicator, an mpi4py intracommunicator, or None.
        algorithm: "auto", "ring", "recursive_doubling", "rabenseifner", "tree".
        out: where to write the result (shape and dtype of x; may be x).
        accumulate: "float32" reduces float16/bfloat16 in float32 and rounds
            once at the end.

    Returns:
        The reduced array, bitwise identical on every rank.

    Example (2 ranks)::

        x = np.array([1., 2.]) * (rank + 1)    # rank 0: [1, 2]   rank 1: [2, 4]
        pycoll.allreduce(x)                    # both:   [3, 6]
        pycoll.allreduce(x, op=pycoll.MAX)     # both:   [2, 4]
    """
    c = comm if type(comm) is Communicator else _comm_of(comm)
    caller_x, x = x, _lane_view(x)          # Note [Lane views]
    if c._tuner is not None and algorithm == "auto" and not async_op:
        x = _array(x)
        if _tunable(c, x):
            return c._tuner.call(
                ("allreduce", x.dtype, x.shape, op_of(op), accumulate),
                lambda: _reduction_args("allreduce", c, x, op, "auto", accumulate),
                lambda name: allreduce(x, op, c, name, out, accumulate, False, timeout))
    if not async_op and c._lane_ready:
        view = x if out is caller_x else _out_view(out)     # in place: x's view is out's
        if view is not NOT_TAKEN:
            result = _lane_reduce.allreduce(c, x, op, algorithm, view, accumulate, timeout)
            if result is not None:
                return _lane_result(result, view, out)
    return _allreduce(c, x, op, algorithm, out, accumulate, async_op, timeout)


def _allreduce(c, x, op, algorithm, out, accumulate, async_op=False, timeout=None):
    def prepare():
        xa, o = _array(x), key_op(op)
        plan = _plan(c, ("allreduce", xa.dtype, xa.shape, o, algorithm, accumulate),
                     lambda: _reduction_args("allreduce", c, xa, o, algorithm, accumulate))
        a = plan.args
        result, result_data, writeback = _result(out, a.shape, a.result)

        def run(deadline):
            # The C lane, where the top of allreduce() could not take it
            # (checks mode, an async call): it has no deadline to keep.
            if deadline is None and plan.lane is not None and writeback is None \
                    and plan.lane.run(xa, result) is not None:
                return result
            send = _send_bytes(c, a, xa)
            if a.dtype is a.result:
                send, data = _in_place(send, result_data, result, xa)
            else:
                data = c.scratch("output", a.n)
            plan.run(send=send, data=data, deadline=deadline)
            _finish(a, data, result_data, c.size)
            return _done(result, result_data, writeback, out)
        return _reduction_record("allreduce", xa, o, algorithm, accumulate), run
    return _call(c, "allreduce", async_op, timeout, prepare)


def broadcast(x: ArrayIn | None, root: SupportsIndex = 0, comm: CommArg = None,
              algorithm: str = "auto", async_op: bool = False, timeout: Timeout = None):
    """Copy the root's x to every rank, in place.

    Args:
        x: the root's array; elsewhere an array of the same shape and dtype
            to overwrite, or None to receive a new one.
        root: the rank that holds the data.

    Returns:
        x (filled with the root's data), or a new array where x was None.

    Example (2 ranks)::

        x = np.arange(3.) if rank == 0 else None   # rank 0: [0, 1, 2]  rank 1: None
        y = pycoll.broadcast(x, root=0)            # both:   [0, 1, 2]

    The root sends a small header (dtype and shape) first, so ranks with
    x=None know what to allocate; on the binomial tree, data of at most
    INLINE_BYTES travels inside the header's message. A bad input on the
    root (read-only included: broadcast is in place on every rank) raises
    the same error on every rank. A rank whose own x does not match the
    root's (or is read-only) still takes part, then raises.
    """
    c = comm if type(comm) is Communicator else _comm_of(comm)
    if type(root) is not int:
        root = _index_root(root)            # Note [Equal keys]
    if not async_op and c._lane_ready:
        xa = _lane_view(x)
        done = _broadcast_lane(c, xa, root, algorithm, timeout)
        if done is not NOT_TAKEN:
            return done if xa is x else x       # the caller's x, filled through its view
    lane = _async_broadcast_lane(c, x, root, algorithm, timeout) if async_op else None
    return _broadcast(c, x, root, algorithm, async_op, timeout, lane)


def _async_broadcast_lane(c, x, root, algorithm, timeout):
    """An async broadcast's lane (Note [Async lanes]): x, filled, or NOT_TAKEN."""
    xa = _lane_view(x)

    def lane():
        done = _broadcast_lane(c, xa, root, algorithm, timeout)
        return done if done is NOT_TAKEN or xa is x else x
    return lane


def _broadcast(c, x, root, algorithm, async_op, timeout, lane=None):
    def prepare():
        r = _check_root(root, c.size)
        alg = _check_algorithm("broadcast", algorithm)
        header, msg = (_header.root_header(x, lambda m: _writable(x)) if c.rank == r
                       else (None, None))

        def run(deadline):
            if c.rank == r:
                plan = None if msg is None else _broadcast_plan(c, msg.dtype, msg.shape, r, alg)
                inline = plan is not None and _header.inline_broadcast(c, plan, msg.nbytes)
                # (an error or a long shape raises or is sent without the data)
                _, _, sent = _header.exchange(c, r, header, deadline, "broadcast",
                                              msg.data if inline else None)
                if sent is None:
                    plan.run(data=msg.data, deadline=deadline)
                return x
            dtype, shape, inline = _header.exchange(c, r, None, deadline, "broadcast")
            return _broadcast_receive(c, x, r, alg, dtype, shape, deadline, inline)
        record = {"collective": "broadcast", "root": r, "algorithm": alg}
        if _checks_on(c):
            record.update(_broadcast_array_record(c, x, msg, c.rank == r))
        return record, run
    return _call(c, "broadcast", async_op, timeout, prepare, lane)


def _broadcast_array_record(c, x, msg, root: bool) -> dict:
    """Checks mode: a broadcast's dtype and shape as this rank holds them,
    for _agree, which then finds a non-root x that does not match the
    root's on every rank, not only on that one. The root's come from its
    message (ANY when its x is bad: the header carries that error); a
    rank passing x=None has ANY, which matches every value. A read-only x
    off the root is this rank's own error (ValueError, before any message)."""
    if root:
        return {"dtype": ANY, "shape": ANY} if msg is None else {
            "dtype": msg.dtype.name, "shape": list(msg.shape)}
    if x is None:
        return {"dtype": ANY, "shape": ANY}
    try:
        array = _message.as_array(x)
        dtype = dtype_of(array.dtype, "x").name
    except (TypeError, ValueError):
        return {"dtype": ANY, "shape": ANY}   # x itself is refused once the header is in
    _message.check_writable(array, "x", "; broadcast is in place on every rank")
    return {"dtype": dtype, "shape": list(array.shape)}


def _writable(x) -> None:
    """The root's x of a broadcast: in place on every rank (DESIGN.md), so
    writable on the root too."""
    _message.check_writable(_message.as_array(x), "x",
                            "; broadcast is in place on every rank, the root's x included")


def _broadcast_receive(c, x, r, alg, dtype, shape, deadline, inline=None):
    """A non-root's part once the header is known: receive (and forward)
    the root's data into x, or into a new array, or copy it from the
    header's message (*inline*); x that does not match the root's array
    still takes part (into a scratch array), then raises."""
    problem, target = None, None
    if x is None:
        target = _message.new(shape, dtype)
    else:
        try:
            target = _message.output(x, shape, dtype, name="x")
        except (TypeError, ValueError) as exc:
            problem = exc
            target = _message.new(shape, dtype)
    if inline is not None:
        target.data[:] = inline
    else:
        _broadcast_plan(c, dtype, shape, r, alg).run(data=target.data, deadline=deadline)
    if problem is not None:
        raise problem
    result = target.finish()
    if x is None:
        _lanes.remember_broadcast(c, result, r, alg, _broadcast_rest)  # Note [Broadcasts into None]
        return result
    return x


def _broadcast_lane(c, x, root, algorithm, timeout):
    """A plain broadcast of a numpy array on its lane: x, filled; NOT_TAKEN
    (nothing sent) for any call the lane does not take."""
    if type(root) is not int:
        return NOT_TAKEN           # prepare() checks it (Note [Equal keys])
    done = _lane_move.broadcast(c, x, root, algorithm, timeout)
    if done is NOT_TAKEN and type(x) is np.ndarray and _lanes.made(
            c, ("broadcast-lane", x.dtype, x.shape, root, algorithm),
            lambda: _lanes.make_broadcast(c, x, root, algorithm, _broadcast_rest)):
        done = _lane_move.broadcast(c, x, root, algorithm, timeout)
    return done


def _broadcast_rest(c, x, root, algorithm, message, deadline):
    """A lane receiver's call after a header it did not expect (already
    forwarded down the tree): the general path from there, by *deadline*
    (0.0: none)."""
    word = message[:WORD_BYTES].view(np.int64)
    dtype, shape = _header.read(c, root, None, word)
    return _broadcast_receive(c, x, root, algorithm, dtype, shape, deadline or None,
                              _header.inline_data(message, word))


def reduce(x: ArrayIn, op: OpArg = SUM, root: SupportsIndex = 0, comm: CommArg = None,
           algorithm: str = "auto", out: ArrayIn | None = None, accumulate: Accumulate = None,
           async_op: bool = False, timeout: Timeout = None):
    """Reduce x elementwise over all ranks onto the root.

    Args: as allreduce, plus ``root``; ``out`` is used on the root only.
    algorithm: "auto", "binomial", "rabenseifner".

    Returns:
        The reduced array on the root, None elsewhere.

    Example (2 ranks)::

        x = np.array([1, 2]) * (rank + 1)       # rank 0: [1, 2]   rank 1: [2, 4]
        pycoll.reduce(x, root=1)                # rank 0: None     rank 1: [3, 6]
    """
    c = comm if type(comm) is Communicator else _comm_of(comm)
    if type(root) is not int:
        root = _index_root(root)            # Note [Equal keys]
    x = _lane_view(x)                       # Note [Lane views]
    if c._tuner is not None and algorithm == "auto" and not async_op:
        x = _array(x)
        if _tunable(c, x):
            r = _check_root(root, c.size)
            return c._tuner.call(
                ("reduce", x.dtype, x.shape, op_of(op), accumulate, r),
                lambda: _reduction_args("reduce", c, x, op, "auto", accumulate, root=r),
                lambda name: reduce(x, op, root, c, name, out, accumulate, False, timeout))
    if not async_op and c._lane_ready and (view := _out_view(out)) is not NOT_TAKEN:
        result = _lane_reduce.reduce(c, x, op, root, algorithm, view, accumulate, timeout)
        if result is not NOT_TAKEN:
            return _lane_result(result, view, out)
    return _reduce(c, x, op, root, algorithm, out, accumulate, async_op, timeout)


def _reduce(c, x, op, root, algorithm, out, accumulate, async_op=False, timeout=None):
    def prepare():
        xa, o = _array(x), key_op(op)
        r = _check_root(root, c.size)
        plan = _plan(c, ("reduce", xa.dtype, xa.shape, o, r, algorithm, accumulate),
                     lambda: _reduction_args("reduce", c, xa, o, algorithm, accumulate, root=r))
        a = plan.args
        if c.rank == a.root:
            result, result_data, writeback = _result(out, a.shape, a.result)

        def run(deadline):
            send = _send_bytes(c, a, xa)
            if c.rank != a.root:
                plan.run(send=send, data=c.scratch("output", a.n), deadline=deadline)
                return None
            if a.dtype is a.result:
                send, data = _in_place(send, result_data, result, xa)
            else:
                data = c.scratch("output", a.n)
            plan.run(send=send, data=data, deadline=deadline)
            _finish(a, data, result_data, c.size)
            return _done(result, result_data, writeback, out)
        return _reduction_record("reduce", xa, o, algorithm, accumulate, root=a.root), run
    lane = partial(_lane_reduce.reduce, c, x, op, root, algorithm, out, accumulate, timeout) \
        if async_op else None
    return _call(c, "reduce", async_op, timeout, prepare, lane)


def _gather_record(name, x, sizes, algorithm, **more) -> dict:
    """The checks-mode record of a call whose axis-0 lengths *sizes* (as
    checked: None, a tuple of ints, or alltoall's tuple of rows) may make
    differ between ranks."""
    shape = list(x.shape or (1,))
    return {"collective": name, "dtype": x.dtype, "algorithm": algorithm, **more,
            "shape": shape if sizes is None else ["*"] + shape[1:],
            "sizes": None if sizes is None else [list(s) if type(s) is tuple else s
                                                 for s in sizes]}


def _allgather_lane(c, x, algorithm, out, timeout, sizes=None):
    """A plain allgather of a numpy array on its lane: the result, or
    NOT_TAKEN (nothing sent) for any call the lane does not take."""
    result = _lane_move.allgather(c, x, algorithm, out, timeout, sizes)
    if result is NOT_TAKEN and type(x) is np.ndarray and _made_with_sizes(
            c, ("allgather-lane", x.dtype, x.shape, algorithm), sizes,
            lambda s: _lanes.make_allgather(c, x, algorithm, s)):
        result = _lane_move.allgather(c, x, algorithm, out, timeout, sizes)
    return result


def _kept_sizes(sizes):
    """sizes= as the general path and an async call's lane read it, maybe
    later (checks mode checks an async call in its turn): the caller's
    values when the call was issued, not a list or array the caller has
    since changed, nor an iterator one of them has used up."""
    if type(sizes) is list or isinstance(sizes, Iterator):
        return tuple(sizes)
    return sizes.copy() if type(sizes) is np.ndarray else sizes


def _made_with_sizes(c, key: tuple, sizes, make, keyed=sizes_key) -> bool:
    """_lanes.made for a lane of calls with sizes=: *key* ends with sizes=
    as the C entry keys it (*keyed*: sizes_key, or alltoall's matrix_key),
    and make(sizes) gets the tuple; False, the general path, for sizes it
    does not key."""
    tail = keyed(sizes)
    if tail is None:
        return False
    return _lanes.made(c, key + tail, lambda: make(tail[0] if tail else None))


def _gather_lane(c, x, root, algorithm, out, timeout, sizes=None):
    """A plain gather of a numpy array on its lane: the root's result or
    None elsewhere; NOT_TAKEN (nothing sent) for any call the lane does not
    take."""
    if type(root) is not int:
        return NOT_TAKEN           # prepare() checks it (Note [Equal keys])
    result = _lane_move.gather(c, x, root, algorithm, out, timeout, sizes)
    if result is NOT_TAKEN and type(x) is np.ndarray and _made_with_sizes(
            c, ("gather-lane", x.dtype, x.shape, root, algorithm), sizes,
            lambda s: _lanes.make_gather(c, x, root, algorithm, s)):
        result = _lane_move.gather(c, x, root, algorithm, out, timeout, sizes)
    return result


def _scatter_lane(c, x, root, algorithm, out, timeout, sizes=None):
    """A plain scatter on its lane (made on the first call): the root's x a
    numpy array whose header is the short word and whose messages each fit
    in a segment. This rank's block, or
    NOT_TAKEN (nothing sent) for any call the lane does not take; past the
    header, a call the data lane declines continues on the general path."""
    if type(root) is not int:
        return NOT_TAKEN           # prepare() checks it (Note [Equal keys])
    result = _lane_move.scatter(c, x, root, algorithm, out, timeout, sizes)
    if result is not NOT_TAKEN:
        return result
    if c.rank == root:
        ready = type(x) is np.ndarray and _made_with_sizes(
            c, ("scatter-lane-root", x.dtype, x.shape, root, algorithm), sizes,
            lambda s: _lanes.make_scatter_root(c, x, root, algorithm, _scatter_data, s))
    else:
        ready = _made_with_sizes(
            c, ("scatter-header", root, algorithm), sizes,
            lambda s: _lanes.make_scatter_receiver(c, root, algorithm, partial(
                _scatter_receive, sizes=s), s))
    return _lane_move.scatter(c, x, root, algorithm, out, timeout, sizes) if ready else result


def _scatter_receive(c, receiver, root, algorithm, message, out, tag, deadline, sizes=None):
    """A receiver's call after a header word that does not name its last
    data lane (or whose out that lane declined): the lane of this word
    (and *sizes*, a tuple of ints or None), found or made and remembered,
    else the general path: an inline word's blocks passed on (on the
    header's *tag*), or the data phase; by *deadline* (None: none)."""
    word = message[:WORD_BYTES].view(np.int64)
    dtype, shape = _header.read(c, root, None, word)         # the root's error raises here
    if word[0] not in (HEADER_INLINE, HEADER_OK):             # more dimensions than a word holds
        return _scatter_data(c, root, algorithm, dtype, shape, None, out, deadline, sizes)
    lane = _cached_lane(c, ("scatter-lane", root, algorithm, word.tobytes(), sizes),
                        lambda: _lanes.make_scatter_data(c, word, root, algorithm, sizes))
    receiver.expect(word.tobytes(), lane)
    if word[0] == HEADER_INLINE:
        channel = Channel(c, tag)
        children = _header.binomial_edges(root, c.rank, c.size)[1]
        channel.begin(deadline, "scatter", "header", len(children))
        own = _header.scatter_forward(c, root, dtype, shape, word, message[WORD_BYTES:], channel,
                                      sizes)
        return _scatter_own(c, root, algorithm, dtype, shape, own, out, sizes)
    if lane is not None:
        result = lane.run(None, out, deadline or 0.0)
        if result is not NOT_TAKEN:
            return result
    return _scatter_data(c, root, algorithm, dtype, shape, None, out, deadline, sizes)


def gather(x: ArrayIn, root: SupportsIndex = 0, comm: CommArg = None, algorithm: str = "auto",
           sizes: Sizes = None, out: ArrayIn | None = None,
           async_op: bool = False, timeout: Timeout = None):
    """Concatenate every rank's x along axis 0 on the root.

    Args:
        x: this rank's array; the same dtype and trailing shape on every
            rank, and the same length unless ``sizes`` is given (a 0-d x
            counts as one row).
        sizes: every rank's axis-0 length, when they differ.
        out: the root's result buffer (ignored elsewhere).
        algorithm: "auto", "binomial", "linear".

    Returns:
        On the root the concatenation in rank order, None elsewhere.

    Example (2 ranks)::

        x = np.full(rank + 1, rank)                     # rank 0: [0]  rank 1: [1, 1]
        pycoll.gather(x, root=0, sizes=[1, 2])          # rank 0: [0, 1, 1]  rank 1: None
    """
    c = comm if type(comm) is Communicator else _comm_of(comm)
    if type(root) is not int:
        root = _index_root(root)            # Note [Equal keys]
    x = _lane_view(x)                       # Note [Lane views]
    if not async_op and c._lane_ready and (view := _out_view(out)) is not NOT_TAKEN:
        result = _gather_lane(c, x, root, algorithm, view, timeout, sizes)
        if result is not NOT_TAKEN:
            return _lane_result(result, view, out)

    sizes = _kept_sizes(sizes)

    def prepare():
        xa = _array(x)
        r = _check_root(root, c.size)
        given = _check_sizes(sizes, c.size)
        key = ("gather", xa.dtype, xa.shape, r, algorithm, given)
        plan = _plan(c, key, lambda: _gather_args("gather", c, xa, algorithm, given, root=r))
        a = plan.args
        if c.rank == a.root:
            result, result_data, writeback = _result(out, a.shape, a.dtype)

        def run(deadline):
            send = _send_bytes(c, a, xa)
            if c.rank != a.root:
                plan.run(send=send, deadline=deadline)
                return None
            plan.run(send=send, out=result_data, deadline=deadline)
            return _done(result, result_data, writeback, out)
        return _gather_record("gather", xa, given, algorithm, root=a.root), run
    lane = partial(_gather_lane, c, x, root, algorithm, out, timeout, sizes) if async_op else None
    return _call(c, "gather", async_op, timeout, prepare, lane)


def allgather(x: ArrayIn, comm: CommArg = None, algorithm: str = "auto",
              sizes: Sizes = None, out: ArrayIn | None = None,
              async_op: bool = False, timeout: Timeout = None):
    """Concatenate every rank's x along axis 0, on every rank.

    Args: as gather, without root. algorithm: "auto", "ring",
    "recursive_doubling", "bruck".

    Example (2 ranks)::

        x = np.array([rank, rank])        # rank 0: [0, 0]    rank 1: [1, 1]
        pycoll.allgather(x)               # both:   [0, 0, 1, 1]
    """
    c = comm if type(comm) is Communicator else _comm_of(comm)
    x = _lane_view(x)                       # Note [Lane views]
    if not async_op and c._lane_ready and (view := _out_view(out)) is not NOT_TAKEN:
        result = _allgather_lane(c, x, algorithm, view, timeout, sizes)
        if result is not NOT_TAKEN:
            return _lane_result(result, view, out)

    sizes = _kept_sizes(sizes)

    def prepare():
        xa = _array(x)
        given = _check_sizes(sizes, c.size)
        key = ("allgather", xa.dtype, xa.shape, algorithm, given)
        plan = _plan(c, key, lambda: _gather_args("allgather", c, xa, algorithm, given))
        a = plan.args
        result, result_data, writeback = _result(out, a.shape, a.dtype)

        def run(deadline):
            # The algorithm puts this rank's block in place (_shape.own_block).
            send = _send_bytes(c, a, xa)
            lo = sum(a.counts[:c.rank])
            if np.may_share_memory(send, result_data) \
                    and not same_bytes(send, result_data[lo:lo + a.counts[c.rank]]):
                send = send.copy()          # out overlaps x elsewhere: blocks land before x leaves
            plan.run(send=send, out=result_data, deadline=deadline)
            return _done(result, result_data, writeback, out)
        return _gather_record("allgather", xa, given, algorithm), run
    lane = partial(_allgather_lane, c, x, algorithm, out, timeout, sizes) if async_op else None
    return _call(c, "allgather", async_op, timeout, prepare, lane)


def scatter(x: ArrayIn | None, root: SupportsIndex = 0, comm: CommArg = None,
            algorithm: str = "auto", out: ArrayIn | None = None, async_op: bool = False,
            timeout: Timeout = None, *, sizes: Sizes = None):
    """Give rank i block i of the root's x (``np.array_split`` along axis 0,
    or sizes[i] rows).

    Args:
        x: the root's array (at least 1-d); ignored elsewhere, may be None.
        out: this rank's block buffer.
        algorithm: "auto", "binomial", "linear".
        sizes: every rank's block length along axis 0 (as MPI's Scatterv
            takes counts), the same on every rank; they must sum to the
            root's axis-0 length. None: ``np.array_split``.

    Example (2 ranks)::

        x = np.arange(5) if rank == 0 else None   # rank 0: [0, 1, 2, 3, 4]
        pycoll.scatter(x, root=0)                 # rank 0: [0, 1, 2]  rank 1: [3, 4]
        pycoll.scatter(x, root=0, sizes=[1, 4])   # rank 0: [0]        rank 1: [1, 2, 3, 4]
    """
    c = comm if type(comm) is Communicator else _comm_of(comm)
    if type(root) is not int:
        root = _index_root(root)            # Note [Equal keys]
    x = _lane_view(x)                       # Note [Lane views]
    if not async_op and c._lane_ready and (view := _out_view(out)) is not NOT_TAKEN:
        result = _scatter_lane(c, x, root, algorithm, view, timeout, sizes)
        if result is not NOT_TAKEN:
            return _lane_result(result, view, out)
    sizes = _kept_sizes(sizes)

    def prepare():
        r = _check_root(root, c.size)
        alg = _check_algorithm("scatter", algorithm)
        given = _check_counts(sizes, c.size)
        header, msg = None, None
        if c.rank == r:
            header, msg = _header.root_header(x, lambda m: _scatter_rows(m, c.size, given))

        def run(deadline):
            payload = None if msg is None else _header.inline_scatter_payload(c, r, alg, msg, given)
            dtype, shape, own = _header.exchange(c, r, header, deadline, "scatter", payload, given)
            if own is not None:
                return _scatter_own(c, r, alg, dtype, shape, own, out, given)
            return _scatter_data(c, r, alg, dtype, shape, msg, out, deadline, given)
        record = {"collective": "scatter", "root": r, "algorithm": alg,
                  "sizes": None if given is None else list(given)}
        return record, (_agreed_after(c, "scatter", run) if _checks_on(c) else run)
    lane = partial(_scatter_lane, c, x, root, algorithm, out, timeout, sizes) if async_op else None
    return _call(c, "scatter", async_op, timeout, prepare, lane)


def _scatter_rows(msg, size: int, sizes) -> None:
    """The root's x split along axis 0: at least 1-d, its rows what *sizes*
    (None or a tuple of ints) adds up to."""
    _rows(msg.shape, "scatter")
    if sizes is not None:
        _split_counts(msg.shape, msg.dtype.itemsize, size, sizes)


def _agreed_after(c, name: str, run):
    """Checks mode, for scatter, whose ranks learn what their out must be
    only from the root's header: run, then agree on whether a rank's own
    argument raised (it takes part first, so that the others finish), so
    that the error reaches every rank as a MismatchError."""
    def checked(deadline):
        try:
            result = run(deadline)
        except (TypeError, ValueError) as exc:
            _agree(c, {"collective": name, "after": f"{type(exc).__name__}: {exc}"}, deadline,
                   mine=exc)
            raise
        _agree(c, {"collective": name, "after": "ok"}, deadline)
        return result
    return checked


def _scatter_own(c, r, alg, dtype, shape, own, out, sizes=None):
    """An inline scatter's result: this rank's block, *own*, into out or a
    new array (a bad out raises; every message has left already)."""
    plan = _scatter_plan(c, dtype, shape, r, alg, sizes)
    result, result_data, writeback = _result(out, plan.args.shape, dtype)
    result_data[:] = own
    return _done(result, result_data, writeback, out)


def _scatter_data(c, r, alg, dtype, shape, msg, out, deadline, sizes=None):
    """A scatter once every rank knows the root's (dtype, shape): the
    blocks, into out or a new array (*msg* is the root's input)."""
    plan = _scatter_plan(c, dtype, shape, r, alg, sizes)
    a = plan.args
    # A bad out (known only now, from the header) is raised after taking
    # part, so that no other rank waits for this one forever.
    problem = None
    try:
        result, result_data, writeback = _result(out, a.shape, dtype)
    except (TypeError, ValueError) as exc:
        problem = exc
        result, result_data, writeback = _result(None, a.shape, dtype)
    send = None if msg is None else msg.data
    if send is not None and np.may_share_memory(send, result_data):
        send = send.copy()          # the root's out overlaps x: its block lands before others leave
    plan.run(send=send, out=result_data, deadline=deadline)
    if problem is not None:
        raise problem
    return _done(result, result_data, writeback, out)


def reduce_scatter(x: ArrayIn, op: OpArg = SUM, comm: CommArg = None, algorithm: str = "auto",
                   out: ArrayIn | None = None, accumulate: Accumulate = None,
                   async_op: bool = False, timeout: Timeout = None, *, sizes: Sizes = None):
    """Reduce x elementwise over all ranks; rank i gets block i of the result
    (``np.array_split`` along axis 0, or sizes[i] rows).

    Args: as allreduce (x at least 1-d); ``out`` is this rank's block.
    algorithm: "auto", "ring", "recursive_halving". sizes: every rank's
    block length along axis 0 (as MPI's Reduce_scatter takes counts), the
    same on every rank, summing to x's; None: ``np.array_split``.

    Example (2 ranks)::

        x = np.arange(4) * (rank + 1)     # rank 0: [0, 1, 2, 3]   rank 1: [0, 2, 4, 6]
        pycoll.reduce_scatter(x)          # rank 0: [0, 3]         rank 1: [6, 9]
        pycoll.reduce_scatter(x, sizes=[3, 1])   # rank 0: [0, 3, 6]   rank 1: [9]
    """
    c = comm if type(comm) is Communicator else _comm_of(comm)
    x = _lane_view(x)                       # Note [Lane views]
    if c._tuner is not None and algorithm == "auto" and not async_op and sizes is None:
        x = _array(x)
        if _tunable(c, x):
            return c._tuner.call(
                ("reduce_scatter", x.dtype, x.shape, op_of(op), accumulate),
                lambda: _reduce_scatter_args(c, x, op, "auto", accumulate),
                lambda name: reduce_scatter(x, op, c, name, out, accumulate, False, timeout))
    if not async_op and c._lane_ready and (view := _out_view(out)) is not NOT_TAKEN:
        result = _lane_reduce.reduce_scatter(c, x, op, algorithm, view, accumulate, timeout,
                                             sizes)
        if result is not None:
            return _lane_result(result, view, out)
    return _reduce_scatter(c, x, op, algorithm, out, accumulate, async_op, timeout,
                           _kept_sizes(sizes))


def _reduce_scatter(c, x, op, algorithm, out, accumulate, async_op=False, timeout=None,
                    sizes=None):
    """reduce_scatter past its lane and the tuner; *sizes* as the caller
    passed them (_kept_sizes), or None."""
    def prepare():
        xa, o = _array(x), key_op(op)
        given = _check_sizes(sizes, c.size)
        key = ("reduce_scatter", xa.dtype, xa.shape, o, algorithm, accumulate)
        plan = _plan(c, key if given is None else key + (given,),
                     lambda: _reduce_scatter_args(c, xa, o, algorithm, accumulate, given))
        a = plan.args
        result, result_data, writeback = _result(out, a.shape, a.result)

        def run(deadline):
            # The C lane, where the top of reduce_scatter() could not take it
            # (checks mode, an async call, sizes=): it has no deadline to keep.
            if deadline is None and plan.lane is not None and writeback is None \
                    and plan.lane.run(xa, result) is not None:
                return result
            send = _send_bytes(c, a, xa)
            mine = result_data if a.dtype is a.result else c.scratch("block", a.counts[c.rank])
            if np.may_share_memory(send, mine):
                send = send.copy()          # out overlaps x: partials land before x is read
            plan.run(send=send, data=c.scratch("output", sum(a.counts)), out=mine, deadline=deadline)
            _finish(a, mine, result_data, c.size)
            return _done(result, result_data, writeback, out)
        record = _reduction_record("reduce_scatter", xa, o, algorithm, accumulate,
                                   sizes=None if given is None else list(given))
        return record, run
    return _call(c, "reduce_scatter", async_op, timeout, prepare)


def alltoall(x: ArrayIn, comm: CommArg = None, algorithm: str = "auto",
             out: ArrayIn | None = None, async_op: bool = False, timeout: Timeout = None,
             *, sizes: Matrix = None):
    """Send block j of x (``np.array_split`` along axis 0, or sizes[r][j]
    rows) to rank j; the blocks received are concatenated in rank order.

    Args:
        x: this rank's array, at least 1-d, the same shape and dtype on every
            rank (the same dtype and trailing shape with ``sizes``).
        algorithm: "auto", "pairwise".
        sizes: a p x p matrix, the same on every rank (as MPI's Alltoallv
            takes counts, or torch's all_to_all_single its split sizes):
            sizes[i][j] is the rows rank i sends to rank j, so row r sums
            to this rank's rows and column r to its result's. A rank that
            knows only its own row can allgather them first:
            ``sizes = pycoll.allgather(np.array([row]))``.

    Example (2 ranks)::

        x = np.array([10, 11]) + 10 * rank   # rank 0: [10, 11]   rank 1: [20, 21]
        pycoll.alltoall(x)                   # rank 0: [10, 20]   rank 1: [11, 21]
        pycoll.alltoall(x, sizes=[[2, 0], [1, 1]])   # rank 0: [10, 11, 20]   rank 1: [21]
    """
    c = comm if type(comm) is Communicator else _comm_of(comm)
    x = _lane_view(x)                       # Note [Lane views]
    if not async_op and c._lane_ready and (view := _out_view(out)) is not NOT_TAKEN:
        result = _alltoall_lane(c, x, algorithm, view, timeout, sizes)
        if result is not NOT_TAKEN:
            return _lane_result(result, view, out)
    sizes = _kept_sizes(sizes)
    if type(sizes) is tuple:
        sizes = tuple(_kept_sizes(line) for line in sizes)      # its rows too

    def prepare():
        xa = _array(x)
        given = _check_matrix(sizes, c.size)
        key = ("alltoall", xa.dtype, xa.shape, algorithm)
        plan = _plan(c, key if given is None else key + (given,),
                     lambda: _alltoall_args(c, xa, algorithm, given))
        a = plan.args
        result, result_data, writeback = _result(out, a.shape, a.dtype)

        def run(deadline):
            send = _send_bytes(c, a, xa)
            if np.may_share_memory(send, result_data):
                send = send.copy()          # out overlaps x: blocks land before others leave
            plan.run(send=send, out=result_data, deadline=deadline)
            return _done(result, result_data, writeback, out)
        return _gather_record("alltoall", xa, given, algorithm), run
    lane = partial(_alltoall_lane, c, x, algorithm, out, timeout, sizes) if async_op else None
    return _call(c, "alltoall", async_op, timeout, prepare, lane)


def _alltoall_lane(c, x, algorithm, out, timeout, sizes=None):
    """A plain alltoall of a numpy array on its lane: the result, or
    NOT_TAKEN (nothing sent) for any call the lane does not take."""
    result = _lane_move.alltoall(c, x, algorithm, out, timeout, sizes)
    if result is NOT_TAKEN and type(x) is np.ndarray and _made_with_sizes(
            c, ("alltoall-lane", x.dtype, x.shape, algorithm), sizes,
            lambda s: _lanes.make_alltoall(c, x, algorithm, s), matrix_key):
        result = _lane_move.alltoall(c, x, algorithm, out, timeout, sizes)
    return result


def scan(x: ArrayIn, op: OpArg = SUM, comm: CommArg = None, exclusive: bool = False,
         algorithm: str = "auto", out: ArrayIn | None = None, accumulate: Accumulate = None,
         async_op: bool = False, timeout: Timeout = None):
    """Prefix reduction over ranks: rank i gets x_0 op ... op x_i.

    Args: as allreduce, plus ``exclusive`` (rank i gets x_0 op ... op x_{i-1};
    rank 0 gets None). algorithm: "auto", "recursive_doubling", "linear".

    Example (3 ranks)::

        x = np.array([rank + 1])          # rank 0: [1]    rank 1: [2]   rank 2: [3]
        pycoll.scan(x)                    # rank 0: [1]    rank 1: [3]   rank 2: [6]
        pycoll.scan(x, exclusive=True)    # rank 0: None   rank 1: [1]   rank 2: [3]
    """
    c = comm if type(comm) is Communicator else _comm_of(comm)
    x = _lane_view(x)                       # Note [Lane views]
    if not async_op and c._lane_ready and (view := _out_view(out)) is not NOT_TAKEN:
        result = _lane_reduce.scan(c, x, op, exclusive, algorithm, view, accumulate, timeout)
        if result is not NOT_TAKEN:
            return _lane_result(result, view, out)

    def prepare():
        xa, o = _array(x), key_op(op)
        ex = _check_exclusive(exclusive)
        plan = _plan(c, ("scan", xa.dtype, xa.shape, o, ex, algorithm, accumulate),
                     lambda: _scan_args(c, xa, o, ex, algorithm, accumulate))
        a = plan.args
        empty = a.exclusive and c.rank == 0
        if not empty:
            result, result_data, writeback = _result(out, a.shape, a.result)

        def run(deadline):
            # The C lane, where the top of scan() could not take it (checks
            # mode, an async call): it has no deadline to keep.
            if deadline is None and plan.lane is not None and (empty or writeback is None):
                done = plan.lane.take(xa, None if empty else result)
                if done is not NOT_TAKEN:
                    return done
            send = _send_bytes(c, a, xa)
            if not empty and np.may_share_memory(send, result_data):
                send = send.copy()          # out is or overlaps x: partials land before x is read
            data = c.scratch("output", a.n)
            if empty:
                plan.run(send=send, data=data, out=c.scratch("block", a.n), deadline=deadline)
                return None
            mine = result_data if a.dtype is a.result else c.scratch("block", a.n)
            plan.run(send=send, data=data, out=mine, deadline=deadline)
            _finish(a, mine, result_data, c.rank if a.exclusive else c.rank + 1)
            return _done(result, result_data, writeback, out)
        return _reduction_record("scan", xa, o, algorithm, accumulate, exclusive=a.exclusive), run
    lane = partial(_lane_reduce.scan, c, x, op, exclusive, algorithm, out, accumulate, timeout) \
        if async_op else None
    return _call(c, "scan", async_op, timeout, prepare, lane)


def barrier(comm: CommArg = None, async_op: bool = False, timeout: Timeout = None):
    """Return only when every rank of comm has entered the barrier
    (dissemination: ⌈log₂p⌉ rounds of empty messages).

    Example (2 ranks)::

        pycoll.barrier()                     # each rank returns once both have called it
        h = pycoll.barrier(async_op=True)    # at once; h.wait() returns None once both have
    """
    c = comm if type(comm) is Communicator else _comm_of(comm)
    if not async_op and c._lane_ready:
        done = _barrier_lane(c, timeout)
        if done is not NOT_TAKEN:
            return done
    return _barrier(c, async_op, timeout)


def _barrier_lane(c, timeout):
    done = _lane_move.barrier(c, timeout)
    if done is NOT_TAKEN and _lanes.made(c, ("barrier-lane",),
                                         lambda: _lanes.make_barrier(c)):
        done = _lane_move.barrier(c, timeout)
    return done


def _barrier(c, async_op, timeout):
    def prepare():
        plan = _plan(c, ("barrier",), lambda: CollArgs("barrier", "auto", 0, BY_NAME["uint8"],
                                                       BY_NAME["uint8"]))
        return {"collective": "barrier"}, lambda deadline: plan.run(deadline=deadline)
    lane = partial(_barrier_lane, c, timeout) if async_op else None
    return _call(c, "barrier", async_op, timeout, prepare, lane)


def _fused_allreduce(c, views: list, dtype: DType, op: Op, algorithm: str) -> None:
    """Allreduce in place, for the FusionManager, a bucket as one vector
    made of byte *views* (its arrays where they lie, pycoll/_pieces.py),
    without packing it: *algorithm* must be marked PIECES. Bitwise the
    result of that algorithm on the packed vector: the blocks, and so every
    reduction's operands and order, are the same; only the messages are cut
    at the views' boundaries as well, so every rank must pass views cut at
    the same places."""
    vector = Pieces(views)
    n = len(vector)
    plan = _plan(c, ("fused_allreduce", dtype.name, n, op, algorithm),
                 lambda: CollArgs("allreduce", algorithm, n, dtype, dtype, op))
    if not getattr(plan.module, "PIECES", False):
        raise ValueError(f"allreduce({plan.algorithm}) cannot run on unpacked arrays")
    plan.run(send=vector, data=vector)
    if op is Op.AVG:
        for v in vector.views:
            scale(dtype.code, v, v, c.size)


def _fused_reduce_scatter_plan(c, counts: tuple, dtype: DType, op: Op, accumulate) -> Plan:
    """The Plan of a reduce-scatter of a byte buffer laid out by rank
    (*counts*: bytes per rank's region), for the FusionManager."""
    work = _work_dtype(dtype, accumulate)
    wide_counts = tuple(k * (work.itemsize // dtype.itemsize) for k in counts)
    return _plan(c, ("fused_reduce_scatter", dtype.name, counts, op, accumulate),
                 lambda: CollArgs("reduce_scatter", "auto", max(wide_counts), work, dtype, op,
                                  counts=wide_counts, shape=(counts[c.rank] // dtype.itemsize,)))


def _fused_reduce_scatter(c, plan: Plan, flat, region) -> None:
    """Run a _fused_reduce_scatter_plan on *flat* (the buffer as a 1-d
    array of its dtype): this rank's region of the reduction (AVG divided,
    float32 rounded back) into *region* (a 1-d array of that dtype). On the
    reduce_scatter lane where the plan has one (the same messages and bits
    as the general path)."""
    a = plan.args
    if plan.lane is not None and plan.lane.run(flat, region) is not None:
        return
    region = region.view(np.uint8)
    send = _send_bytes(c, a, flat)
    mine = region if a.dtype is a.result else c.scratch("block", a.counts[c.rank])
    plan.run(send=send, data=c.scratch("output", sum(a.counts)), out=mine)
    _finish(a, mine, region, c.size)


# ---------------------------------------------------------------------------
# The methods' documentation: each method is its module function with
# comm=self, and carries that function's docstring (help(comm.allreduce),
# editors' hover text).

for _name in ("allreduce", "broadcast", "reduce", "gather", "scatter", "allgather",
              "reduce_scatter", "alltoall", "scan", "barrier"):
    getattr(Communicator, _name).__doc__ = (
        f"``comm.{_name}(...)`` is ``pycoll.{_name}(..., comm=comm)``:\n\n"
        + inspect.cleandoc(globals()[_name].__doc__))
del _name
