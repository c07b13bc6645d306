"""pycoll's public collectives: one entry path for all of them.

Every call runs the same path (``_execute``): normalise the arguments at the
edge (``_message``), check them before any message is sent, describe the
call in a frozen ``CollArgs``, select the algorithm (``tuning``), run it on
a ``Channel`` with a fresh tag, and finish (AVG's division, the float32
accumulator's rounding, the write-back into a non-contiguous ``out``).

Conventions shared by every collective (DESIGN.md, "Public API"):

- ``comm`` is a Communicator, an mpi4py intracommunicator (wrapped once and
  cached) or None (a Communicator over COMM_WORLD, made on first use).
- Blocks are ``np.array_split`` along axis 0; gathers concatenate along
  axis 0 (``sizes=`` gives each rank's length when they differ).
- Results are new numpy arrays unless ``out=`` names the caller's memory;
  rooted results are None off the root.
- Argument errors raise before any message is sent: TypeError for types,
  dtypes and (op, dtype) pairs, ValueError for values.
"""
from __future__ import annotations

import json
import math
import operator
import threading
from dataclasses import dataclass

import numpy as np

from pycoll import _message, tuning
from pycoll._comm import CommBase, Settings
from pycoll._dtypes import BY_NAME, FLOAT32, DType, Op, check_op, dtype_of, op_of
from pycoll._kernels.copy import block
from pycoll._kernels.reduce import convert, scale
from pycoll._p2p import Channel
from pycoll.algorithms import ALGORITHMS, REGISTRY, Task
from pycoll.algorithms.broadcast_binomial import binomial_broadcast

SUM, PROD, MAX, MIN, AVG = Op.SUM, Op.PROD, Op.MAX, Op.MIN, Op.AVG
BAND, BOR, BXOR = Op.BAND, Op.BOR, Op.BXOR

HEADER_BYTES = 2048       # the root's dtype and shape (or error) for x=None ranks


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

    Every collective of this module exists as a method with the same
    arguments, minus ``comm``.
    """

    def __init__(self, comm=None):
        super().__init__(comm)
        self.settings = _agree_settings(self)

    def allreduce(self, x, op=SUM, algorithm="auto", out=None, accumulate=None):
        return allreduce(x, op, self, algorithm, out, accumulate)

    def broadcast(self, x, root=0, algorithm="auto"):
        return broadcast(x, root, self, algorithm)

    def reduce(self, x, op=SUM, root=0, algorithm="auto", out=None, accumulate=None):
        return reduce(x, op, root, self, algorithm, out, accumulate)

    def gather(self, x, root=0, algorithm="auto", sizes=None, out=None):
        return gather(x, root, self, algorithm, sizes, out)

    def scatter(self, x, root=0, algorithm="auto", out=None):
        return scatter(x, root, self, algorithm, out)

    def allgather(self, x, algorithm="auto", sizes=None, out=None):
        return allgather(x, self, algorithm, sizes, out)

    def reduce_scatter(self, x, op=SUM, algorithm="auto", out=None, accumulate=None):
        return reduce_scatter(x, op, self, algorithm, out, accumulate)

    def alltoall(self, x, algorithm="auto", out=None):
        return alltoall(x, self, algorithm, out)

    def scan(self, x, op=SUM, exclusive=False, algorithm="auto", out=None, accumulate=None):
        return scan(x, op, self, exclusive, algorithm, out, accumulate)

    def barrier(self):
        return barrier(self)


def _agree_settings(comm: Communicator) -> Settings:
    """Rank 0's PYCOLL_* settings, broadcast once so that every rank selects
    the same algorithms (Note [Same choice everywhere] in tuning.py). A bad
    setting on rank 0 raises the same ValueError on every rank."""
    if comm.rank == 0:
        try:
            payload = {"settings": json.loads(Settings.from_env().to_bytes())}
        except ValueError as exc:
            payload = {"error": "ValueError", "message": str(exc)}
    else:
        payload = None
    agreed = _broadcast_json(comm, payload)
    _raise_carried(agreed)
    settings = Settings(**agreed["settings"])
    tuning.check_settings(settings)
    return settings


_default: Communicator | None = None
_wrapped: dict[int, tuple[object, Communicator]] = {}
_lock = threading.Lock()


def _comm_of(comm) -> Communicator:
    """The Communicator of a ``comm=`` argument (see the module docstring)."""
    global _default
    if isinstance(comm, Communicator):
        comm._live()
        return comm
    with _lock:
        if comm is None:
            if _default is None or _default.freed:
                _default = Communicator()
            return _default
        # Keyed by identity, holding the object so the id is not reused.
        hit = _wrapped.get(id(comm))
        if hit is None or hit[1].freed:
            hit = (comm, Communicator(comm))
            _wrapped[id(comm)] = hit
        return hit[1]


# ---------------------------------------------------------------------------
# The entry path


@dataclass(frozen=True, slots=True)
class CollArgs:
    """One collective call after normalisation: all that the run needs.

    n is the size the selection sees (as in the algorithms' cost terms: the
    vector for allreduce/broadcast/reduce/scan, one block for the others);
    dtype is the element type on the wire (float32 under accumulate).
    """

    collective: str
    comm: Communicator
    algorithm: str
    n: int
    dtype: DType
    op: Op | None = None
    root: int = 0
    data: object = None
    send: object = None
    out: object = None
    counts: tuple = ()
    exclusive: bool = False


def _execute(args: CollArgs) -> str:
    """Select and run the algorithm; returns its name."""
    comm = args.comm
    name = args.algorithm
    if name == "auto":
        name = tuning.select(args.collective, args.n, comm.size, comm.settings)
    op = args.op.kernel if args.op is not None else -1
    channel = Channel(comm, comm.next_tag(), op, args.dtype.code)
    task = Task(channel, comm.rank, comm.size, args.root, args.dtype.itemsize,
                args.data, args.send, args.out, args.counts, args.exclusive)
    REGISTRY[args.collective][name].run(task)
    return name


def _check_algorithm(collective: str, algorithm) -> str:
    if not isinstance(algorithm, str):
        raise TypeError(f"algorithm must be a string, got {type(algorithm).__name__}")
    if algorithm != "auto" and algorithm not in ALGORITHMS[collective]:
        raise ValueError(f"unknown {collective} algorithm {algorithm!r}; expected "
                         f"'auto' or one of {', '.join(ALGORITHMS[collective])}")
    return algorithm


def _check_root(root, size: int) -> int:
    try:
        root = operator.index(root)
    except TypeError:
        raise ValueError(f"root must be an int in [0, {size}), got {root!r}") from None
    if not 0 <= root < size:
        raise ValueError(f"root {root} is out of range for {size} ranks")
    return root


def _work_dtype(dtype: DType, accumulate) -> DType:
    """The dtype a reduction runs in: float32 under accumulate="float32"."""
    if accumulate is None:
        return dtype
    if accumulate != "float32":
        raise ValueError(f"accumulate must be None or 'float32', got {accumulate!r}")
    if dtype.name not in ("float16", "bfloat16", "float32"):
        raise TypeError(f"accumulate='float32' applies to float16, bfloat16 and float32, "
                        f"not {dtype.name}")
    return FLOAT32


def _reduction(x, op, accumulate):
    """Message, Op and work dtype of a reduction's input, checked."""
    op = op_of(op)
    msg = _message.message(x)
    check_op(op, msg.dtype)
    return msg, op, _work_dtype(msg.dtype, accumulate)


def _load(msg, work: DType, into, same: bool = False):
    """*into* (a byte view) = msg's data in the work dtype; *same* says
    *into* already is msg's memory (out=x: nothing to copy)."""
    if work is not msg.dtype:
        convert(msg.dtype.code, work.code, into, msg.data)
    elif not same:
        into[:] = msg.data
    return into


def _finish(op: Op, buf, work: DType, result, contributions: int) -> None:
    """AVG's division by the number of contributions, then rounding back
    from the float32 accumulator."""
    if op is Op.AVG:
        scale(work.code, buf, buf, contributions)
    if work is not result.dtype:
        convert(work.code, result.dtype.code, result.data, buf)


def _result(out, shape, dtype: DType, name="out"):
    return _message.new(shape, dtype) if out is None else _message.output(out, shape, dtype, name)


def _rows(shape: tuple, what: str) -> tuple:
    """(rows, row elements) of an array split or gathered along axis 0."""
    if not shape:
        raise ValueError(f"{what} needs an array with at least one dimension, got a 0-d array")
    return shape[0], math.prod(shape[1:])


# ---------------------------------------------------------------------------
# The header of broadcast and scatter: what a rank with x=None learns


def _broadcast_json(comm, payload, root: int = 0) -> dict:
    """The root's JSON-able *payload*, on every rank (one fixed-size message
    down a binomial tree, on its own tag)."""
    buf = np.zeros(HEADER_BYTES, np.uint8)
    if comm.rank == root:
        raw = json.dumps(payload).encode()
        if len(raw) > HEADER_BYTES:
            raw = json.dumps({"error": payload.get("error", "ValueError"),
                              "message": str(payload.get("message", ""))[:HEADER_BYTES // 2]
                              or "header too large: more than 64 dimensions?"}).encode()
        buf[:len(raw)] = np.frombuffer(raw, np.uint8)
    binomial_broadcast(Channel(comm, comm.next_tag()), buf, root, comm.rank, comm.size)
    return json.loads(bytes(buf).rstrip(b"\0").decode())


_CARRIED_ERRORS = {"TypeError": TypeError, "ValueError": ValueError}


def _raise_carried(header: dict) -> None:
    if "error" in header:
        raise _CARRIED_ERRORS.get(header["error"], ValueError)(header["message"])


def _root_header(x, check=None) -> tuple:
    """(header, message or None) for the root's input; a bad input becomes
    an error header that every rank raises."""
    try:
        msg = _message.message(x)
        if check is not None:
            check(msg)
    except (TypeError, ValueError) as exc:
        return {"error": type(exc).__name__, "message": f"root: {exc}"}, None
    return {"dtype": msg.dtype.name, "shape": list(msg.shape)}, msg


# ---------------------------------------------------------------------------
# The collectives


def allreduce(x, op=SUM, comm=None, algorithm="auto", out=None, accumulate=None):
    """Reduce x elementwise over all ranks; every rank gets the result.

    Args:
        x: this rank's array (same shape and dtype on every rank).
        op: SUM, PROD, MAX, MIN, AVG, BAND, BOR or BXOR (or its name).
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
    c = _comm_of(comm)
    msg, op, work = _reduction(x, op, accumulate)
    algorithm = _check_algorithm("allreduce", algorithm)
    result = _result(out, msg.shape, msg.dtype)
    if work is msg.dtype:
        data = _load(msg, work, result.data, same=result.array is msg.array)
    else:
        data = _load(msg, work, c.scratch("input", msg.count * work.itemsize))
    _execute(CollArgs("allreduce", c, algorithm, len(data), work, op, data=data))
    _finish(op, data, work, result, c.size)
    return result.finish()


def broadcast(x, root=0, comm=None, algorithm="auto"):
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
    x=None know what to allocate; a bad input on the root raises the same
    error on every rank. A rank whose own x does not match the root's (or is
    read-only) still takes part, then raises.
    """
    c = _comm_of(comm)
    root = _check_root(root, c.size)
    algorithm = _check_algorithm("broadcast", algorithm)
    if c.rank == root:
        header, msg = _root_header(x)
        _broadcast_json(c, header, root)
        _raise_carried(header)
        _execute(CollArgs("broadcast", c, algorithm, msg.nbytes, msg.dtype, root=root, data=msg.data))
        return x
    header = _broadcast_json(c, None, root)
    _raise_carried(header)
    dtype, shape = BY_NAME[header["dtype"]], tuple(header["shape"])
    problem, target = None, None
    if x is None:
        target = _message.new(shape, dtype)
    else:
        try:
            target = _message.output(x, shape, dtype, name="x")
        except (TypeError, ValueError) as exc:
            problem = exc
            target = _message.new(shape, dtype)
    _execute(CollArgs("broadcast", c, algorithm, target.nbytes, dtype, root=root, data=target.data))
    if problem is not None:
        raise problem
    result = target.finish()
    return result if x is None else x


def reduce(x, op=SUM, root=0, comm=None, algorithm="auto", out=None, accumulate=None):
    """Reduce x elementwise over all ranks onto the root.

    Args: as allreduce, plus ``root``; ``out`` is used on the root only.
    algorithm: "auto", "binomial", "rabenseifner".

    Returns:
        The reduced array on the root, None elsewhere.

    Example (2 ranks)::

        x = np.array([1, 2]) * (rank + 1)       # rank 0: [1, 2]   rank 1: [2, 4]
        pycoll.reduce(x, root=1)                # rank 0: None     rank 1: [3, 6]
    """
    c = _comm_of(comm)
    msg, op, work = _reduction(x, op, accumulate)
    root = _check_root(root, c.size)
    algorithm = _check_algorithm("reduce", algorithm)
    nbytes = msg.count * work.itemsize
    result = _result(out, msg.shape, msg.dtype) if c.rank == root else None
    if result is not None and work is msg.dtype:
        data = _load(msg, work, result.data, same=result.array is msg.array)
    else:
        data = _load(msg, work, c.scratch("input", nbytes))
    _execute(CollArgs("reduce", c, algorithm, nbytes, work, op, root, data=data))
    if result is None:
        return None
    _finish(op, data, work, result, c.size)
    return result.finish()


def _gather_layout(msg, sizes, c: Communicator, name="x") -> tuple:
    """(counts in bytes, result shape) of a gather along axis 0."""
    shape = msg.shape or (1,)           # scalars gather into a vector
    rows, row = shape[0], math.prod(shape[1:])
    row_bytes = row * msg.dtype.itemsize
    if sizes is None:
        return (rows * row_bytes,) * c.size, (rows * c.size, *shape[1:])
    try:
        sizes = [operator.index(s) for s in sizes]
    except TypeError:
        raise ValueError(f"sizes must be a sequence of {c.size} ints, got {sizes!r}") from None
    if len(sizes) != c.size or min(sizes) < 0:
        raise ValueError(f"sizes must hold {c.size} non-negative ints, got {sizes}")
    if sizes[c.rank] != rows:
        raise ValueError(f"{name} has {rows} rows on rank {c.rank}, sizes[{c.rank}] is "
                         f"{sizes[c.rank]}")
    return tuple(s * row_bytes for s in sizes), (sum(sizes), *shape[1:])


def gather(x, root=0, comm=None, algorithm="auto", sizes=None, out=None):
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
    c = _comm_of(comm)
    msg = _message.message(x)
    root = _check_root(root, c.size)
    algorithm = _check_algorithm("gather", algorithm)
    counts, shape = _gather_layout(msg, sizes, c)
    result = _result(out, shape, msg.dtype) if c.rank == root else None
    _execute(CollArgs("gather", c, algorithm, max(counts), msg.dtype, root=root, send=msg.data,
                      out=None if result is None else result.data, counts=counts))
    return None if result is None else result.finish()


def allgather(x, comm=None, algorithm="auto", sizes=None, out=None):
    """Concatenate every rank's x along axis 0, on every rank.

    Args: as gather, without root. algorithm: "auto", "ring",
    "recursive_doubling", "bruck".

    Example (2 ranks)::

        x = np.array([rank, rank])        # rank 0: [0, 0]    rank 1: [1, 1]
        pycoll.allgather(x)               # both:   [0, 0, 1, 1]
    """
    c = _comm_of(comm)
    msg = _message.message(x)
    algorithm = _check_algorithm("allgather", algorithm)
    counts, shape = _gather_layout(msg, sizes, c)
    result = _result(out, shape, msg.dtype)
    start = sum(counts[:c.rank])
    result.data[start:start + counts[c.rank]] = msg.data
    _execute(CollArgs("allgather", c, algorithm, max(counts), msg.dtype, send=msg.data,
                      out=result.data, counts=counts))
    return result.finish()


def _split_counts(shape: tuple, itemsize: int, parts: int) -> tuple:
    """Bytes of each block of np.array_split(·, parts, axis=0)."""
    rows, row = _rows(shape, "splitting along axis 0")
    return tuple(block(rows, parts, i)[1] * row * itemsize for i in range(parts))


def _block_shape(shape: tuple, parts: int, index: int) -> tuple:
    return (block(shape[0], parts, index)[1], *shape[1:])


def scatter(x, root=0, comm=None, algorithm="auto", out=None):
    """Give rank i block i of the root's x (``np.array_split`` along axis 0).

    Args:
        x: the root's array (at least 1-d); ignored elsewhere, may be None.
        out: this rank's block buffer.
        algorithm: "auto", "binomial", "linear".

    Example (2 ranks)::

        x = np.arange(5) if rank == 0 else None   # rank 0: [0, 1, 2, 3, 4]
        pycoll.scatter(x, root=0)                 # rank 0: [0, 1, 2]  rank 1: [3, 4]
    """
    c = _comm_of(comm)
    root = _check_root(root, c.size)
    algorithm = _check_algorithm("scatter", algorithm)
    header, msg = None, None
    if c.rank == root:
        header, msg = _root_header(x, lambda m: _rows(m.shape, "scatter"))
    header = _broadcast_json(c, header, root)
    _raise_carried(header)
    dtype, shape = BY_NAME[header["dtype"]], tuple(header["shape"])
    counts = _split_counts(shape, dtype.itemsize, c.size)
    # A bad out (known only now, from the header) is raised after taking
    # part, so that no other rank waits for this one forever.
    problem = None
    own_shape = _block_shape(shape, c.size, c.rank)
    try:
        result = _result(out, own_shape, dtype)
    except (TypeError, ValueError) as exc:
        problem, result = exc, _message.new(own_shape, dtype)
    _execute(CollArgs("scatter", c, algorithm, max(counts), dtype, root=root,
                      send=None if msg is None else msg.data, out=result.data, counts=counts))
    if problem is not None:
        raise problem
    return result.finish()


def reduce_scatter(x, op=SUM, comm=None, algorithm="auto", out=None, accumulate=None):
    """Reduce x elementwise over all ranks; rank i gets block i of the result
    (``np.array_split`` along axis 0).

    Args: as allreduce (x at least 1-d); ``out`` is this rank's block.
    algorithm: "auto", "ring", "recursive_halving".

    Example (2 ranks)::

        x = np.arange(4) * (rank + 1)     # rank 0: [0, 1, 2, 3]   rank 1: [0, 2, 4, 6]
        pycoll.reduce_scatter(x)          # rank 0: [0, 3]         rank 1: [6, 9]
    """
    c = _comm_of(comm)
    msg, op, work = _reduction(x, op, accumulate)
    algorithm = _check_algorithm("reduce_scatter", algorithm)
    counts = _split_counts(msg.shape, work.itemsize, c.size)
    own_shape = _block_shape(msg.shape, c.size, c.rank)
    result = _result(out, own_shape, msg.dtype)
    data = _load(msg, work, c.scratch("input", msg.count * work.itemsize))
    mine = result.data if work is msg.dtype else c.scratch("output", counts[c.rank])
    _execute(CollArgs("reduce_scatter", c, algorithm, max(counts), work, op, data=data,
                      out=mine, counts=counts))
    _finish(op, mine, work, result, c.size)
    return result.finish()


def alltoall(x, comm=None, algorithm="auto", out=None):
    """Send block j of x (``np.array_split`` along axis 0) to rank j; the
    blocks received are concatenated in rank order.

    Args:
        x: this rank's array, at least 1-d, the same shape and dtype on every
            rank.
        algorithm: "auto", "pairwise".

    Example (2 ranks)::

        x = np.array([10, 11]) + 10 * rank   # rank 0: [10, 11]   rank 1: [20, 21]
        pycoll.alltoall(x)                   # rank 0: [10, 20]   rank 1: [11, 21]
    """
    c = _comm_of(comm)
    msg = _message.message(x)
    algorithm = _check_algorithm("alltoall", algorithm)
    counts = _split_counts(msg.shape, msg.dtype.itemsize, c.size)
    own = _block_shape(msg.shape, c.size, c.rank)
    result = _result(out, (own[0] * c.size, *own[1:]), msg.dtype)
    _execute(CollArgs("alltoall", c, algorithm, max(counts), msg.dtype, send=msg.data,
                      out=result.data, counts=counts))
    return result.finish()


def scan(x, op=SUM, comm=None, exclusive=False, algorithm="auto", out=None, accumulate=None):
    """Prefix reduction over ranks: rank i gets x_0 op ... op x_i.

    Args: as allreduce, plus ``exclusive`` (rank i gets x_0 op ... op x_{i-1};
    rank 0 gets None). algorithm: "auto", "recursive_doubling", "linear".

    Example (3 ranks)::

        x = np.array([rank + 1])          # rank 0: [1]    rank 1: [2]   rank 2: [3]
        pycoll.scan(x)                    # rank 0: [1]    rank 1: [3]   rank 2: [6]
        pycoll.scan(x, exclusive=True)    # rank 0: None   rank 1: [1]   rank 2: [3]
    """
    c = _comm_of(comm)
    msg, op, work = _reduction(x, op, accumulate)
    algorithm = _check_algorithm("scan", algorithm)
    if not isinstance(exclusive, (bool, np.bool_)):
        raise TypeError(f"exclusive must be a bool, got {type(exclusive).__name__}")
    empty = exclusive and c.rank == 0
    result = None if empty else _result(out, msg.shape, msg.dtype)
    nbytes = msg.count * work.itemsize
    data = _load(msg, work, c.scratch("input", nbytes))
    if result is None:
        mine = c.scratch("output", nbytes)
    else:
        mine = result.data if work is msg.dtype else c.scratch("output", nbytes)
    _execute(CollArgs("scan", c, algorithm, nbytes, work, op, data=data, out=mine,
                      exclusive=bool(exclusive)))
    if result is None:
        return None
    _finish(op, mine, work, result, c.rank if exclusive else c.rank + 1)
    return result.finish()


def barrier(comm=None):
    """Return only when every rank of comm has entered the barrier."""
    c = _comm_of(comm)
    _execute(CollArgs("barrier", c, "auto", 0, BY_NAME["uint8"]))
