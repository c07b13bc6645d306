"""A short tour of pycoll under mpiexec:  mpiexec -n 4 python -m pycoll.demo

Runs each collective once with "auto" on seeded data, checks the result
against numpy on every rank, then times allreduce (float32) against
mpi4py's native Allreduce at a few sizes. Rank 0 prints.
"""
from __future__ import annotations

import sys
import time

import numpy as np

import pycoll


def _check(name, ok, comm, lines):
    ok = bool(comm.allreduce(np.array([ok], np.bool_), op=pycoll.MIN)[0])
    lines.append(f"  {name:<16} {'ok' if ok else 'WRONG'}")
    return ok


def _time(fn, repeat):
    fn()
    start = time.perf_counter()
    for _ in range(repeat):
        fn()
    return (time.perf_counter() - start) / repeat


def main() -> int:
    from mpi4py import MPI

    comm = pycoll.Communicator()
    p, r = comm.size, comm.rank
    lines = [f"pycoll {pycoll.__version__} on {p} rank(s), {MPI.Get_library_version().splitlines()[0]}"]
    xs = [np.arange(12, dtype=np.float32) * (i + 1) for i in range(p)]
    x = xs[r]
    ok = True
    ok &= _check("allreduce", np.array_equal(comm.allreduce(x), sum(xs)), comm, lines)
    y = comm.broadcast(x.copy() if r == 0 else None, root=0)
    ok &= _check("broadcast", np.array_equal(y, xs[0]), comm, lines)
    y = comm.reduce(x, op=pycoll.MAX, root=p - 1)
    ok &= _check("reduce", r != p - 1 or np.array_equal(y, np.max(xs, axis=0)), comm, lines)
    y = comm.allgather(x)
    ok &= _check("allgather", np.array_equal(y, np.concatenate(xs)), comm, lines)
    y = comm.reduce_scatter(x)
    ok &= _check("reduce_scatter", np.array_equal(y, np.array_split(sum(xs), p)[r]), comm, lines)
    y = comm.alltoall(x)
    ok &= _check("alltoall", np.array_equal(y, np.concatenate([np.array_split(v, p)[r] for v in xs])),
                 comm, lines)
    y = comm.scan(x)
    ok &= _check("scan", np.array_equal(y, sum(xs[:r + 1])), comm, lines)

    lines.append("  allreduce float32, time per call (us): pycoll auto vs native MPI")
    mpi = MPI.COMM_WORLD
    for nbytes in (8, 64 << 10, 4 << 20):
        a = np.ones(nbytes // 4, np.float32)
        out = np.empty_like(a)
        repeat = 200 if nbytes < 1 << 20 else 10
        mine = _time(lambda: comm.allreduce(a, out=out), repeat)
        native = _time(lambda: mpi.Allreduce(a, out), repeat)
        times = comm.allreduce(np.array([mine, native]), op=pycoll.MAX)
        lines.append(f"  {nbytes:>10} B   {times[0] * 1e6:10.1f}   {times[1] * 1e6:10.1f}")
    if r == 0:
        print("\n".join(lines))
    comm.free()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
