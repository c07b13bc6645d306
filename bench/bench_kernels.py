"""Kernel throughput against numpy: a benchmark, never a timed test.

    python -m pytest bench/bench_kernels.py --benchmark-json=kernels.json
    python bench/report_kernels.py kernels.json      # the README table

Each case runs pycoll's kernel and its numpy reference at the same size in
one session, so the ratios are comparable even on a noisy machine:

- SUM float32/float64, in place, against ``np.add(a, b, out=a)``;
- SUM float16 against numpy's float16 add, SUM bfloat16 against
  ml_dtypes' bfloat16 add (both in place);
- packing 100 arrays of mixed sizes into one buffer against one copy of the
  same number of bytes (``np.copyto``), with a PackPlan built once as the
  fusion manager does, and with the one-shot ``pack``;
- SUM float16 and bfloat16 in place at each instruction-set level this CPU
  can run (``half_isa``: what a machine without AVX-512 or F16C gets).
"""
import functools

import ml_dtypes
import numpy as np
import pytest

from pycoll._dtypes import BY_NAME, Op
from pycoll._kernels import copy as kcopy
from pycoll._kernels import reduce as kreduce

SIZES = {"64KiB": 64 << 10, "1MiB": 1 << 20, "64MiB": 64 << 20}
DTYPES = {"float32": np.float32, "float64": np.float64, "float16": np.float16,
          "bfloat16": ml_dtypes.bfloat16}


def rounds_for(nbytes, slow=False):
    """Enough rounds for a stable median, few enough for the slow references."""
    budget = 2e8 if not slow else 2e7
    return int(min(2000, max(5, budget // nbytes)))


@functools.lru_cache(maxsize=2)
def operands(dtype, nbytes):
    """The same arrays for pycoll and its reference: a fresh allocation can
    land on other pages (alignment, huge pages) and move a memory-bound
    ratio by 10-15%."""
    rng = np.random.default_rng(0)
    n = nbytes // np.dtype(dtype).itemsize
    a = rng.standard_normal(n).astype(dtype)
    b = rng.standard_normal(n).astype(dtype)
    return a, b


@pytest.mark.parametrize("impl", ["pycoll", "numpy"])
@pytest.mark.parametrize("size", list(SIZES))
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_sum(benchmark, impl, dtype, size):
    nbytes = SIZES[size]
    a, b = operands(DTYPES[dtype], nbytes)
    code, op = BY_NAME[dtype].code, Op.SUM.kernel
    if impl == "pycoll":
        def call():
            kreduce.reduce(op, code, a, a, b)
    else:
        def call():
            np.add(a, b, out=a)
    benchmark.group = f"sum {dtype} {size}"
    benchmark.extra_info.update(kind="sum", dtype=dtype, size=size, nbytes=nbytes, impl=impl)
    slow = impl == "numpy" and dtype in ("float16", "bfloat16")
    benchmark.pedantic(call, rounds=rounds_for(nbytes, slow), iterations=1, warmup_rounds=2)


@functools.lru_cache(maxsize=1)
def pack_case(total):
    """100 arrays, the buffer they pack into and one contiguous source of the
    same bytes for the reference copy; shared by the three cases of a size."""
    arrays = hundred_arrays(total)
    return arrays, np.empty(total, np.uint8), np.concatenate(arrays).view(np.uint8)


def hundred_arrays(total):
    """100 float32 arrays of seeded, uneven sizes adding up to *total* bytes."""
    rng = np.random.default_rng(1)
    weights = rng.uniform(0.2, 1.8, 100)
    counts = np.maximum(1, (weights / weights.sum() * total / 4).astype(int))
    counts[-1] += total // 4 - counts.sum()
    return [rng.standard_normal(int(c)).astype(np.float32) for c in counts]


@pytest.mark.parametrize("impl", ["plan", "pack", "copy"])
@pytest.mark.parametrize("size", ["1MiB", "16MiB", "64MiB"])
def test_pack_100_arrays(benchmark, impl, size):
    nbytes = {"1MiB": 1 << 20, "16MiB": 16 << 20, "64MiB": 64 << 20}[size]
    arrays, out, src = pack_case(nbytes)
    if impl == "plan":
        plan = kcopy.PackPlan(arrays)
        call = lambda: plan.pack(out)                     # noqa: E731
    elif impl == "pack":
        call = lambda: kcopy.pack(arrays, out)            # noqa: E731
    else:
        call = lambda: np.copyto(out, src)                # noqa: E731
    benchmark.group = f"pack {size}"
    benchmark.extra_info.update(kind="pack", size=size, nbytes=nbytes, impl=impl)
    benchmark.pedantic(call, rounds=rounds_for(nbytes), iterations=1, warmup_rounds=2)


@pytest.mark.parametrize("level", kreduce.half_isas())
@pytest.mark.parametrize("size", ["64KiB", "1MiB"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_sum_half_level(benchmark, level, dtype, size):
    nbytes = SIZES[size]
    a, b = operands(DTYPES[dtype], nbytes)
    code, op = BY_NAME[dtype].code, Op.SUM.kernel
    detected = kreduce.half_isa()
    kreduce._set_half_isa(level)
    try:
        benchmark.group = f"sum {dtype} {size} by level"
        benchmark.extra_info.update(kind="level", dtype=dtype, size=size, nbytes=nbytes,
                                    impl=level)
        benchmark.pedantic(lambda: kreduce.reduce(op, code, a, a, b),
                           rounds=rounds_for(nbytes, slow=level == "baseline"),
                           iterations=1, warmup_rounds=2)
    finally:
        kreduce._set_half_isa(detected)
