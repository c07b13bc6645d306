"""Pages or fusion? mpiexec -n P python bench/fusion_pages.py [--repeat N]

ResNet-50's 161 gradients (bench/bench_fusion.py) reduced several ways,
in alternating rounds (medians; a round's time is the slowest rank's):

    flat            one allreduce of one buffer of the same bytes
    flat, 4 KiB     the same buffer kept on 4 KiB pages (MADV_NOHUGEPAGE)
    fused           FusionManager.allreduce of the arrays, allocated one by one
    each            one allreduce per array, allocated one by one
    fused, one buf  FusionManager.allreduce of the same shapes as views of
                    one buffer with a gap between neighbours (so they do not
                    merge into one piece), on that buffer's huge pages
    each, one buf   one allreduce per array of those views

The arrays allocated one by one differ from the views only in where they
lie: NumPy asks for transparent huge pages from 4 MiB up, and most of the
gradients are smaller. Also printed: how much of each set lies on huge
pages (AnonHugePages of /proc/self/smaps, Linux only).
"""
import argparse
import sys
from pathlib import Path

import numpy as np
from mpi4py import MPI

import pycoll

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_fusion import resnet50_shapes, rounds, small_pages  # noqa: E402

GAP = 16                # float32 values between neighbouring views


def huge_page_kib(arrays) -> tuple:
    """(KiB of huge pages in the mappings the arrays lie in, KiB of the
    arrays); (0, KiB) where /proc/self/smaps is not at hand."""
    total = sum(a.nbytes for a in arrays) // 1024
    try:
        lines = open("/proc/self/smaps").read().splitlines()
    except OSError:
        return 0, total
    maps = []
    for line in lines:
        head = line.split(maxsplit=1)[0]
        if "-" in head and ":" not in head:
            lo, hi = (int(x, 16) for x in head.split("-"))
            maps.append([lo, hi, 0])
        elif head == "AnonHugePages:" and maps:
            maps[-1][2] = int(line.split()[1])
    hit = {k for a in arrays for k, (lo, hi, _) in enumerate(maps)
           if lo < a.ctypes.data + a.nbytes and a.ctypes.data < hi}
    return sum(maps[k][2] for k in hit), total


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    comm = pycoll.Communicator()
    world = MPI.COMM_WORLD.Dup()
    shapes = resnet50_shapes()
    sizes = [int(np.prod(s)) for s in shapes]
    alone = [np.ones(s, np.float32) for s in shapes]
    flat = np.ones(sum(sizes), np.float32)
    paged = small_pages(flat.size)
    one = np.ones(sum(sizes) + GAP * len(sizes), np.float32)
    starts = np.cumsum([0] + [n + GAP for n in sizes[:-1]])
    views = [one[s:s + n].reshape(shape) for s, n, shape in zip(starts, sizes, shapes)]
    fm_alone, fm_views = pycoll.FusionManager(pycoll.SUM, comm=comm), pycoll.FusionManager(pycoll.SUM, comm=comm)
    variants = {"flat": lambda: comm.allreduce(flat, out=flat),
                "fused": lambda: fm_alone.allreduce(alone),
                "each": lambda: [comm.allreduce(a, out=a) for a in alone],
                "fused, one buf": lambda: fm_views.allreduce(views),
                "each, one buf": lambda: [comm.allreduce(a, out=a) for a in views]}
    if world.allreduce(paged is not None, op=MPI.LAND):
        variants["flat, 4 KiB"] = lambda: comm.allreduce(paged, out=paged)
    t = rounds(variants, world, args.repeat)
    if comm.rank == 0:
        library = " ".join(MPI.Get_library_version().split()[:3]).rstrip(",")
        print(f"p = {comm.size}, {library}; ms, medians of "
              f"{args.repeat} rounds")
        for name, seconds in t.items():
            print(f"  {name:16s} {seconds * 1e3:7.1f}   {seconds / t['flat']:.2f}x flat")
        print("  ways (fused):", sorted({w for _, w, _ in fm_alone.plan(alone)}))
        for name, arrays in (("one by one, >= 4 MiB", [a for a in alone if a.nbytes >= 4 << 20]),
                             ("one by one, < 4 MiB", [a for a in alone if a.nbytes < 4 << 20]),
                             ("one buffer", [one])):
            huge, kib = huge_page_kib(arrays)
            print(f"  huge pages under the arrays {name}: {huge} of {kib} KiB")
    comm.free()
    world.Free()
    return 0


if __name__ == "__main__":
    sys.exit(main())
