"""Calibrate the cost model: mpiexec -n P python -m pycoll.tune

Times the reduction kernel per dtype (gamma); chooses the segment size of
reductions (Note [Reduction segments] in pycoll/tuning.py) by timing the
reductions with each candidate; then times every algorithm of every
collective at a range of sizes (float32, "auto" bypassed), fits each
algorithm's (alpha, beta) to its own cost terms (pycoll/tuning.py) and
writes the calibration of (this machine, this MPI library, P) where
Communicators look for it: $PYCOLL_TUNE_DIR or ~/.cache/pycoll. Rank 0
prints, for each algorithm, the fitted parameters and the measured and
modelled times side by side.

    --sizes 8,64,256,1K,4K,16K,64K,256K,1M,2M,4M,8M,16M,64M
                                      sizes (bytes; one block for block ops)
    --collectives allreduce,...       a subset
    --segments 1M,4M,16M,64M          candidate reduction segments (one: use it, untimed)
    --out FILE                        write elsewhere (also JSON)
    --budget 0.02                     seconds of timing per measurement
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import math
import os
import socket
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import pycoll
from pycoll import tuning
from pycoll._dtypes import Op
from pycoll.algorithms import ALGORITHMS
from pycoll.bench.harness import parse_size
from pycoll.bench.ops import SPECS, Bench

COLLECTIVES = ("allreduce", "broadcast", "reduce", "allgather", "reduce_scatter", "gather",
               "scatter", "alltoall")
# The reductions whose transfers the segment cuts, timed for its choice.
SEGMENTED = (("allreduce", "ring"), ("allreduce", "recursive_doubling"),
             ("allreduce", "rabenseifner"), ("reduce", "binomial"), ("reduce_scatter", "ring"))


# The sizes timed. The tiny regime's alpha, what every step costs, rests
# on its smallest sizes, and one size there was not enough: timed alone,
# 8 B swings from launch to launch (the tree's time over recursive
# doubling's at p = 2 on Open MPI read 0.84-1.29 at 8 B in sixteen
# calibrations one evening, while six launches of the sweeps read
# 1.01-1.42, median 1.18, at every size up to 1 KiB), and a fit through
# 8 B and 1-16 KiB let one low reading pick the tree below 1 KiB (the
# p = 2 report on 4612db5). With 64 and 256 B as well, the twelve
# calibrations timed that way all fitted recursive doubling ahead at 4 B
# (bench/NOTES.md, "Tiny sizes: one point was not enough").
SIZES = ("8", "64", "256", "1K", "4K", "16K", "64K", "256K", "1M", "2M", "4M", "8M", "16M", "64M")


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
    bursts: dict[str, list] = {name: [] for name in calls}
    for _ in range(rounds):
        for name, call in calls.items():
            barrier()
            start = time.perf_counter()
            for _ in range(iters[name]):
                call()
            bursts[name].append(reduce_max((time.perf_counter() - start) / iters[name]))
    return {name: statistics.median(b) for name, b in bursts.items()}


def with_segment(comm, segment: int) -> None:
    """Make *comm*'s reductions cut their transfers at *segment* bytes
    (a collective call: every rank passes the same segment)."""
    params = {**(comm.settings.params or tuning.DEFAULT_PARAMS), "reduce_segment": segment}
    comm._use_settings(dataclasses.replace(comm.settings, params=params))


def time_segments(world, candidates: list, sizes: list, budget: float, barrier, reduce_max) -> dict:
    """{candidate: {"collective algorithm size": seconds}}: the SEGMENTED
    reductions at every size larger than the smallest candidate (below it
    every candidate sends the same messages), one Communicator per
    candidate, all taking turns within every round."""
    import pycoll

    comms = {}
    for segment in candidates:
        comms[segment] = pycoll.Communicator(world)
        with_segment(comms[segment], segment)
    p, rank = world.Get_size(), world.Get_rank()
    times: dict[int, dict] = {segment: {} for segment in candidates}
    try:
        for size in sizes:
            if size <= min(candidates):
                continue
            for collective, name in SEGMENTED:
                spec = SPECS[collective]
                count = spec.blocks(size, 4, p)
                if count == 0:
                    continue
                bench = Bench(spec, np.float32, count, p, rank, 0, Op.SUM)
                bench.fill()
                calls = {segment: (lambda c=comms[segment], b=bench, a=name:
                                   spec.run(b, c, a, False))
                         for segment in candidates}
                for segment, t in measure(calls, barrier, reduce_max, budget).items():
                    times[segment][f"{collective} {name} {size}"] = t
    finally:
        for c in comms.values():
            c.free()
    return times


def size_list(text: str) -> list:
    """Bytes from a comma-separated list of sizes ("8,64K,1M")."""
    return [parse_size(s) for s in text.split(",")]


def positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not value > 0 or math.isinf(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds above 0")
    return value


def output_path(out: str | None, library: str, p: int) -> tuple:
    """(where the calibration goes, None) with its directory made, or
    (None, why it cannot be written there)."""
    try:
        path = Path(out) if out else tuning.cache_path(library, p)
        if path.is_dir():
            return None, f"cannot write the calibration to {path}: it is a directory"
        path.parent.mkdir(parents=True, exist_ok=True)
    except (OSError, RuntimeError) as exc:      # RuntimeError: Path.home() without a home
        return None, f"cannot write the calibration to {out or 'the cache'}: {exc}"
    if not os.access(path.parent, os.W_OK | os.X_OK) or (path.exists() and not os.access(path, os.W_OK)):
        return None, f"cannot write the calibration to {path}: permission denied"
    return path, None


def parse_args(argv) -> tuple:
    """(the parser, its checked arguments)."""
    parser = argparse.ArgumentParser(prog="python -m pycoll.tune", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=size_list, default=",".join(SIZES),
                        help="sizes in bytes (one block for block ops), comma-separated")
    parser.add_argument("--collectives", default=",".join(COLLECTIVES),
                        help="the collectives to time, comma-separated")
    parser.add_argument("--segments", type=size_list,
                        default=",".join(f"{s >> 20}M" for s in tuning.REDUCE_SEGMENTS),
                        help="candidate reduction segments (one: use it, untimed)")
    parser.add_argument("--out", default=None, metavar="FILE",
                        help="write the calibration here instead (also JSON)")
    parser.add_argument("--budget", type=positive_seconds, default=0.02,
                        help="seconds of timing per measurement")
    args = parser.parse_args(argv)
    args.collectives = args.collectives.split(",")
    args.segments = sorted(set(args.segments))
    if not all(1 <= c <= tuning.WHOLE for c in args.segments):
        parser.error(f"--segments: every segment must be between 1 and {tuning.WHOLE} bytes")
    for c in args.collectives:
        if c not in COLLECTIVES:
            parser.error(f"--collectives: unknown {c}; expected {', '.join(COLLECTIVES)}")
    return parser, args


def choose_segment(comm, world, args, barrier, reduce_max, say) -> tuple:
    """(the reductions' segment, {candidate: times} when they were timed):
    PYCOLL_SEGMENT_BYTES where it is set, the one candidate given, or
    the candidate that timed fastest (tuning.choose_reduce_segment)."""
    candidates = args.segments
    if comm.settings.segment_bytes:
        say(f"# reduce_segment {comm.settings.segment_bytes} B: PYCOLL_SEGMENT_BYTES is set, "
            f"and every transfer is cut at it")
        return comm.settings.segment_bytes, {}
    segment_times: dict = {}
    if len(candidates) == 1:
        segment = candidates[0]
    else:
        segment_times = time_segments(world, candidates, args.sizes, args.budget, barrier,
                                      reduce_max)
        if any(segment_times.values()):
            segment = world.bcast(tuning.choose_reduce_segment(segment_times))
            for c, cases in segment_times.items():
                say(f"# reduce_segment {c:>10} B: " + "  ".join(
                    f"{case} {t * 1e6:.0f} us" for case, t in cases.items()))
        else:
            segment = tuning.REDUCE_SEGMENT
            say(f"# no size above {min(candidates)} B: the candidates would send the same messages")
    say(f"# reduce_segment {segment} B")
    return segment, segment_times


def fit_collective(collective: str, comm, args, gamma: float, barrier, reduce_max, say) -> tuple:
    """({algorithm: {regime: (alpha, beta)}}, {algorithm: [(bytes, seconds)]}):
    every algorithm of *collective* timed at every size (float32), each
    fitted to its own cost terms, regime by regime."""
    spec, names, p = SPECS[collective], ALGORITHMS[collective], comm.size
    samples: dict[str, list] = {name: [] for name in names}
    for size in args.sizes:
        # At least one element per block: 8 B at 4 ranks is no float32
        # element per block, an empty call that sends no data message,
        # and fitted into the tiny regime it made the ring look cheaper
        # there than recursive doubling (allgather, MPICH, p = 4).
        count = max(1, spec.blocks(size, 4, p))
        bench = Bench(spec, np.float32, count, p, comm.rank, 0, Op.SUM)
        bench.fill()
        n = count * 4
        times = measure({name: (lambda name=name: spec.run(bench, comm, name, False))
                         for name in names}, barrier, reduce_max, args.budget)
        for name in names:
            # a chain's terms count the segments comm's parameters cut
            samples[name].append((*tuning.terms(collective, name, n, p, comm.settings.params),
                                  times[name], n))
    fits, measured = {}, {}
    for name, points in samples.items():
        pieces = {piece: tuning.fit([s[:4] for s in points if tuning.regime(s[4]) == piece], gamma)
                  for piece in tuning.REGIMES}
        fits[name] = pieces
        measured[name] = [(n, t) for *_, t, n in points]
        say(f"{collective:>15} {name:<19} " + "  ".join(
            f"{k}: alpha {a:.2e} beta {b:.2e}" for k, (a, b) in pieces.items()))
        for (steps, wire, red, t, n) in points:
            alpha, beta = pieces[tuning.regime(n)]
            model = steps * alpha + wire * beta + red * gamma
            say(f"{'':>36}{n:>10} B  measured {t * 1e6:10.1f} us  model {model * 1e6:10.1f} us")
    return fits, measured


def main(argv=None) -> int:
    parser, args = parse_args(argv)

    from mpi4py import MPI

    if MPI.COMM_WORLD.Get_size() == 1:
        # Nothing travels at p = 1: every collective is a local copy, and
        # a fit of zero steps and zero bytes would be all zeros.
        parser.error("one process has nothing to calibrate; run it as "
                     "mpiexec -n P python -m pycoll.tune, with the P of the jobs it is for (P >= 2)")
    comm = pycoll.Communicator()
    world = MPI.COMM_WORLD.Dup()
    p, rank = comm.size, comm.rank
    barrier = world.Barrier
    reduce_max = lambda v: world.allreduce(v, op=MPI.MAX)        # noqa: E731
    say = (lambda *a: print(*a, flush=True)) if rank == 0 else (lambda *a: None)
    library = MPI.Get_library_version()
    # Rank 0 writes the calibration at the end: a place it cannot write is
    # refused now, not after minutes of timing.
    path: Path | None = None
    problem = None
    if rank == 0:
        path, problem = output_path(args.out, library, p)
    problem = world.bcast(problem)
    if problem:
        world.Free()
        comm.free()
        if rank == 0:
            parser.error(problem)
        return 2
    say(f"# pycoll.tune: {p} ranks, {' '.join(library.split()[:3])}, "
        f"sizes {','.join(map(str, args.sizes))} B")
    # gamma: the kernel's time per reduced byte, float32 and relative per dtype.
    gammas = {name: world.bcast(tuning.kernel_gamma(name) if rank == 0 else None)
              for name in ("float32", "float64", "float16", "bfloat16", "int32", "complex64")}
    gamma = gammas["float32"]
    kernel_cost = {name: round(g / gamma, 3) for name, g in gammas.items()}
    say(f"# gamma {gamma:.2e} s/B (float32); kernel cost per byte: {kernel_cost}")
    # The reductions' segment first: every fit below is made with it.
    segment, segment_times = choose_segment(comm, world, args, barrier, reduce_max, say)
    with_segment(comm, segment)
    params: dict = {"gamma": gamma, "kernel_cost": kernel_cost, "reduce_segment": segment,
                    "algorithms": {}}
    measured: dict = {}
    for collective in args.collectives:
        params["algorithms"][collective], measured[collective] = fit_collective(
            collective, comm, args, gamma, barrier, reduce_max, say)
    if rank == 0:
        assert path is not None                 # (rank 0's output_path)
        path.write_text(json.dumps({
            "machine": socket.gethostname(), "mpi": " ".join(library.split()[:3]),
            "p": p, "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "sizes": args.sizes, "params": params, "measured": measured,
            "segments": {str(c): cases for c, cases in segment_times.items()}}, indent=1))
        print(f"# wrote {path}", flush=True)
    world.Free()
    comm.free()
    return 0


if __name__ == "__main__":
    sys.exit(main())
