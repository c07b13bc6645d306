"""Staged sends (Note [Staging sends] in pycoll/_resources.pyx), measured
two ways at p = 2.

    mpiexec -n 2 python bench/staging.py [--sizes 128K,256K,1M,4M,8M,16M] [--rounds 9]

"sendrecv": one MPI_Sendrecv each way between buffers on 4 KiB pages, as
it is and with the send first copied into a buffer on huge pages (the
copy included in the time), memcpy or non-temporal stores. Then
pycoll's collectives of a numpy array of that many bytes, each way of
sending (set_staging: "off", "copy", "stream", and "auto", which times
the three and keeps the fastest) taking turns in every round:
float32 allreduce (ring and recursive doubling), broadcast, allgather,
gather, scatter and alltoall (each rank's part of the vector, as in
nccl-tests, is half of it). Each time is the median over rounds of the
largest over ranks of the mean call.
"""
import argparse
import statistics
import time

import numpy as np
from mpi4py import MPI

import pycoll
from pycoll import _resources
from pycoll._kernels.copy import stream_copy
from pycoll._memory import empty, empty_small_pages
from pycoll.bench.harness import parse_size


def timed(world, calls: dict, rounds: int, seconds: float = 2e-3) -> dict:
    """Median seconds per call of each of *calls*, taking turns in every round."""
    iters = {}
    for name, call in calls.items():
        call()
        start = time.perf_counter()
        call()
        once = world.allreduce(time.perf_counter() - start, op=MPI.MAX)
        iters[name] = max(2, min(1000, int(seconds / max(once, 1e-7))))
    times = {name: [] for name in calls}
    for _ in range(rounds):
        for name, call in calls.items():
            world.Barrier()
            start = time.perf_counter()
            for _ in range(iters[name]):
                call()
            times[name].append(world.allreduce((time.perf_counter() - start) / iters[name],
                                               op=MPI.MAX))
    return {name: statistics.median(t) for name, t in times.items()}


MODES = ("off", "copy", "stream", "auto")


def with_staging(mode: str, call):
    def run():
        was = _resources.set_staging(mode)
        try:
            call()
        finally:
            _resources.set_staging(was)
    return run


def collectives(comm, size: int) -> dict:
    """The calls timed at *size* bytes (numpy arrays, float32)."""
    v = np.ones(size // 4, np.float32)
    part = np.ones(size // 8, np.float32)
    out, gathered, mine = np.empty_like(v), np.empty_like(v), np.empty_like(part)
    calls = {f"allreduce {a}": (lambda a=a: comm.allreduce(v, algorithm=a, out=out))
             for a in ("ring", "recursive_doubling")}
    calls["broadcast"] = lambda: comm.broadcast(v)
    calls["allgather"] = lambda: comm.allgather(part, out=gathered)
    calls["gather"] = lambda: comm.gather(part, out=gathered if comm.rank == 0 else None)
    calls["scatter"] = lambda: comm.scatter(v if comm.rank == 0 else None, out=mine)
    calls["alltoall"] = lambda: comm.alltoall(v, out=out)
    return calls


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="128K,256K,1M,4M,8M,16M")
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    world = MPI.COMM_WORLD
    if world.size != 2:
        raise SystemExit("bench/staging.py runs on 2 ranks")
    comm = pycoll.Communicator()
    peer, say = 1 - world.rank, (print if world.rank == 0 else (lambda *a, **k: None))
    say(f"# {MPI.Get_library_version().split(chr(10))[0].split(',')[0].strip()}; times in us")
    say(f"# {'bytes':>9} {'sendrecv':>9} {'memcpy':>7} {'stream':>7}   {'call':<28} "
        + " ".join(f"{m:>7}" for m in MODES))
    for size in (parse_size(s) for s in args.sizes.split(",")):
        x, y = empty_small_pages(size, np.uint8), empty_small_pages(size, np.uint8)
        stage = empty(size, np.uint8)
        x[:], y[:], stage[:] = 1, 1, 1

        def staged_sendrecv():
            np.copyto(stage, x)
            world.Sendrecv(stage, peer, 0, y, peer, 0)

        def streamed_sendrecv():
            stream_copy(stage, x)
            world.Sendrecv(stage, peer, 0, y, peer, 0)

        raw = timed(world, {"as is": lambda: world.Sendrecv(x, peer, 0, y, peer, 0),
                            "memcpy": staged_sendrecv, "stream": streamed_sendrecv}, args.rounds)
        say(f"  {size:>9} {raw['as is'] * 1e6:>9.0f} {raw['memcpy'] * 1e6:>7.0f} "
            f"{raw['stream'] * 1e6:>7.0f}")
        for name, call in collectives(comm, size).items():
            t = timed(world, {m: with_staging(m, call) for m in MODES}, args.rounds)
            say(f"  {'':>9} {'':>9} {'':>7} {'':>7}   {name:<28} "
                + " ".join(f"{t[m] * 1e6:>7.0f}" for m in MODES))
    comm.free()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
