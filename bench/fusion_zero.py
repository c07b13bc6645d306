"""Fused reduce_scatter and allgather (ZeRO): mpiexec -n P python bench/fusion_zero.py
[--rounds 7] [--calls 100]

DESIGN.md: fusion must never be slower than not fusing. For lists of
float32 arrays, from a few of 8 B to ResNet-50's 161 parameters, a
FusionManager's reduce_scatter and allgather of the same arrays, called
again and again, against one reduce_scatter (allgather) per array and
against one of a flat buffer of the same bytes. The variants take turns,
one burst of calls each per round, in a new order every round (a
variant's time depends on which one ran before it: after a large
allocation, a burst pays for it); a burst's time is the
largest over ranks of its mean; the medians over rounds are printed in
µs, one JSON line per case.
"""
import argparse
import json
import statistics
import sys
import time

import numpy as np
from mpi4py import MPI

import pycoll
from bench_fusion import resnet50_shapes

# (name, shapes)
CASES = [("2 x 8 B", [(2,)] * 2), ("16 x 8 B", [(2,)] * 16), ("64 x 256 B", [(64,)] * 64),
         ("8 x 64 KiB", [(16384,)] * 8), ("8 x 1 MiB", [(262144,)] * 8),
         ("ResNet-50", resnet50_shapes())]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--cases", default=None, help="comma-separated case names")
    args = parser.parse_args()
    comm = pycoll.Communicator()
    world = MPI.COMM_WORLD.Dup()
    p, r = comm.size, comm.rank
    wanted = args.cases.split(",") if args.cases else [name for name, _ in CASES]

    def burst(call, calls):
        world.Barrier()
        start = time.perf_counter()
        for _ in range(calls):
            call()
        return world.allreduce((time.perf_counter() - start) / calls, op=MPI.MAX)

    for name, shapes in CASES:
        if name not in wanted:
            continue
        arrays = [np.ones(s, np.float32) for s in shapes]
        total = sum(a.size for a in arrays)
        calls = max(1, min(args.calls, int(args.calls * 65536 / max(total, 1))))
        flat = np.ones(total, np.float32)
        fm = pycoll.FusionManager(pycoll.SUM, comm=comm)
        shards = fm.reduce_scatter(arrays)
        flat_shard = comm.reduce_scatter(flat)
        rows = [[len(b) for b in np.array_split(a, p)] for a in arrays]
        flat_rows = [len(b) for b in np.array_split(flat, p)]
        variants = {
            "fused_rs": lambda: fm.reduce_scatter(arrays),
            "per_array_rs": lambda: [comm.reduce_scatter(a) for a in arrays],
            "flat_rs": lambda: comm.reduce_scatter(flat),
            "fused_ag": lambda: fm.allgather(shards, arrays),
            "per_array_ag": lambda: [comm.allgather(s, out=a, sizes=k)
                                     for s, a, k in zip(shards, arrays, rows)],
            "flat_ag": lambda: comm.allgather(flat_shard, out=flat, sizes=flat_rows),
        }
        names = list(variants)
        times = {k: [] for k in names}
        for k in names:
            burst(variants[k], calls)
        order = np.random.default_rng(0)        # the same order on every rank
        for _ in range(args.rounds):
            for k in order.permutation(names):
                times[k].append(burst(variants[k], calls))
        result = {"p": p, "case": name, "arrays": len(arrays), "bytes": total * 4}
        if hasattr(fm, "zero_ways"):            # how the reduce_scatter went
            units, _ = fm._zero_units("reduce_scatter", arrays, None, None)
            alone = sum(1 for u in units if type(u).__name__ == "_ZeroAlone")
            result.update(buckets_packed=len(units) - alone, arrays_alone=alone)
        result.update({f"{k}_us": round(statistics.median(t) * 1e6, 1) for k, t in times.items()})
        if r == 0:
            print(json.dumps(result), flush=True)
    comm.free()
    world.Free()
    return 0


if __name__ == "__main__":
    sys.exit(main())
