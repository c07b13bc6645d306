"""A call signature's checked arguments (``CollArgs``), the ``Plan`` made
from them once, and the helpers every call binds its buffers with.

The public functions in api.py each check their arguments here on a
signature's first call (``_reduction_args``, ``_gather_args``, ...: they
raise before any message is sent), and ``_plan`` keeps the resulting Plan
per communicator, so a repeated call only binds its buffers (``_result``,
``_send_bytes``, ``_in_place``) and runs. An allreduce, reduce or
reduce_scatter plan also holds its C lane (``_lane``) when its messages
fit one segment; the lanes of the other collectives are made in _lanes.py and
kept beside the plans (``_cached_lane``).
"""
from __future__ import annotations

import dataclasses
import logging
import math
import operator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from pycoll import _lane_reduce, _message, _resources, tuning
from pycoll._dtypes import FLOAT32, DType, Op, check_op, dtype_of, op_of
from pycoll._kernels.copy import block, unpack
from pycoll._kernels.reduce import convert, scale
from pycoll._p2p import Channel
from pycoll.algorithms import ALGORITHMS, REGISTRY, Task
from pycoll.algorithms._schedule import SEED

if TYPE_CHECKING:
    from pycoll.api import Communicator

log = logging.getLogger("pycoll")


@dataclass(frozen=True, slots=True)
class CollArgs:
    """One call signature after its arguments are checked: all that the
    calls sharing it have in common.

    n is the size the selection sees (as in the algorithms' cost terms: the
    vector for allreduce/broadcast/reduce/scan, one block for the others);
    dtype is the element type on the wire (float32 under accumulate), result
    the caller's; shape is this rank's result shape.
    """

    collective: str
    algorithm: str                  # as asked: a name or "auto"
    n: int
    dtype: DType
    result: DType
    op: Op | None = None
    root: int = 0
    counts: tuple = ()
    recv_counts: tuple = ()         # alltoall with sizes=: the blocks this rank receives
    exclusive: bool = False
    shape: tuple = ()


class Plan:
    """A CollArgs on a communicator: the algorithm selected for it, and a
    Channel and a Task that every call with the signature reuses. Made once
    per signature (``_plan``), so a repeated call pays only for binding its
    buffers and taking a tag."""

    __slots__ = ("args", "comm", "algorithm", "module", "channel", "task", "lane")

    def __init__(self, comm: Communicator, args: CollArgs, algorithm: str | None = None):
        """*algorithm*: the one args asks for, "auto" resolved (_resolved)."""
        self.args, self.comm = args, comm
        self.algorithm = algorithm or _resolved(comm, args)
        self.module = REGISTRY[args.collective][self.algorithm]
        op = args.op.kernel if args.op is not None else -1
        segment = tuning.segment(args.collective, self.algorithm, args.n, comm.size, comm.settings)
        # A segment holds whole elements: a reduction cuts its vector only
        # between them (PYCOLL_SEGMENT_BYTES may be any number).
        item = args.dtype.itemsize
        segment = max(item, segment - segment % item)
        log.debug("%s %s n=%d p=%d: %s, segments of %d bytes", args.collective, args.dtype.name,
                  args.n, comm.size, self.algorithm, segment)
        self.channel = Channel(comm, 0, op, args.dtype.code, segment)
        self.task = Task(self.channel, comm.rank, comm.size, args.root, args.dtype.itemsize,
                         counts=args.counts, recv_counts=args.recv_counts,
                         exclusive=args.exclusive)
        self.lane = _lane(comm, args, self.algorithm, self.module, segment)

    def run(self, send=None, data=None, out=None, deadline=None) -> None:
        """One call: bind the byte views, take the next tag, run (by
        *deadline*, a time.monotonic() value, if given)."""
        t = self.task
        t.send, t.data, t.out = send, data, out
        self.channel.tag = self.comm.next_tag()
        self.channel.begin(deadline, self.args.collective, self.algorithm,
                           self.module.steps(self.comm.size))
        try:
            self.module.run(t)
        finally:
            t.send = t.data = t.out = None          # hold no caller memory
        self.channel.check_arrivals()               # Note [Message lengths] in _p2p.py


# Call signatures whose Plans (and lanes) a communicator keeps; at the
# limit it forgets them all. A Plan borrows the communicator's scratch, so
# it is small. A model's worth of distinct shapes must fit: with 256, one
# allreduce per array over 1,000 arrays of distinct sizes rebuilt a Plan on
# every call (28 us a call at p = 2 against 8.7 us for one size). An
# "auto" signature takes two entries (Note [One plan per algorithm]), so
# 2,048 of them fit.
PLAN_CACHE = 4096


def _lane(comm, args: CollArgs, algorithm: str, module, segment: int):
    """The C lane of an allreduce, reduce or scan plan (pycoll/_lane_reduce.pyx),
    when the vector is one message of an algorithm written as a schedule
    (scan: _scan_lane); of
    the ring's allreduce, when every chunk is one segment
    (_ring_allreduce_lane); of a reduce_scatter plan, when every message of
    its schedule is one segment (_reduce_scatter_lane); else None."""
    if args.collective == "reduce_scatter":
        return _reduce_scatter_lane(comm, args, algorithm, module, segment)
    if args.collective == "scan":
        return _scan_lane(comm, args, algorithm, module, segment)
    if args.collective not in ("allreduce", "reduce") or comm.transport is None:
        return None
    assert args.op is not None
    # A lane of accumulate="float32" widens: Note [Widened lanes] in _lane_reduce.pyx.
    if args.n == 0 or comm.size == 1 and args.n <= segment:
        steps = []                          # Note [Empty lanes]; Note [Solo lanes] in _lanes.py
    elif hasattr(module, "chunk_schedule"):
        return _ring_allreduce_lane(comm, args, algorithm, module, segment)
    elif not args.n <= segment or not hasattr(module, "schedule"):
        return None
    elif args.collective == "reduce":
        steps = module.schedule(comm.size, comm.rank, args.root)
    else:
        steps = module.schedule(comm.size, comm.rank)
    return _lane_reduce.Lane(comm, comm.transport, steps, args.op.kernel, args.dtype.code,
                             args.shape, args.result.numpy, args.n,
                             comm.size if args.op is Op.AVG else 0,
                             args.collective == "allreduce" or comm.rank == args.root,
                             args.collective, algorithm, args.result.code)


def _scan_lane(comm, args: CollArgs, algorithm: str, module, segment: int):
    """A scan plan's _lane_reduce.ScanLane, when the vector is one segment (so
    that the linear chain sends it as one message, as its schedule does);
    else None. An empty vector keeps only the schedule's SEED (Note [Empty
    lanes] in _lanes.py)."""
    assert args.op is not None
    if comm.transport is None or args.n > segment:
        return None
    p, r = comm.size, comm.rank
    steps = module.schedule(p, r, args.exclusive)
    if args.n == 0:
        steps = [step for step in steps if step[0] == SEED]
    gets_result = r > 0 or not args.exclusive
    divisor = (r if args.exclusive else r + 1) if args.op is Op.AVG else 0
    return _lane_reduce.ScanLane(comm, comm.transport, steps, args.op.kernel, args.dtype.code,
                                 args.shape, args.result.numpy, args.n, divisor, gets_result,
                                 "scan", algorithm, args.result.code)


def _schedule_without_empty(steps) -> tuple:
    """Steps of the reduce_scatter lane's form without their empty
    messages: a half whose range is empty is not done (its peer -1), as
    the general path sends no empty message (Note [Empty lanes] in
    _lanes.py), and an empty range reduces nothing."""
    return tuple((dest if sent[1] else -1, source if received[1] else -1, sent, received, flags)
                 for dest, source, sent, received, flags in steps)


def _ring_allreduce_lane(comm, args: CollArgs, algorithm: str, module, segment: int):
    """An allreduce of the ring for _lane_reduce.ReduceScatterLane (whole), when
    every chunk is one segment (or empty: no message), so that each of its messages
    is one C call as on the general path (Channel.sendrecv_reduce and
    sendrecv); else None. A rank in place receives into the lane's scratch,
    as sendrecv_reduce does."""
    assert args.op is not None
    p = comm.size
    if p == 1:
        return None                         # larger than a segment: the general path copies
    steps = _schedule_without_empty(
        module.chunk_schedule(p, comm.rank, args.n, args.dtype.itemsize))
    sizes = [n for step in steps for n in (step[2][1], step[3][1])]
    if max(sizes) > min(segment, LANE_MAX_BYTES) or len(steps) > _resources.MAX_LANE_STEPS:
        return None
    return _lane_reduce.ReduceScatterLane(comm, comm.transport, steps, args.op.kernel,
                                          args.dtype.code, args.shape, args.result.numpy, args.n,
                                          p if args.op is Op.AVG else 0, algorithm, whole=True,
                                          result_code=args.result.code)


def _reduce_scatter_lane(comm, args: CollArgs, algorithm: str, module, segment: int):
    """The schedule of the plan's algorithm (the ring or recursive halving)
    for _lane_reduce.ReduceScatterLane, when every message is one segment (an
    empty block sends none); else None."""
    assert args.op is not None
    p, r, counts = comm.size, comm.rank, args.counts
    if comm.transport is None:
        return None
    if p == 1:                  # Note [Solo lanes] in _lanes.py: allreduce's lane, x copied
        return _lane_reduce.Lane(comm, comm.transport, [], args.op.kernel, args.dtype.code,
                                 args.shape, args.result.numpy, args.n,
                                 1 if args.op is Op.AVG else 0, True, "reduce_scatter",
                                 algorithm, args.result.code) if args.n <= segment else None
    if max(counts) == 0:
        steps: tuple = ()                   # Note [Empty lanes] in _lanes.py
    elif not hasattr(module, "schedule"):
        return None
    else:
        steps = _schedule_without_empty(module.schedule(p, r, counts))
        if (len(steps) > _resources.MAX_LANE_STEPS
                or max(max(s[2][1], s[3][1]) for s in steps) > min(segment, LANE_MAX_BYTES)):
            return None
    return _lane_reduce.ReduceScatterLane(comm, comm.transport, steps, args.op.kernel,
                                          args.dtype.code, args.shape, args.result.numpy,
                                          sum(counts), p if args.op is Op.AVG else 0, algorithm,
                                          result_code=args.result.code)


def _resolved(comm, args: CollArgs) -> str:
    """The algorithm a call of *args* runs: the one named, or the model's
    pick for "auto" (the same on every rank, Note [Same choice everywhere]
    in tuning.py)."""
    if args.algorithm != "auto":
        return args.algorithm
    return tuning.select(args.collective, args.n, comm.size, comm.settings, args.dtype.name)


def _plan(c: Communicator, key: tuple, build) -> Plan:
    """The Plan of call signature *key*, made by ``build()`` on first use,
    or the one its algorithm already has (Note [One plan per algorithm]).
    build() checks the arguments and raises before any message is sent."""
    try:
        return c._plans[key]
    except KeyError:
        pass
    except TypeError:                   # an unhashable argument: build() names it
        return Plan(c, build())
    args = build()
    algorithm = _resolved(c, args)
    return _keep(c, key, algorithm, lambda: Plan(c, args, algorithm))


# Note [One plan per algorithm]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# A call with algorithm="auto" and one that names the algorithm "auto"
# picks run the same Plan and the same lane: the signature's first call
# stores what it makes under both keys (the one with "auto", the one with
# the name), and a later call under either finds it. The Plan and the lane
# are a function of the signature and the algorithm alone, so nothing
# changes but this: a lane times its ways of sending (Note [Choosing the
# way] in _resources.pyx) over every call that runs it. With a Plan each,
# "auto" and its pick settled on their ways apart, and a program that
# used both paid twice for the settling and the memory. (It did not bring
# the benchmark's "auto" closer to its pick timed under its own name: that
# gap, up to 1.3x in one launch, is the noise between turns;
# bench/PERFORMANCE.md, "auto within 10%".) Scatter's root and header
# lanes, which answer to the header the root sends, keep one per name.

def _named_key(key: tuple, algorithm):
    """*key* with its "auto" replaced by *algorithm*; None when *key* names
    an algorithm already or *algorithm* is empty or None."""
    if not algorithm or not any(type(k) is str and k == "auto" for k in key):
        return None
    return tuple(algorithm if type(k) is str and k == "auto" else k for k in key)


def _keep(c, key: tuple, algorithm, make):
    """What the cache keeps for *key*, which runs *algorithm*: the Plan or
    lane already kept under the key naming it (Note [One plan per
    algorithm]), else ``make()``; kept under both keys. At the limit the
    cache forgets everything first. A freed or broken communicator keeps
    nothing: its error (_live), before any message."""
    c._live()
    named = _named_key(key, algorithm)
    made = c._plans.get(named) if named is not None else None
    if made is None:
        made = make()
    if len(c._plans) >= PLAN_CACHE - 1:
        c._plans.clear()
    c._plans[key] = made
    if named is not None:
        c._plans[named] = made
    return made


def _check_sizes(sizes, size: int):
    """sizes= as a plan is keyed by it: None, or a tuple of ints (a numpy
    integer becomes one), read once (an iterator too). Python's dicts
    match keys by equality, so a float or bool count would otherwise find
    an int's plan and skip its check (Note [Equal keys] in api.py)."""
    if sizes is None or type(sizes) is tuple and all(type(s) is int for s in sizes):
        return sizes
    try:
        if isinstance(sizes, (str, bytes)):
            raise TypeError
        given = tuple(sizes)
        if any(isinstance(s, (bool, np.bool_)) for s in given):
            raise TypeError
        return tuple(operator.index(s) for s in given)
    except TypeError:
        raise ValueError(f"sizes must be a sequence of {size} ints, got {sizes!r}") from None


def _check_counts(sizes, size: int):
    """sizes= as one count of rows per rank: None, or a tuple of *size*
    non-negative ints."""
    sizes = _check_sizes(sizes, size)
    if sizes is not None and (len(sizes) != size or min(sizes, default=0) < 0):
        raise ValueError(f"sizes must hold {size} non-negative ints, got {sizes}")
    return sizes


def _check_matrix(sizes, size: int):
    """alltoall's sizes= as its plan is keyed by it: None, or a tuple of
    *size* tuples of *size* non-negative ints (sizes[i][j]: the rows rank
    i sends to rank j); a nested sequence or a 2-d integer array."""
    if sizes is None:
        return None
    try:
        if isinstance(sizes, (str, bytes)):
            raise TypeError
        matrix = tuple(_check_sizes(line, size) for line in sizes)
    except (TypeError, ValueError):
        matrix = None
    if matrix is None or len(matrix) != size or any(
            len(line) != size or min(line, default=0) < 0 for line in matrix):
        raise ValueError(f"sizes must be a {size} x {size} matrix of non-negative ints "
                         f"(sizes[i][j]: the rows rank i sends to rank j), got {sizes!r}")
    return matrix


def _check_exclusive(exclusive) -> bool:
    """scan's exclusive= as its plan is keyed by it: a bool (numpy's
    included); 0 and 1 equal False and True as keys, so they are refused
    here, before a plan is looked up (Note [Equal keys] in api.py)."""
    if not isinstance(exclusive, (bool, np.bool_)):
        raise TypeError(f"exclusive must be a bool, got {type(exclusive).__name__}")
    return bool(exclusive)


def _array(x, name="x") -> np.ndarray:
    return x if type(x) is np.ndarray else _message.as_array(x, name)


def _bytes(a: np.ndarray) -> np.ndarray:
    """A flat uint8 view of a C-contiguous array (any dtype, 0-d included)."""
    return a.view(np.uint8) if a.ndim == 1 else a.reshape(-1).view(np.uint8)


def _result(out, shape: tuple, dtype: DType) -> tuple:
    """(array, its byte view, write-back target or None) for a result:
    a new array, or the caller's out (checked; a copy if it is not
    C-contiguous, written back by _done)."""
    if out is None:
        array = np.empty(shape, dtype.numpy)
        return array, _bytes(array), None
    if type(out) is np.ndarray and out.dtype == dtype.numpy and out.shape == shape:
        flags = out.flags                   # a new object on every access: read it once
        if flags.writeable and flags.c_contiguous and flags.aligned:
            return out, _bytes(out), None
    msg = _message.output(out, shape, dtype)
    return msg.array, msg.data, msg.writeback


def _done(result, data, writeback, out):
    """The call's return value, its result written back first where out
    was not C-contiguous: out itself for a numpy out (a subclass too);
    for an array-like out (a torch tensor), the numpy view of its memory
    that holds the result (DESIGN.md: results are numpy arrays)."""
    if writeback is not None:
        unpack(data, [writeback])
    if isinstance(out, np.ndarray):
        return out
    return result if writeback is None else writeback


def _check_algorithm(collective: str, algorithm) -> str:
    if not isinstance(algorithm, str):
        raise TypeError(f"algorithm must be a string, got {type(algorithm).__name__}")
    if algorithm != "auto" and algorithm not in ALGORITHMS[collective]:
        raise ValueError(f"unknown {collective} algorithm {algorithm!r}; expected "
                         f"'auto' or one of {', '.join(ALGORITHMS[collective])}")
    return algorithm


def _check_root(root, size: int) -> int:
    """root as an int in [0, size): an int or numpy integer; a bool, an
    integral float or anything else is a ValueError."""
    try:
        if isinstance(root, bool):
            raise TypeError
        root = operator.index(root)
    except TypeError:
        raise ValueError(f"root must be an int in [0, {size}), got {root!r}") from None
    if not 0 <= root < size:
        raise ValueError(f"root {root} is out of range for {size} ranks")
    return root


def accumulate_of(accumulate) -> str | None:
    """None or "float32", also spelt numpy's way (np.float32, "f4",
    np.dtype("float32")); anything else a ValueError."""
    if accumulate is None:
        return None
    try:
        if accumulate == "float32" or np.dtype(accumulate) == np.float32:
            return "float32"
    except TypeError:
        pass
    raise ValueError(f"accumulate must be None or 'float32', got {accumulate!r}")


def _work_dtype(dtype: DType, accumulate) -> DType:
    """The dtype a reduction runs in: float32 under accumulate="float32"."""
    if accumulate is None:
        return dtype
    accumulate_of(accumulate)
    if dtype.name not in ("float16", "bfloat16", "float32"):
        raise TypeError(f"accumulate='float32' applies to float16, bfloat16 and float32, "
                        f"not {dtype.name}")
    return FLOAT32


def _reduction_args(collective: str, c, x: np.ndarray, op, algorithm, accumulate, **more):
    """Check a reduction's arguments; its CollArgs (n: the whole vector)."""
    op = op_of(op)
    dtype = dtype_of(x.dtype, "x")
    check_op(op, dtype)
    work = _work_dtype(dtype, accumulate)
    algorithm = _check_algorithm(collective, algorithm)
    return CollArgs(collective, algorithm, x.size * work.itemsize, work, dtype, op,
                    shape=x.shape, **more)


def _send_bytes(c, a: CollArgs, x: np.ndarray):
    """This rank's input as bytes of the wire dtype: x's own memory when it
    is C-contiguous and aligned, else a packed copy; under accumulate, x
    widened to float32 in scratch."""
    flags = x.flags
    if not (flags.c_contiguous and flags.aligned):
        x = _message.packed_copy(x)
    send = x.view(np.uint8) if x.ndim == 1 else x.reshape(-1).view(np.uint8)
    if a.dtype is a.result:
        return send
    wide = c.scratch("input", x.size * a.dtype.itemsize)
    convert(a.result.code, a.dtype.code, wide, send)
    return wide


def _in_place(send, data, result, x) -> tuple:
    """(send, data) for a result that may be x itself (out=x) or share its
    memory: then the algorithm works in place."""
    if result is x:
        return data, data
    if np.may_share_memory(send, data):
        data[:] = send
        return data, data
    return send, data


def _finish(a: CollArgs, data, result_data, contributions: int) -> None:
    """AVG's division by the number of contributions, then rounding back
    from the float32 accumulator into the result."""
    if a.op is Op.AVG:
        scale(a.dtype.code, data, data, contributions)
    if a.dtype is not a.result:
        convert(a.dtype.code, a.result.code, result_data, data)


def _rows(shape: tuple, what: str) -> tuple:
    """(rows, row elements) of an array split or gathered along axis 0."""
    if not shape:
        raise ValueError(f"{what} needs an array with at least one dimension, got a 0-d array")
    return shape[0], math.prod(shape[1:])


LANE_MAX_BYTES = (1 << 31) - 1          # one C call's count is an int


def _cached_lane(c, key: tuple, make):
    """The lane of call signature *key*, made by ``make()`` on first use
    and kept beside the plans; None (the general path takes the call) when
    make() says so or an argument is unhashable."""
    try:
        return c._plans[key]
    except KeyError:
        pass
    except TypeError:
        return None
    lane = make()
    # Scatter's root and header lanes name no algorithm: kept under key alone.
    return _keep(c, key, getattr(lane, "algorithm", None), lambda: lane)


def _gather_args(collective: str, c, x: np.ndarray, algorithm, sizes, **more) -> CollArgs:
    """Check a gather's arguments: counts in bytes and the result shape
    (a 0-d x counts as one row)."""
    dtype = dtype_of(x.dtype, "x")
    algorithm = _check_algorithm(collective, algorithm)
    shape = x.shape or (1,)
    rows, row = shape[0], math.prod(shape[1:])
    row_bytes = row * dtype.itemsize
    sizes = _check_counts(sizes, c.size)
    if sizes is None:
        counts, total = (rows * row_bytes,) * c.size, rows * c.size
    else:
        if sizes[c.rank] != rows:
            raise ValueError(f"x has {rows} rows on rank {c.rank}, sizes[{c.rank}] is "
                             f"{sizes[c.rank]}")
        counts, total = tuple(s * row_bytes for s in sizes), sum(sizes)
    return CollArgs(collective, algorithm, max(counts), dtype, dtype, counts=counts,
                    shape=(total, *shape[1:]), **more)


def _split_counts(shape: tuple, itemsize: int, parts: int, sizes=None) -> tuple:
    """Bytes of each block of np.array_split(·, parts, axis=0), or, given
    *sizes* (checked here: *parts* non-negative ints that sum to the rows),
    of blocks of sizes[i] rows."""
    rows, row = _rows(shape, "splitting along axis 0")
    if sizes is None:
        return tuple(block(rows, parts, i)[1] * row * itemsize for i in range(parts))
    sizes = _check_counts(sizes, parts)
    if sum(sizes) != rows:
        raise ValueError(f"sizes must sum to the {rows} rows of x, got {list(sizes)} "
                         f"(sum {sum(sizes)})")
    return tuple(s * row * itemsize for s in sizes)


def _block_shape(shape: tuple, parts: int, index: int, sizes=None) -> tuple:
    rows = block(shape[0], parts, index)[1] if sizes is None else sizes[index]
    return (rows, *shape[1:])


def _scatter_args(c, dtype: DType, shape: tuple, root: int, algorithm: str,
                  sizes=None) -> CollArgs:
    counts = _split_counts(shape, dtype.itemsize, c.size, sizes)
    return CollArgs("scatter", algorithm, max(counts), dtype, dtype, root=root, counts=counts,
                    shape=_block_shape(shape, c.size, c.rank, sizes))


def _scatter_plan(c, dtype: DType, shape: tuple, root: int, algorithm: str, sizes=None) -> Plan:
    """The plan of a scatter of the root's (dtype, shape); *sizes* (None,
    or a tuple of ints) keys a plan of its own."""
    key = ("scatter", dtype.name, shape, root, algorithm)
    return _plan(c, key if sizes is None else key + (sizes,),
                 lambda: _scatter_args(c, dtype, shape, root, algorithm, sizes))


def _broadcast_plan(c, dtype: DType, shape: tuple, root: int, algorithm: str) -> Plan:
    nbytes = math.prod(shape) * dtype.itemsize
    return _plan(c, ("broadcast", dtype.name, shape, root, algorithm),
                 lambda: CollArgs("broadcast", algorithm, nbytes, dtype, dtype, root=root,
                                  shape=shape))


def _reduce_scatter_args(c, x, op, algorithm, accumulate, sizes=None) -> CollArgs:
    a = _reduction_args("reduce_scatter", c, x, op, algorithm, accumulate)
    counts = _split_counts(x.shape, a.dtype.itemsize, c.size, sizes)
    return dataclasses.replace(a, n=max(counts), counts=counts,
                               shape=_block_shape(x.shape, c.size, c.rank, sizes))


def _alltoall_args(c, x, algorithm, sizes=None) -> CollArgs:
    """An alltoall's blocks: np.array_split's, or, given *sizes* (a
    matrix from _check_matrix), sizes[r][j] rows from rank r to rank j."""
    dtype = dtype_of(x.dtype, "x")
    algorithm = _check_algorithm("alltoall", algorithm)
    if sizes is None:
        counts = _split_counts(x.shape, dtype.itemsize, c.size)
        own = _block_shape(x.shape, c.size, c.rank)
        return CollArgs("alltoall", algorithm, max(counts), dtype, dtype, counts=counts,
                        shape=(own[0] * c.size, *own[1:]))
    rows, row = _rows(x.shape, "alltoall")
    mine = sizes[c.rank]
    if sum(mine) != rows:
        raise ValueError(f"sizes[{c.rank}] must sum to the {rows} rows of x on rank {c.rank}, "
                         f"got {list(mine)} (sum {sum(mine)})")
    received = [sizes[i][c.rank] for i in range(c.size)]
    row_bytes = row * dtype.itemsize
    counts = tuple(k * row_bytes for k in mine)
    return CollArgs("alltoall", algorithm, max(counts), dtype, dtype, counts=counts,
                    recv_counts=tuple(k * row_bytes for k in received),
                    shape=(sum(received), *x.shape[1:]))


def _scan_args(c, x, op, exclusive, algorithm, accumulate) -> CollArgs:
    return _reduction_args("scan", c, x, op, algorithm, accumulate,
                           exclusive=_check_exclusive(exclusive))
