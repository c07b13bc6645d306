"""Fusion, measured: mpiexec -n P python bench/bench_fusion.py [--json FILE]

Three comparisons, each made of alternating rounds (every variant once per
round, the time of a variant being the largest over ranks), medians over
the rounds:

1. many small tensors: 1,000 float32 arrays of 256 B to 64 KiB (seeded
   sizes), FusionManager.allreduce against one allreduce per array;
2. ResNet-50's 161 parameter shapes (25,557,032 float32 values), fused,
   against one allreduce of a flat buffer of the same bytes and against
   one allreduce per array; the arrays allocated one by one, and as views
   of one buffer (pycoll.fusion.flat_buffer);
3. overlap: a simulated backward pass over the ResNet-50 layers, last to
   first, each layer a sleep standing for its compute (both cores are busy
   with ranks, so real compute would measure the scheduler), then
   mark_ready for its parameters; against the same pass alone and against
   the pass followed by the fused allreduce.

The flat buffer (numpy madvises allocations of 4 MiB and more for
transparent huge pages) is also measured on 4 KiB pages, as most of the
separately allocated arrays are: MPICH's single-copy path reads a sender's
huge pages about twice as fast (bench/PERFORMANCE.md, "Pages, not fusion").
"""
import argparse
import ctypes
import json
import statistics
import sys
import time

import numpy as np
from mpi4py import MPI

import pycoll
from pycoll.fusion import flat_buffer
from pycoll.fusion.manager import AUTOTUNE_ROUNDS, STRATEGIES


def resnet50_shapes() -> list:
    """The 161 parameter shapes of torchvision's resnet50, in module order."""
    shapes = [(64, 3, 7, 7), (64,), (64,)]
    inplanes = 64
    for width, blocks in ((64, 3), (128, 4), (256, 6), (512, 3)):
        out = width * 4
        for b in range(blocks):
            shapes += [(width, inplanes, 1, 1), (width,), (width,),
                       (width, width, 3, 3), (width,), (width,),
                       (out, width, 1, 1), (out,), (out,)]
            if b == 0:
                shapes += [(out, inplanes, 1, 1), (out,), (out,)]
            inplanes = out
    return shapes + [(1000, 2048), (1000,)]


def small_sizes(count=1000, seed=0) -> list:
    """Element counts of float32 arrays from 256 B to 64 KiB, log-uniform."""
    rng = np.random.default_rng(seed)
    return [int(2 ** e) // 4 for e in rng.uniform(8, 16, count)]


def small_pages(count: int) -> np.ndarray:
    """float32 ones on 4 KiB pages (MADV_NOHUGEPAGE before the first touch);
    None where madvise is not at hand."""
    a = np.empty(count, np.float32)
    page = 4096
    lo = -a.ctypes.data % page
    length = (a.nbytes - lo) // page * page
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        madvise = libc.madvise
    except (OSError, AttributeError):
        return None
    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    MADV_NOHUGEPAGE = 15
    if length > 0 and madvise(a.ctypes.data + lo, length, MADV_NOHUGEPAGE) != 0:
        return None
    a[...] = 1
    return a


def rounds(variants: dict, world, repeat: int) -> dict:
    """Median seconds per variant over *repeat* alternating rounds."""
    for f in variants.values():
        f()
    times = {k: [] for k in variants}
    for _ in range(repeat):
        for k, f in variants.items():
            world.Barrier()
            start = time.perf_counter()
            f()
            times[k].append(world.allreduce(time.perf_counter() - start, op=MPI.MAX))
    return {k: statistics.median(v) for k, v in times.items()}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", default=None)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--layer-ms", type=float, default=2.0, help="compute per layer (sleep)")
    args = parser.parse_args()
    comm = pycoll.Communicator()
    world = MPI.COMM_WORLD.Dup()
    p = comm.size
    results = {"mpi": " ".join(MPI.Get_library_version().split()[:3]), "p": p}
    say = (lambda *a: print(*a, flush=True)) if comm.rank == 0 else (lambda *a: None)

    # 1. many small tensors
    small = [np.ones(n, np.float32) for n in small_sizes()]
    fm = pycoll.FusionManager(pycoll.SUM, comm=comm)
    t = rounds({"fused": lambda: fm.allreduce(small),
                "per array": lambda: [comm.allreduce(a, out=a) for a in small]}, world, args.repeat)
    results["small"] = {"arrays": len(small), "bytes": sum(a.nbytes for a in small),
                        "fused_ms": t["fused"] * 1e3, "per_array_ms": t["per array"] * 1e3,
                        "speedup": t["per array"] / t["fused"]}
    say(f"1,000 small arrays ({results['small']['bytes'] / 2**20:.1f} MiB): fused "
        f"{t['fused'] * 1e3:.2f} ms, one allreduce each {t['per array'] * 1e3:.2f} ms, "
        f"{results['small']['speedup']:.1f}x")

    # 2. ResNet-50: each parameter its own array, and all of them views of
    # one buffer (DDP's gradient_as_bucket_view)
    shapes = resnet50_shapes()
    params = [np.ones(s, np.float32) for s in shapes]
    _, views = flat_buffer(shapes)
    total = sum(a.size for a in params)
    flat = np.ones(total, np.float32)
    flat_small_pages = small_pages(total)
    if not world.allreduce(flat_small_pages is not None, op=MPI.LAND):
        flat_small_pages = None             # the same variants on every rank
    # A manager per set of arrays: the ranks agree on how a list of arrays
    # lies once per list of shapes.
    fm, fm_views = pycoll.FusionManager(pycoll.SUM, comm=comm), pycoll.FusionManager(pycoll.SUM, comm=comm)
    tuned = pycoll.FusionManager(pycoll.SUM, comm=comm, autotune=True)
    for _ in range(AUTOTUNE_ROUNDS * (len(STRATEGIES) + 1)):
        tuned.allreduce(params)                 # every trial, before the timed rounds
    t = rounds({"fused": lambda: fm.allreduce(params),
                "fused autotune": lambda: tuned.allreduce(params),
                "fused views": lambda: fm_views.allreduce(views),
                "flat": lambda: comm.allreduce(flat, out=flat),
                "per array": lambda: [comm.allreduce(a, out=a) for a in params]}
              | ({"flat, 4 KiB pages": lambda: comm.allreduce(flat_small_pages, out=flat_small_pages)}
                 if flat_small_pages is not None else {}), world, args.repeat)
    results["resnet50"] = {"tensors": len(shapes), "values": total,
                           "ways": sorted({way for _, way, _ in fm.plan(params)}),
                           "autotune_ways": sorted({way for _, way, _ in tuned.plan(params)}),
                           "fused_ms": t["fused"] * 1e3, "fused_views_ms": t["fused views"] * 1e3,
                           "autotune_ms": t["fused autotune"] * 1e3,
                           "autotune_over_flat": t["fused autotune"] / t["flat"],
                           "autotune_over_per_array": t["fused autotune"] / t["per array"],
                           "flat_ms": t["flat"] * 1e3, "per_array_ms": t["per array"] * 1e3,
                           "fused_over_flat": t["fused"] / t["flat"],
                           "fused_views_over_flat": t["fused views"] / t["flat"],
                           "fused_over_per_array": t["fused"] / t["per array"]}
    if flat_small_pages is not None:
        small_flat = t["flat, 4 KiB pages"]
        results["resnet50"].update({"flat_small_pages_ms": small_flat * 1e3,
                                    "fused_over_flat_small_pages": t["fused"] / small_flat,
                                    "autotune_over_flat_small_pages": t["fused autotune"] / small_flat})
    say(f"ResNet-50 ({len(shapes)} tensors, {total:,} values): fused {t['fused'] * 1e3:.1f} ms, "
        f"flat {t['flat'] * 1e3:.1f} ms ({t['fused'] / t['flat']:.2f}x), one per tensor "
        f"{t['per array'] * 1e3:.1f} ms ({t['fused'] / t['per array']:.2f}x); autotuned "
        f"{t['fused autotune'] * 1e3:.1f} ms ({t['fused autotune'] / t['flat']:.2f}x flat, "
        f"{t['fused autotune'] / t['per array']:.2f}x per tensor); as views of one "
        f"buffer: fused {t['fused views'] * 1e3:.1f} ms ({t['fused views'] / t['flat']:.2f}x flat)")
    if flat_small_pages is not None:
        say(f"  flat on 4 KiB pages {small_flat * 1e3:.1f} ms: fused {t['fused'] / small_flat:.2f}x, "
            f"autotuned {t['fused autotune'] / small_flat:.2f}x")

    # 3. overlap: backward from the last layer to the first
    layer = args.layer_ms / 1e3
    fm = pycoll.FusionManager(pycoll.SUM, comm=comm, bucket_bytes=25 << 20)
    fm.register(params)

    def backward(ready=None):
        for i in reversed(range(len(params))):
            time.sleep(layer)                    # the layer's compute
            if ready is not None:
                ready(i)

    def overlapped():
        backward(fm.mark_ready)
        fm.wait()

    t = rounds({"compute only": backward,
                "compute then allreduce": lambda: (backward(), fm.allreduce(params)),
                "overlapped (mark_ready)": overlapped}, world, max(3, args.repeat // 2))
    comm_time = t["compute then allreduce"] - t["compute only"]
    hidden = (t["compute then allreduce"] - t["overlapped (mark_ready)"]) / comm_time if comm_time > 0 else 0
    results["overlap"] = {"layers": len(params), "layer_ms": args.layer_ms,
                          "compute_ms": t["compute only"] * 1e3,
                          "compute_then_allreduce_ms": t["compute then allreduce"] * 1e3,
                          "overlapped_ms": t["overlapped (mark_ready)"] * 1e3,
                          "communication_hidden": hidden}
    say(f"backward of {len(params)} layers x {args.layer_ms} ms: compute only "
        f"{t['compute only'] * 1e3:.0f} ms, then allreduce {t['compute then allreduce'] * 1e3:.0f} ms, "
        f"overlapped {t['overlapped (mark_ready)'] * 1e3:.0f} ms ({hidden:.0%} of the communication hidden)")
    if comm.rank == 0 and args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    comm.free()
    world.Free()
    return 0


if __name__ == "__main__":
    sys.exit(main())
