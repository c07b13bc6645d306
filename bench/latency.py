"""Small-message collective time, pycoll against native MPI, in alternating
bursts.

    mpiexec -n 2 python bench/latency.py [--collective allreduce|reduce|broadcast|gather|
                                          scatter|allgather|reduce_scatter|alltoall|scan|
                                          barrier[,...]|all]
                                         [--bytes 8] [--rounds 25] [--json FILE]
                                         [--input numpy|memoryview|torch] [--async]
                                         [--accumulate] [--into-none] [--ragged]
                                         [--in-place] [--out-input]

Several collectives (comma-separated, or all) run one after another in
the same launch, one JSON line each (--json then writes their list).

--bytes is the vector of allreduce, reduce, broadcast and scan, one rank's block
of gather, scatter, allgather, reduce_scatter and alltoall (root 0; the
result and out= buffers reused on every call), in whole float32 elements:
--bytes 0 times calls with no data. A barrier has none (bytes reads 0).

At 8 bytes a call takes a microsecond or two and a shared machine's noise
is larger than the difference being measured, so native and pycoll take
turns: one burst of 2000 calls each per round, the time of a burst being the
largest over ranks of its mean. The result is the median over rounds of the
per-round ratio pycoll / native, next to each side's median time.

--async issues pycoll's calls with async_op=True and waits on each at once.

--into-none: broadcast's receivers pass x=None and get a new array (Note
[Broadcasts into None] in pycoll/_lanes.py).

--ragged: gather's and allgather's rank i holds i + 1 blocks of --bytes,
passed with sizes=, against native MPI_Gatherv and MPI_Allgatherv.

--in-place: gather's and allgather's x is its own block of out (Note [Own
blocks] in pycoll/_lanes.py), allreduce's out is x, against native
MPI_IN_PLACE.

--accumulate gives pycoll's reductions (allreduce, reduce, reduce_scatter,
scan) bfloat16 arrays of the same element count with accumulate="float32"
(Note [Widened lanes] in pycoll/_lane_reduce.pyx); native MPI, which has no
bfloat16, reduces the float32 arrays.

--input gives pycoll's calls memoryviews or CPU torch tensors over the same
arrays instead of the arrays (made once; out= stays a numpy array), to time
an array-like's call (Note [Lane views] in pycoll/api.py); --out-input
makes out= one of the same kind too.
"""
import argparse
import json
import statistics
import sys
import time

import numpy as np
from mpi4py import MPI

import pycoll

COLLECTIVES = ("allreduce", "reduce", "broadcast", "gather", "scatter", "allgather",
               "reduce_scatter", "alltoall", "scan", "barrier")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--collective", default="allreduce", type=collectives,
                        help="one of " + ", ".join(COLLECTIVES) + "; several, comma-separated, "
                             "or 'all': each in turn, one JSON line each")
    parser.add_argument("--bytes", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=25)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--json", default=None)
    parser.add_argument("--input", default="numpy", choices=("numpy", "memoryview", "torch"))
    parser.add_argument("--async", dest="async_op", action="store_true",
                        help="pycoll's calls with async_op=True, each waited at once")
    parser.add_argument("--into-none", action="store_true",
                        help="broadcast's receivers pass x=None")
    parser.add_argument("--accumulate", action="store_true",
                        help="pycoll's reductions on bfloat16 with accumulate='float32'")
    parser.add_argument("--ragged", action="store_true",
                        help="gather and allgather: rank i holds i + 1 blocks, with sizes=")
    parser.add_argument("--in-place", action="store_true",
                        help="gather and allgather: x in its own block of out; allreduce: "
                             "out=x; native IN_PLACE")
    parser.add_argument("--out-input", action="store_true",
                        help="out= of the --input kind too (a torch tensor, a memoryview)")
    args = parser.parse_args()
    comm = pycoll.Communicator()
    world = MPI.COMM_WORLD.Dup()
    results = [measure(comm, world, args, collective) for collective in args.collective]
    if comm.rank == 0 and args.json:
        with open(args.json, "w") as f:
            json.dump(results[0] if len(results) == 1 else results, f, indent=1)
    comm.free()
    world.Free()
    return 0


def collectives(text: str) -> list:
    """--collective's value: names, comma-separated, or "all"."""
    names = list(COLLECTIVES) if text == "all" else text.split(",")
    wrong = [name for name in names if name not in COLLECTIVES]
    if wrong or not names:
        raise argparse.ArgumentTypeError(f"{', '.join(wrong) or text!r}: expected "
                                         f"{', '.join(COLLECTIVES)} or all")
    return names


def measure(comm, world, args, collective: str) -> dict:
    """Time *collective* both ways (rank 0 prints the JSON line) and
    return the result."""
    x = np.ones(args.bytes // 4, np.float32)
    y = np.empty_like(x)

    def burst(call):
        world.Barrier()
        start = time.perf_counter()
        for _ in range(args.calls):
            call()
        return world.allreduce((time.perf_counter() - start) / args.calls, op=MPI.MAX)

    whole = np.ones(x.size * comm.size, np.float32)
    view = as_input(args.input)
    # --accumulate: pycoll reduces bfloat16 copies in float32 (native, float32)
    half = args.accumulate and collective in ("allreduce", "reduce", "reduce_scatter", "scan")
    if half:
        import ml_dtypes        # here only: a second to import (Note [Importing ml_dtypes])
    ours = (lambda a: a.astype(ml_dtypes.bfloat16)) if half else (lambda a: a)
    acc = {"accumulate": "float32"} if half else {}
    xin, wholein, yout = view(ours(x)), view(ours(whole)), ours(y)
    outv = view if args.out_input else (lambda a: a)
    yout, yv, wholev = outv(yout), outv(y), outv(whole)
    caller = Waited(comm) if args.async_op else comm
    ragged = args.ragged and collective in ("gather", "allgather")
    in_place = args.in_place and not ragged and collective in ("gather", "allgather")
    if ragged:
        sizes = [(i + 1) * x.size for i in range(comm.size)]
        x = np.ones(sizes[comm.rank], np.float32)
        whole = np.ones(sum(sizes), np.float32)
        xin = view(x)
        layout = [whole, sizes, [sum(sizes[:i]) for i in range(comm.size)], MPI.FLOAT]
    if ragged and collective == "gather":
        native = lambda: world.Gatherv(x, layout if comm.rank == 0 else None, root=0)  # noqa: E731
        mine = lambda: caller.gather(xin, root=0, sizes=sizes, out=whole)  # noqa: E731
    elif ragged:
        native = lambda: world.Allgatherv(x, layout)            # noqa: E731
        mine = lambda: caller.allgather(xin, sizes=sizes, out=whole)  # noqa: E731
    elif in_place:
        own = whole[comm.rank * x.size:(comm.rank + 1) * x.size]
        if collective == "gather":
            native = lambda: world.Gather(MPI.IN_PLACE if comm.rank == 0 else own,  # noqa: E731
                                          whole if comm.rank == 0 else None, root=0)
            mine = lambda: caller.gather(own, root=0, out=whole)  # noqa: E731
        else:
            native = lambda: world.Allgather(MPI.IN_PLACE, whole)  # noqa: E731
            mine = lambda: caller.allgather(own, out=whole)     # noqa: E731
    elif collective == "gather":
        native = lambda: world.Gather(x, whole, root=0)         # noqa: E731
        mine = lambda: caller.gather(xin, root=0, out=wholev)   # noqa: E731
    elif collective == "scatter":
        native = lambda: world.Scatter(whole, y, root=0)        # noqa: E731
        mine = lambda: caller.scatter(wholein if comm.rank == 0 else None, root=0, out=yv)  # noqa: E731
    elif collective == "reduce_scatter":
        native = lambda: world.Reduce_scatter_block(whole, y)   # noqa: E731
        mine = lambda: caller.reduce_scatter(wholein, out=yout, **acc)  # noqa: E731
    elif collective == "broadcast":
        native = lambda: world.Bcast(x, root=0)                 # noqa: E731
        into = xin if comm.rank == 0 or not args.into_none else None
        mine = lambda: caller.broadcast(into, root=0)           # noqa: E731
    elif collective == "allgather":
        native = lambda: world.Allgather(x, whole)              # noqa: E731
        mine = lambda: caller.allgather(xin, out=wholev)        # noqa: E731
    elif collective == "alltoall":
        other = np.empty_like(whole)
        otherv = outv(other)
        native = lambda: world.Alltoall(whole, other)           # noqa: E731
        mine = lambda: caller.alltoall(wholein, out=otherv)     # noqa: E731
    elif collective == "barrier":
        x = x[:0]
        native = world.Barrier
        mine = caller.barrier
    elif collective == "scan":
        native = lambda: world.Scan(x, y)                       # noqa: E731
        mine = lambda: caller.scan(xin, out=yout, **acc)        # noqa: E731
    elif collective == "reduce":
        native = lambda: world.Reduce(x, y, root=0)             # noqa: E731
        mine = lambda: caller.reduce(xin, root=0, out=yout, **acc)  # noqa: E731
    elif args.in_place and collective == "allreduce":
        in_place = True
        native = lambda: world.Allreduce(MPI.IN_PLACE, x)       # noqa: E731
        mine = lambda: caller.allreduce(xin, out=xin, **acc)    # noqa: E731
    else:
        native = lambda: world.Allreduce(x, y)                  # noqa: E731
        mine = lambda: caller.allreduce(xin, out=yout, **acc)   # noqa: E731
    for _ in range(3):
        burst(native)
        burst(mine)
    times = {"native": [], "pycoll": []}
    for _ in range(args.rounds):
        times["native"].append(burst(native))
        times["pycoll"].append(burst(mine))
    ratios = [m / n for n, m in zip(times["native"], times["pycoll"])]
    result = {"mpi": " ".join(MPI.Get_library_version().split()[:3]), "p": comm.size,
              "collective": collective, "input": args.input, "async": args.async_op,
              "accumulate": half, "ragged": ragged, "in_place": in_place,
              "out_input": args.out_input,
              "bytes": x.nbytes, "native_us": statistics.median(times["native"]) * 1e6,
              "pycoll_us": statistics.median(times["pycoll"]) * 1e6,
              "ratio": statistics.median(ratios), "rounds": args.rounds,
              "transport": comm.transport_info}
    if comm.rank == 0:
        print(json.dumps(result), flush=True)
    return result


class Waited:
    """A Communicator whose collectives are issued with async_op=True and
    waited at once: the cost of the hand-over (Note [Waiting runs the
    queue] in pycoll/_async.py)."""

    def __init__(self, comm):
        self._comm = comm

    def __getattr__(self, name):
        call = getattr(self._comm, name)
        return lambda *args, **kwargs: call(*args, async_op=True, **kwargs).wait()


def as_input(kind: str):
    """What pycoll's calls get for a numpy array: the array itself, or a
    memoryview or a CPU torch tensor over its memory."""
    if kind == "memoryview":
        return memoryview
    if kind == "torch":
        import torch
        return torch.from_numpy
    return lambda a: a


if __name__ == "__main__":
    sys.exit(main())
