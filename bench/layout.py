"""Redistribution against the collective it runs (pycoll.layout).

    mpiexec -n 2 python bench/layout.py [--rows 256 4096] [--calls 20]

On a mesh of all ranks, for a float32 block of (rows, 1024) on each rank
(1024 rounded up to a multiple of p):
the plain allgather and alltoall of the block (along dimension 0), and the
redistributions that run them: (0,) -> (None,) and (1,) -> (None,)
(allgather along dimensions 0 and 1) and (0,) -> (1,) (alltoall). Each
time is the median of 5 rounds of --calls calls, rank 0's, in µs.
"""
import argparse
import time

import numpy as np

import pycoll
from pycoll.layout import DeviceMesh


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[256, 4096])
    parser.add_argument("--calls", type=int, default=20)
    args = parser.parse_args()
    comm = pycoll.Communicator()
    mesh = DeviceMesh((comm.size,), comm)
    group = mesh.group(0) or comm

    def timed(call) -> float:
        call()
        rounds = []
        for _ in range(5):
            comm.barrier()
            start = time.perf_counter()
            for _ in range(args.calls):
                call()
            rounds.append((time.perf_counter() - start) / args.calls)
        return float(np.median(rounds))

    columns = -(-1024 // comm.size) * comm.size       # (1,) splits them evenly
    for rows in args.rows:
        x = np.ones((rows, columns), np.float32)
        times = {
            "allgather": timed(lambda: pycoll.allgather(x, comm=group)),
            "(0,)->(None,)": timed(lambda: mesh.redistribute(x, (0,), (None,))),
            "(1,)->(None,)": timed(lambda: mesh.redistribute(x, (1,), (None,))),
            "alltoall": timed(lambda: pycoll.alltoall(x, comm=group)),
            "(0,)->(1,)": timed(lambda: mesh.redistribute(x, (0,), (1,))),
        }
        if comm.rank == 0:
            print(f"{x.nbytes >> 10} KiB block, p = {comm.size}: "
                  + ", ".join(f"{k} {v * 1e6:.0f} us" for k, v in times.items()), flush=True)
    mesh.free()
    comm.free()


if __name__ == "__main__":
    main()
