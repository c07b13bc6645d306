"""Calibrate the cost model: mpiexec -n P python -m pycoll.tune

Times the reduction kernel per dtype (gamma) and every algorithm of every
collective at a range of sizes (float32, "auto" bypassed), fits each
algorithm's (alpha, beta) to its own cost terms (pycoll/tuning.py) and writes the calibration of (this machine, this
MPI library, P) where Communicators look for it:
$PYCOLL_TUNE_DIR or ~/.cache/pycoll. Rank 0 prints, for each algorithm, the
fitted parameters and the measured and modelled times side by side.

    --sizes 8,1K,4K,16K,64K,256K,1M,2M,4M,8M,16M,64M   sizes (bytes; one block for block ops)
    --collectives allreduce,...       a subset
    --out FILE                        write elsewhere (also JSON)
    --budget 0.02                     seconds of timing per measurement
"""
from __future__ import annotations

import argparse
import datetime
import json
import statistics
import sys
import time

import numpy as np

import pycoll
from pycoll import tuning
from pycoll._dtypes import Op
from pycoll.algorithms import ALGORITHMS, REGISTRY
from pycoll.bench.harness import parse_size
from pycoll.bench.ops import SPECS, Bench

COLLECTIVES = ("allreduce", "broadcast", "reduce", "allgather", "reduce_scatter", "gather",
               "scatter", "alltoall")


def measure(calls: dict, barrier, reduce_max, budget: float, rounds: int = 5) -> dict:
    """Seconds per call of each of *calls* (name -> function): the largest
    over ranks of the median of *rounds* bursts. The calls take turns, one
    burst each per round, so that a machine whose speed drifts (a shared
    host) slows them all alike and their order survives."""
    iters = {}
    for name, call in calls.items():
        call()
        call()
        barrier()
        start = time.perf_counter()
        call()
        once = max(reduce_max(time.perf_counter() - start), 1e-7)
        iters[name] = max(1, min(1000, int(budget / once)))
    bursts = {name: [] for name in calls}
    for _ in range(rounds):
        for name, call in calls.items():
            barrier()
            start = time.perf_counter()
            for _ in range(iters[name]):
                call()
            bursts[name].append(reduce_max((time.perf_counter() - start) / iters[name]))
    return {name: statistics.median(b) for name, b in bursts.items()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pycoll.tune", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="8,1K,4K,16K,64K,256K,1M,2M,4M,8M,16M,64M")
    parser.add_argument("--collectives", default=",".join(COLLECTIVES))
    parser.add_argument("--out", default=None)
    parser.add_argument("--budget", type=float, default=0.02)
    args = parser.parse_args(argv)
    sizes = [parse_size(s) for s in args.sizes.split(",")]
    collectives = args.collectives.split(",")
    for c in collectives:
        if c not in COLLECTIVES:
            parser.error(f"--collectives: unknown {c}; expected {', '.join(COLLECTIVES)}")

    from mpi4py import MPI

    comm = pycoll.Communicator()
    world = MPI.COMM_WORLD.Dup()
    p, rank = comm.size, comm.rank
    barrier = world.Barrier
    reduce_max = lambda v: world.allreduce(v, op=MPI.MAX)        # noqa: E731
    say = (lambda *a: print(*a, flush=True)) if rank == 0 else (lambda *a: None)
    library = MPI.Get_library_version()
    say(f"# pycoll.tune: {p} ranks, {' '.join(library.split()[:3])}, sizes {args.sizes}")
    # gamma: the kernel's time per reduced byte, float32 and relative per dtype.
    gammas = {name: world.bcast(tuning.kernel_gamma(name) if rank == 0 else None)
              for name in ("float32", "float64", "float16", "bfloat16", "int32", "complex64")}
    gamma = gammas["float32"]
    kernel_cost = {name: round(g / gamma, 3) for name, g in gammas.items()}
    say(f"# gamma {gamma:.2e} s/B (float32); kernel cost per byte: {kernel_cost}")
    params = {"gamma": gamma, "kernel_cost": kernel_cost, "algorithms": {}}
    measured = {}
    for collective in collectives:
        spec = SPECS[collective]
        params["algorithms"][collective], measured[collective] = {}, {}
        names = ALGORITHMS[collective]
        samples = {name: [] for name in names}
        for size in sizes:
            count = spec.blocks(size, 4, p)
            bench = Bench(spec, np.float32, count, p, rank, 0, Op.SUM)
            bench.fill()
            n = count * 4
            times = measure({name: (lambda name=name: spec.run(bench, comm, name, False))
                             for name in names}, barrier, reduce_max, args.budget)
            for name in names:
                module = REGISTRY[collective][name]
                samples[name].append((module.steps(p), module.bytes_on_wire(n, p),
                                      module.reduce_bytes(n, p), times[name], n))
        for name, points in samples.items():
            pieces = {piece: tuning.fit([s[:4] for s in points if tuning.regime(s[4]) == piece],
                                        gamma)
                      for piece in tuning.REGIMES}
            params["algorithms"][collective][name] = pieces
            measured[collective][name] = [(n, t) for *_, t, n in points]
            say(f"{collective:>15} {name:<19} " + "  ".join(
                f"{k}: alpha {a:.2e} beta {b:.2e}" for k, (a, b) in pieces.items()))
            for (steps, wire, red, t, n) in points:
                alpha, beta = pieces[tuning.regime(n)]
                model = steps * alpha + wire * beta + red * gamma
                say(f"{'':>36}{n:>10} B  measured {t * 1e6:10.1f} us  model {model * 1e6:10.1f} us")
    if rank == 0:
        path = args.out or tuning.cache_path(library, p)
        from pathlib import Path
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({
            "machine": __import__("socket").gethostname(), "mpi": " ".join(library.split()[:3]),
            "p": p, "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "sizes": sizes, "params": params, "measured": measured}, indent=1))
        print(f"# wrote {path}", flush=True)
    world.Free()
    comm.free()
    return 0


if __name__ == "__main__":
    sys.exit(main())
