"""Soak: many random collectives against an oracle, and the memory they leave.

    mpiexec -n 4 python -m mpi4py bench/soak.py --calls 10000 [--seed 1] [--json FILE]

(``-m mpi4py``: an error on one rank ends the job instead of leaving the
others waiting.)

Every rank draws the same sequence of calls (collective, algorithm, op,
dtype, count, rows of one or of three, root, sometimes accumulate,
sometimes async, sometimes a timeout on every other rank) from one seed,
builds every rank's input itself, so it knows the expected result without
communication, and checks its own result element by element. Each rank
also draws its own layout of x (as it is, strided, Fortran order) and its
own ``out=`` (none, a new array, every other row of a larger one, or in
place), so ranks on the C lanes and on the general path meet in one call.
Inputs are exact (small integers, powers of two for PROD), so any order of
combination gives the same bits. A third of the counts come from a few
repeated ones, so that calls of one signature repeat and take their C lanes
(timed calls too, with their deadlines, beside untimed ones on the other
ranks).

The report counts wrong results (over all ranks and passes) and the
growth of the resident set over a replay, the largest over ranks.
A warm-up first runs every (collective, algorithm) once at the largest
count and widest dtype the soak can draw, so the scratch buffers reach
their final sizes; then the calls run three times from the same seed
(Note [Growth over a replay] in main): the first pass fills the plan
cache, and what each later one adds is what calls leave behind.
"""
import argparse
import ctypes
import gc
import json
import sys
import time
from dataclasses import dataclass

import ml_dtypes
import numpy as np
from mpi4py import MPI

import pycoll
from pycoll.algorithms import ALGORITHMS

DTYPES = ["int8", "int32", "uint16", "int64", "float16", "float32", "float64", "complex64",
          "bool", ml_dtypes.bfloat16]
OPS = ["sum", "prod", "max", "min", "avg", "band", "bor", "bxor"]
MAX_COUNT = 300_000
REPEATED_COUNTS = (1, 7, 64, 1000, 3000)


def rss_bytes() -> int:
    """Resident bytes of live memory: first collect garbage and hand freed
    heap back to the system (glibc keeps freed chunks of large temporaries,
    which would read as growth without being a leak)."""
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def data(dtype, n, rank, seed, op):
    rng = np.random.default_rng([seed, rank])
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return rng.integers(0, 2, n).astype(bool)
    if op == "prod" and dt.kind == "c":
        # no product of these lies on an axis: no zero part whose sign hangs on the order
        return rng.choice([2 + 1j, -2 - 1j, -1 + 2j, 1 - 2j], n).astype(dt)
    if op == "prod":
        values = rng.choice([-1, 1, 2] if dt.kind == "u" else [-2, -1, 1, 2], n)
        return np.abs(values).astype(dt) if dt.kind == "u" else values.astype(dt)
    if dt.kind in "iu" and op in ("band", "bor", "bxor", "max", "min"):
        info = np.iinfo(dt)
        return rng.integers(info.min, info.max, n, endpoint=True).astype(dt)
    return rng.integers(0 if dt.kind == "u" else -8, 9, n).astype(dt)


def reduce_all(op, xs):
    f = {"sum": np.add, "avg": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum,
         "band": np.bitwise_and, "bor": np.bitwise_or, "bxor": np.bitwise_xor}[op]
    dt = xs[0].dtype
    wide = [x.astype(np.float64) for x in xs] if dt in (np.float16, ml_dtypes.bfloat16) else xs
    acc = wide[0].copy()
    for x in wide[1:]:
        acc = f(acc, x)
    if op == "avg":
        work = np.float32 if dt in (np.float16, ml_dtypes.bfloat16) else dt
        if np.dtype(dt).kind == "c":
            out = np.empty_like(acc)
            out.real, out.imag = acc.real / acc.real.dtype.type(len(xs)), acc.imag / acc.imag.dtype.type(len(xs))
            return out
        return (acc.astype(work) / np.dtype(work).type(len(xs))).astype(dt)
    return acc.astype(dt)


def valid(op, dt) -> bool:
    kind = np.dtype(dt).kind if dt is not ml_dtypes.bfloat16 else "f"
    if op == "avg":
        return kind in "fc"
    if op in ("band", "bor", "bxor"):
        return kind in "biu"
    if op in ("max", "min"):
        return kind != "c"
    return True


HALF = (np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16))
REDUCTIONS = ("allreduce", "reduce", "reduce_scatter", "scan")
FILL = 0xA5                 # the bytes of an out= buffer no result may touch


def rows_of(dtype, rows, cols, rank, seed, op):
    """One rank's input: *rows* values, or rows of *cols* (axis 0 is what
    the collectives split and join)."""
    x = data(dtype, rows * max(cols, 1), rank, seed, op)
    return x.reshape(rows, cols) if cols else x


def laid_out(x, how):
    """x as a caller may hand it, the same values: as it is, every other row
    of a larger buffer, or (rows of several) in Fortran order."""
    if how == "strided":
        buf = np.zeros((2 * len(x),) + x.shape[1:], x.dtype)
        buf[::2] = x
        return buf[::2]
    if how == "fortran" and x.ndim == 2:
        return np.asfortranarray(x)
    return x.copy()


def out_for(shape, dtype, how):
    """(out, the buffer it lies in): a new array, or every other row of one
    twice as long, filled with FILL bytes that only out's rows may lose."""
    rows = shape[0] * (2 if how == "strided" else 1)
    buf = np.empty((rows,) + tuple(shape[1:]), dtype)
    buf.view(np.uint8)[...] = FILL
    return (buf[::2] if how == "strided" else buf), buf


@dataclass(frozen=True)
class Draw:
    """One call's arguments that every rank draws alike."""
    collective: str
    algorithm: str
    dtype: object
    op: str
    rows: int
    cols: int                   # 0: a vector; else rows of cols
    root: int
    accumulate: str | None
    async_op: bool
    timed: bool                 # a timeout on every other rank
    exclusive: bool             # scan
    sizes: list | None          # gather, allgather

    def __str__(self) -> str:
        flags = [f for f, on in (("sizes", self.sizes), ("accumulate", self.accumulate),
                                 ("timed", self.timed), ("async", self.async_op)) if on]
        return (f"{self.collective}({self.algorithm}) {self.op} {np.dtype(self.dtype).name} "
                f"rows={self.rows}x{self.cols or 1} root={self.root} {' '.join(flags)}")


def draw(rng, p: int) -> Draw:
    collective = str(rng.choice(["allreduce", "reduce", "broadcast", "gather", "scatter", "allgather",
                                 "reduce_scatter", "alltoall", "scan", "barrier"]))
    algorithm = str(rng.choice(["auto", *ALGORITHMS[collective]]))
    dtype = DTYPES[rng.integers(len(DTYPES))]
    op = str(rng.choice(OPS))
    while not valid(op, dtype):
        op = str(rng.choice(OPS))
    if rng.random() < 1 / 3:
        n = int(rng.choice(REPEATED_COUNTS))
    elif rng.random() < 0.95:
        n = int(rng.integers(0, 5000))
    else:
        n = int(rng.integers(100_000, MAX_COUNT))
    cols = 3 if rng.random() < 0.25 else 0
    root = int(rng.integers(p))
    accumulate = "float32" if (collective in REDUCTIONS and np.dtype(dtype) in HALF
                               and rng.random() < 0.3) else None
    async_op = bool(rng.random() < 0.1)
    timed = bool(rng.random() < 0.3)
    exclusive = collective == "scan" and bool(rng.random() < 0.3)
    sizes = None
    if collective == "gather" or (collective == "allgather" and rng.random() < 0.3):
        sizes = [int(rng.integers(0, 50)) for _ in range(p)]
    return Draw(collective, algorithm, dtype, op, n // 3 if cols else n, cols, root,
                accumulate, async_op, timed, exclusive, sizes)


def expectation(d: Draw, xs: list, r: int):
    """(whether rank r gets a result, the result) from every rank's input."""
    p = len(xs)
    if d.collective == "reduce":
        return r == d.root, reduce_all(d.op, xs) if r == d.root else None
    if d.collective == "scan":
        upto = r + 1 - d.exclusive
        return upto > 0, reduce_all(d.op, xs[:upto]) if upto else None
    expected = {
        "allreduce": lambda: reduce_all(d.op, xs),
        "broadcast": lambda: xs[d.root],
        "gather": lambda: np.concatenate(xs),
        "scatter": lambda: np.array_split(xs[d.root], p)[r],
        "allgather": lambda: np.concatenate(xs),
        "reduce_scatter": lambda: np.array_split(reduce_all(d.op, xs), p)[r],
        "alltoall": lambda: np.concatenate([np.array_split(xi, p)[r] for xi in xs]),
        "barrier": lambda: None,
    }[d.collective]()
    return (d.collective != "gather" or r == d.root), expected


def place(d: Draw, how, layout: str, x, xs: list, expected, gets: bool, r: int):
    """This rank's x and out= for *how*: (x, out, the buffer out lies in
    or None). None: no out. "fresh" / "strided": a new array, every other
    row of one. "in place": out is x (allreduce, reduce, scan, alltoall of
    even blocks), x in its own block of out (gather's root, allgather), out
    x's own block (reduce_scatter, scatter's root); a new out where the
    call has no such form here."""
    if how is None or d.collective in ("broadcast", "barrier") or not gets and how == "in place":
        return x, None, None
    if how == "in place" and d.collective in ("gather", "allgather"):
        out, buf = out_for(expected.shape, expected.dtype, "strided" if layout == "strided" else "fresh")
        at = sum(len(xi) for xi in xs[:r])
        out[at:at + len(xs[r])] = xs[r]
        return out[at:at + len(xs[r])], out, buf
    if how == "in place" and d.collective in ("reduce_scatter", "scatter") and x is not None:
        lengths = [len(b) for b in np.array_split(np.empty(len(x)), len(xs))]
        at = sum(lengths[:r])
        return x, x[at:at + lengths[r]], None
    if how == "in place" and (d.collective in ("allreduce", "reduce", "scan")
                              or d.collective == "alltoall" and expected.shape == x.shape):
        return x, x, None
    how = "fresh" if how == "in place" else how
    out, buf = out_for(expected.shape if expected is not None else xs[r].shape, xs[r].dtype, how)
    return x, out, buf


def call(comm, d: Draw, x, kw):
    c = d.collective
    if c == "allreduce":
        return comm.allreduce(x, d.op, d.algorithm, **kw)
    if c == "reduce":
        return comm.reduce(x, d.op, d.root, d.algorithm, **kw)
    if c == "broadcast":
        return comm.broadcast(x, d.root, d.algorithm, **kw)
    if c == "gather":
        return comm.gather(x, d.root, d.algorithm, sizes=d.sizes, **kw)
    if c == "scatter":
        return comm.scatter(x, d.root, d.algorithm, **kw)
    if c == "allgather":
        return comm.allgather(x, d.algorithm, sizes=d.sizes, **kw)
    if c == "reduce_scatter":
        return comm.reduce_scatter(x, d.op, d.algorithm, **kw)
    if c == "alltoall":
        return comm.alltoall(x, d.algorithm, **kw)
    if c == "scan":
        return comm.scan(x, d.op, exclusive=d.exclusive, algorithm=d.algorithm, **kw)
    return comm.barrier(**kw)


def one_call(comm, rng, k, p, r):
    """Draw and run call k; returns (description, number of wrong elements).

    The call's arguments come from *rng*, the same on every rank (Draw);
    how this rank lays out its input and where it asks for the result
    (place) are its own draws, so ranks on the C lanes and on the general
    path meet in the same call. A result that is not out (when out= was
    given), an out= buffer written outside out, or an input changed when
    it was not out count as wrong too."""
    d = draw(rng, p)
    mine = np.random.default_rng([k, r, 1])         # this rank's own choices
    layout = str(mine.choice(["as is", "as is", "strided", "fortran"]))
    how = mine.choice([None, None, "fresh", "strided", "in place"])
    xs = [rows_of(d.dtype, d.sizes[i] if d.sizes else d.rows, d.cols, i, k, d.op) for i in range(p)]
    gets, expected = expectation(d, xs, r)
    x = laid_out(xs[r], layout)
    if d.collective == "broadcast" and r != d.root:
        x = None if how is None else laid_out(np.zeros_like(xs[d.root]), layout)
    elif d.collective == "scatter" and r != d.root:
        x = None
    x, out, buf = place(d, how, layout, x, xs, expected, gets, r)
    kw = {"async_op": d.async_op, **({"timeout": 600.0} if d.timed and (r + k) % 2 else {})}
    if d.accumulate:
        kw["accumulate"] = d.accumulate
    if out is not None:
        kw["out"] = out
    before = None if x is None or out is not None and np.shares_memory(x, out) else x.copy()
    what = f"{d} x {layout} out {how}"
    try:
        got = call(comm, d, x, kw)
        if d.async_op:
            got = got.wait()
    except Exception as exc:
        raise RuntimeError(f"call {k}: {what}") from exc
    bad = 0
    if before is not None and d.collective != "broadcast" and not same_bits(x, before):
        bad += 1                                    # an input that is not out was changed
    if not gets or expected is None:
        return what, bad + int(got is not None)
    caller_out = out if out is not None else x if d.collective == "broadcast" else None
    if caller_out is not None and got is not caller_out:
        return what, bad + max(expected.size, 1)    # not the caller's out (broadcast: x)
    if buf is not None and out is not buf:          # a strided out: the rows between
        bad += int(np.count_nonzero(np.ascontiguousarray(buf[1::2]).view(np.uint8) != FILL))
    got = np.asarray(got)
    if got.shape != expected.shape or got.dtype != expected.dtype:
        return what, bad + max(expected.size, 1)
    return what, bad + wrong_elements(got, expected)


def same_bits(a, b) -> bool:
    return a.shape == b.shape and wrong_elements(a, b) == 0


def wrong_elements(got, expected) -> int:
    """How many elements differ in their bits (NaN payloads and -0 too)."""
    def bits(a):
        a = np.ascontiguousarray(a).reshape(-1)
        return a.view(np.uint8).reshape(a.size, -1) if a.size else a.view(np.uint8)
    return int(np.count_nonzero(np.any(bits(got) != bits(expected), axis=-1)))


def warm_up(comm) -> None:
    """Every (collective, algorithm, dtype, op kind) once at the largest
    count the soak can draw, so every scratch slot reaches its final size
    (the slots a call needs depend on its dtype and op: AVG and the half
    types widen)."""
    sizes = [MAX_COUNT] * comm.size
    for dtype in DTYPES:
        big = np.ones(MAX_COUNT, dtype)
        for op in [op for op in ("sum", "avg") if valid(op, dtype)]:
            for name, algorithms in ALGORITHMS.items():
                for algorithm in ["auto", *algorithms]:
                    call = {
                        "allreduce": lambda: comm.allreduce(big, op, algorithm),
                        "reduce": lambda: comm.reduce(big, op, 0, algorithm),
                        "broadcast": lambda: comm.broadcast(big.copy(), 0, algorithm),
                        "gather": lambda: comm.gather(big, 0, algorithm, sizes=sizes),
                        "scatter": lambda: comm.scatter(big, 0, algorithm),
                        "allgather": lambda: comm.allgather(big, algorithm),
                        "reduce_scatter": lambda: comm.reduce_scatter(big, op, algorithm),
                        "alltoall": lambda: comm.alltoall(big, algorithm),
                        "scan": lambda: [comm.scan(big, op, exclusive=e, algorithm=algorithm)
                                         for e in (False, True)],
                    }.get(name)
                    if call is not None:
                        call()
    comm.allreduce(np.ones(MAX_COUNT), async_op=True).wait()


def one_pass(args, world, trace, index) -> tuple[int, list, int]:
    """The calls drawn from args.seed on a new Communicator, warmed up
    first and freed after: (wrong, failures, resident bytes after)."""
    comm = pycoll.Communicator()
    p, r = comm.size, comm.rank
    warm_up(comm)
    rng = np.random.default_rng(args.seed)
    wrong, failures = 0, []
    for k in range(args.calls):
        if args.trace and k % args.trace == 0:
            trace.append((index * args.calls + k, world.allreduce(rss_bytes(), op=MPI.MAX) >> 20))
        what, bad = one_call(comm, rng, k, p, r)
        if bad:
            wrong += bad
            failures.append(f"pass {index + 1} call {k}: {what}: {bad} wrong")
    comm.free()
    return wrong, failures, rss_bytes()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=10000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", default=None)
    parser.add_argument("--trace", type=int, default=0,
                        help="record resident memory every this many calls")
    args = parser.parse_args()
    world = MPI.COMM_WORLD.Dup()
    trace = []
    start = time.perf_counter()
    # Note [Growth over a replay]: a Communicator keeps a plan per call
    # signature (a few KiB each, up to _plan.PLAN_CACHE of them, then
    # cleared) and scratch as large as its largest message, all freed with
    # it. So the same calls run twice, each time on a new Communicator
    # freed at the end; what the second pass leaves beyond the first is
    # what calls (or a Communicator) leave behind. A third pass tells that
    # from a one-off: a leak grows the resident set over both replays, while
    # memory the MPI library takes once (its queues of unexpected messages,
    # on a loaded host) grows it over one. In one clean-clone CI run beside
    # another full test run, Open MPI's second pass grew by 2.15 MB, against
    # 0.15 MB alone; so the growth reported is the smaller of the two.
    passes = [one_pass(args, world, trace, index) for index in range(3)]
    elapsed = time.perf_counter() - start
    growth = min(world.allreduce(later[2] - earlier[2], op=MPI.MAX)
                 for earlier, later in zip(passes, passes[1:]))
    wrong = world.allreduce(sum(w for w, _, _ in passes), op=MPI.SUM)
    failures = [f for fs in world.allgather([f for _, fs, _ in passes for f in fs]) for f in fs]
    result = {"mpi": " ".join(MPI.Get_library_version().split()[:3]), "p": world.size,
              "calls": args.calls, "passes": 3, "seed": args.seed, "wrong": wrong,
              "failures": failures[:20], "rss_growth_bytes": growth, "seconds": elapsed,
              "rss_mib_trace": trace}
    if world.rank == 0:
        print(json.dumps(result), flush=True)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(result, f, indent=1)
    world.Free()
    return 0 if wrong == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
