"""Fusing small arrays: mpiexec -n P python bench/fusion_small.py [--rounds 7] [--calls 300]

DESIGN.md: fusion must never be slower than not fusing. For a few lists of
small float32 arrays, a FusionManager's blocking allreduce of the same
arrays, called again and again (Note [Inline buckets] in
pycoll/fusion/manager.py), against one allreduce per array and against one
allreduce of a flat buffer of the same bytes. The variants take turns, one
burst of --calls calls each per round; a burst's time is the largest over
ranks of its mean; the medians over rounds are printed in µs, one JSON
line per case.
"""
import argparse
import json
import statistics
import sys
import time

import numpy as np
from mpi4py import MPI

import pycoll

# (arrays, float32 elements each, split_indices)
CASES = [(2, 2, None), (4, 2, None), (16, 2, None), (8, 2, [4]), (16, 64, [4, 8, 12]),
         (64, 64, None)]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()
    comm = pycoll.Communicator()
    world = MPI.COMM_WORLD.Dup()

    def burst(call):
        world.Barrier()
        start = time.perf_counter()
        for _ in range(args.calls):
            call()
        return world.allreduce((time.perf_counter() - start) / args.calls, op=MPI.MAX)

    for count, size, split in CASES:
        arrays = [np.ones(size, np.float32) for _ in range(count)]
        flat = np.ones(count * size, np.float32)
        fm = pycoll.FusionManager(pycoll.SUM, comm=comm)
        variants = {"fused": lambda: fm.allreduce(arrays, split_indices=split),
                    "per_array": lambda: [comm.allreduce(a, out=a) for a in arrays],
                    "flat": lambda: comm.allreduce(flat, out=flat)}
        times = {name: [] for name in variants}
        for name, call in variants.items():
            burst(call)
        for _ in range(args.rounds):
            for name, call in variants.items():
                times[name].append(burst(call))
        result = {"p": comm.size, "arrays": count, "bytes_each": size * 4, "split_indices": split,
                  "ways": sorted({way for _, way, _ in fm.plan(arrays, split_indices=split)})}
        result.update({f"{name}_us": statistics.median(t) * 1e6 for name, t in times.items()})
        if comm.rank == 0:
            print(json.dumps(result), flush=True)
    comm.free()
    world.Free()
    return 0


if __name__ == "__main__":
    sys.exit(main())
