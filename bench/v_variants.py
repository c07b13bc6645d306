"""pycoll's sizes= calls against MPI's v-variants, microseconds per call.

    mpiexec -n 2 python bench/v_variants.py [--bytes 16,1M,16M] [--rounds 15] [--calls N]

For each total size: reduce_scatter and scatter with uneven sizes= (rank
i's block a quarter of an even block larger or smaller in turn, the last
taking the rest) and with none, against MPI_Reduce_scatter and
MPI_Scatterv of the same counts; alltoall with every rank sending those
blocks (a matrix of equal rows), against MPI_Alltoallv. float32, no
out=. Each case runs its rounds in turn with the others (one round of
each case, then the next), and the median round is reported, on rank 0.
A round is 2,000 calls below 4 KiB, 50 up to 1 MiB, 5 above (--calls:
that many at every size).
"""
import argparse
import time

import numpy as np
from mpi4py import MPI

import pycoll
from pycoll.bench.harness import parse_size


def uneven(n: int, p: int) -> list:
    rows = [max(0, n // p + (-1) ** i * (n // (4 * p))) for i in range(p)]
    rows[-1] += n - sum(rows)
    return rows


def cases(c, world, n: int) -> dict:
    p, r = c.size, c.rank
    x = np.ones(n, np.float32)
    rows = uneven(n, p)
    block = np.empty(rows[r], np.float32)
    root_x = x if r == 0 else None
    matrix = [rows] * p
    received = np.empty(p * rows[r], np.float32)
    return {
        "reduce_scatter sizes=": lambda: c.reduce_scatter(x, sizes=rows),
        "reduce_scatter": lambda: c.reduce_scatter(x),
        "MPI_Reduce_scatter": lambda: world.Reduce_scatter(x, block, recvcounts=rows),
        "scatter sizes=": lambda: c.scatter(root_x, sizes=rows),
        "scatter": lambda: c.scatter(root_x),
        "MPI_Scatterv": lambda: world.Scatterv([x, rows] if r == 0 else None, block, root=0),
        "alltoall sizes=": lambda: c.alltoall(x, sizes=matrix),
        "MPI_Alltoallv": lambda: world.Alltoallv([x, rows], [received, [rows[r]] * p]),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bytes", default="16,1M,16M", help="total sizes, comma-separated")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--calls", type=int, default=None, help="calls per round at every size")
    args = ap.parse_args()
    world = MPI.COMM_WORLD
    c = pycoll.Communicator(world)
    for nbytes in (parse_size(b) for b in args.bytes.split(",")):
        n = max(nbytes // 4, c.size)
        calls = args.calls or (2000 if nbytes < 4096 else 50 if nbytes <= 1 << 20 else 5)
        timed = cases(c, world, n)
        for fn in timed.values():
            fn()                                        # plans and lanes made
        rounds: dict = {name: [] for name in timed}
        for _ in range(args.rounds):
            for name, fn in timed.items():
                world.Barrier()
                start = time.perf_counter()
                for _ in range(calls):
                    fn()
                rounds[name].append((time.perf_counter() - start) / calls * 1e6)
        if c.rank == 0:
            print(f"{n * 4} B, p = {c.size}: " + ", ".join(
                f"{name} {np.median(t):.1f}" for name, t in rounds.items()), flush=True)


if __name__ == "__main__":
    main()
