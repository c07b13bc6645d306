"""Soak: many random collectives against an oracle, and the memory they leave.

    mpiexec -n 4 python -m mpi4py bench/soak.py --calls 10000 [--seed 1] [--json FILE]

(``-m mpi4py``: an error on one rank ends the job instead of leaving the
others waiting.)

Every rank draws the same sequence of calls (collective, algorithm, op,
dtype, count, root, sometimes async, sometimes a timeout on every other
rank) from one seed, builds every rank's
input itself, so it knows the expected result without communication, and
checks its own result element by element. Inputs are exact (small integers,
powers of two for PROD), so any order of combination gives the same bits.
The report counts wrong results (over all ranks) and the growth of the
resident set from the end of a warm-up to the end, the largest over ranks.
A third of the counts come from a few repeated ones, so that calls of one
signature repeat and take their C lanes (timed calls too, with their
deadlines, beside untimed ones on the other ranks).
Scratch buffers grow to the largest message seen and then stay, so the
warm-up runs every (collective, algorithm) once at the largest count and
widest dtype the soak can draw, then the first ``--warmup`` fraction of
the random calls; growth after that is what leaks.
"""
import argparse
import ctypes
import gc
import json
import sys
import time

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


def one_call(comm, rng, k, p, r):
    """Draw and run call k; returns (description, number of wrong elements)."""
    collective = rng.choice(["allreduce", "reduce", "broadcast", "gather", "scatter", "allgather",
                             "reduce_scatter", "alltoall", "scan", "barrier"])
    algorithm = rng.choice(["auto", *ALGORITHMS[collective]])
    dtype = DTYPES[rng.integers(len(DTYPES))]
    op = rng.choice(OPS)
    while not valid(op, dtype):
        op = rng.choice(OPS)
    if rng.random() < 1 / 3:
        n = int(rng.choice(REPEATED_COUNTS))
    elif rng.random() < 0.95:
        n = int(rng.integers(0, 5000))
    else:
        n = int(rng.integers(100_000, MAX_COUNT))
    root = int(rng.integers(p))
    seed = k
    xs = [data(dtype, n, i, seed, op) for i in range(p)]
    x = xs[r]
    async_op = bool(rng.random() < 0.1)
    # a generous timeout on every other rank: deadlines on the lanes and the
    # general path beside calls without one
    timed = bool(rng.random() < 0.3)
    kw = {"async_op": async_op, **({"timeout": 600.0} if timed and (r + k) % 2 else {})}
    what = f"{collective}({algorithm}) {op} {np.dtype(dtype).name} n={n} root={root}"
    if timed:
        what += " timed"
    if collective == "allreduce":
        got, expected = comm.allreduce(x, op, algorithm, **kw), reduce_all(op, xs)
    elif collective == "reduce":
        got, expected = comm.reduce(x, op, root, algorithm, **kw), reduce_all(op, xs)
        if r != root:
            return what, int(got is not None and not async_op)
    elif collective == "broadcast":
        got = comm.broadcast(x.copy() if r == root else None, root, algorithm, **kw)
        expected = xs[root]
    elif collective == "gather":
        sizes = [int(rng.integers(0, 50)) for _ in range(p)]
        parts = [data(dtype, sizes[i], i, seed, op) for i in range(p)]
        got = comm.gather(parts[r], root, algorithm, sizes=sizes, **kw)
        expected = np.concatenate(parts)
        if r != root:
            return what, 0
    elif collective == "scatter":
        got = comm.scatter(xs[root] if r == root else None, root, algorithm, **kw)
        expected = np.array_split(xs[root], p)[r]
    elif collective == "allgather":
        got, expected = comm.allgather(x, algorithm, **kw), np.concatenate(xs)
    elif collective == "reduce_scatter":
        got = comm.reduce_scatter(x, op, algorithm, **kw)
        expected = np.array_split(reduce_all(op, xs), p)[r]
    elif collective == "alltoall":
        got = comm.alltoall(x, algorithm, **kw)
        expected = np.concatenate([np.array_split(xi, p)[r] for xi in xs])
    elif collective == "scan":
        exclusive = bool(rng.random() < 0.3)
        got = comm.scan(x, op, exclusive=exclusive, algorithm=algorithm, **kw)
        upto = r if exclusive else r + 1
        if upto == 0:
            got = got.wait() if async_op else got
            return what, int(got is not None)
        expected = reduce_all(op, xs[:upto])
    else:
        got = comm.barrier(**kw)
        if async_op:
            got.wait()
        return what, 0
    if async_op:
        got = got.wait()
    got, expected = np.asarray(got), np.asarray(expected)
    if got.shape != expected.shape or got.dtype != expected.dtype:
        return what, max(expected.size, 1)
    bits = (lambda a: a.view(np.uint8).reshape(a.size, -1) if a.size else a.view(np.uint8))
    return what, int(np.count_nonzero(np.any(bits(np.ascontiguousarray(got)) !=
                                             bits(np.ascontiguousarray(expected)), axis=-1)))


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


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=10000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", default=None)
    parser.add_argument("--warmup", type=float, default=0.1,
                        help="fraction of the calls before memory is first measured")
    parser.add_argument("--trace", type=int, default=0,
                        help="record resident memory every this many calls")
    args = parser.parse_args()
    comm = pycoll.Communicator()
    world = MPI.COMM_WORLD.Dup()
    p, r = comm.size, comm.rank
    rng = np.random.default_rng(args.seed)
    warm = max(1, int(args.calls * args.warmup))
    wrong, failures, start_rss, trace = 0, [], 0, []
    start = time.perf_counter()
    warm_up(comm)
    for k in range(args.calls):
        if k == warm:
            start_rss = rss_bytes()
        if args.trace and k % args.trace == 0:
            trace.append((k, world.allreduce(rss_bytes(), op=MPI.MAX) >> 20))
        what, bad = one_call(comm, rng, k, p, r)
        if bad:
            wrong += bad
            failures.append(f"call {k}: {what}: {bad} wrong")
    elapsed = time.perf_counter() - start
    growth = world.allreduce(rss_bytes() - start_rss, op=MPI.MAX)
    wrong = world.allreduce(wrong, op=MPI.SUM)
    failures = [f for fs in world.allgather(failures) for f in fs]
    result = {"mpi": " ".join(MPI.Get_library_version().split()[:3]), "p": p, "calls": args.calls,
              "seed": args.seed, "wrong": wrong, "failures": failures[:20],
              "rss_growth_bytes": growth, "seconds": elapsed, "rss_mib_trace": trace}
    if r == 0:
        print(json.dumps(result), flush=True)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(result, f, indent=1)
    comm.free()
    world.Free()
    return 0 if wrong == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
