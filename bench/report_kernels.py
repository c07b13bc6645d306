"""Summarise a bench_kernels.py JSON file as the README's kernel table.

    python bench/report_kernels.py kernels.json [more.json ...]

With several files (repeated runs) each ratio is the median over the runs
of the per-run ratio of medians.
"""
import json
import statistics
import sys
from collections import defaultdict

from pycoll._kernels.reduce import HALF_ISAS


def load(path):
    with open(path) as f:
        data = json.load(f)
    rows = {}
    for b in data["benchmarks"]:
        info = b["extra_info"]
        rows[(info["kind"], info.get("dtype", ""), info["size"], info["impl"])] = (
            b["stats"]["median"], info["nbytes"])
    return data, rows


def ratios(rows):
    """(kind, dtype, size) -> (pycoll GB/s, reference GB/s, ratio)."""
    out = {}
    for (kind, dtype, size, impl), (median, nbytes) in rows.items():
        if kind == "sum" and impl == "pycoll":
            ref = rows[(kind, dtype, size, "numpy")][0]
            out[(kind, dtype, size)] = (nbytes / median / 1e9, nbytes / ref / 1e9, ref / median)
        if kind == "pack" and impl in ("plan", "pack"):
            ref = rows[(kind, dtype, size, "copy")][0]
            out[(kind, impl, size)] = (nbytes / median / 1e9, nbytes / ref / 1e9, ref / median)
    return out


def main(paths):
    runs = [ratios(load(p)[1]) for p in paths]
    meta = load(paths[0])[0]["machine_info"]
    merged = defaultdict(list)
    for run in runs:
        for key, value in run.items():
            merged[key].append(value)
    print(f"<!-- {meta.get('cpu', {}).get('brand_raw', '')}, python {meta['python_version']}, "
          f"{len(paths)} run(s) -->")
    print("| kernel | size | pycoll GB/s | reference GB/s | ratio |")
    print("|---|---|---|---|---|")
    for key in sorted(merged, key=lambda k: (k[0] == "pack", k[1], _size_key(k[2]))):
        kind, what, size = key
        values = merged[key]
        mine = statistics.median(v[0] for v in values)
        ref = statistics.median(v[1] for v in values)
        ratio = statistics.median(v[2] for v in values)
        if kind == "sum":
            label = f"SUM {what} vs {'ml_dtypes' if what == 'bfloat16' else 'numpy'} add"
        else:
            label = f"pack 100 arrays ({'PackPlan' if what == 'plan' else 'pack()'}) vs one copy"
        print(f"| {label} | {size} | {mine:.2f} | {ref:.2f} | {ratio:.2f}x |")
    levels = level_table([load(p)[1] for p in paths])
    if levels:
        print()
        print(*levels, sep="\n")


def level_table(runs):
    """SUM float16/bfloat16 in place at each instruction-set level (GB/s,
    one operand's bytes; medians over the runs), or [] without those cases."""
    speeds = defaultdict(list)
    for rows in runs:
        for (kind, dtype, size, level), (median, nbytes) in rows.items():
            if kind == "level":
                speeds[(dtype, size, level)].append(nbytes / median / 1e9)
    if not speeds:
        return []
    levels = [v for v in HALF_ISAS if any(key[2] == v for key in speeds)]
    lines = ["| SUM in place, GB/s | size | " + " | ".join(levels) + " |",
             "|---|---|" + "---|" * len(levels)]
    for dtype, size in sorted({key[:2] for key in speeds}, key=lambda k: (k[0], _size_key(k[1]))):
        cells = [f"{statistics.median(speeds[(dtype, size, v)]):.2f}"
                 if (dtype, size, v) in speeds else "–" for v in levels]
        lines.append(f"| {dtype} | {size} | " + " | ".join(cells) + " |")
    return lines


def _size_key(size):
    units = {"KiB": 1 << 10, "MiB": 1 << 20}
    return int(size[:-3]) * units[size[-3:]]


if __name__ == "__main__":
    if not sys.argv[1:] or sys.argv[1].startswith("-"):
        sys.exit("usage: python bench/report_kernels.py RUN.json [RUN.json ...]  "
                 "(from python -m pytest bench/bench_kernels.py --benchmark-json=RUN.json)")
    main(sys.argv[1:])
