"""Draw a benchmark JSON file: busbw against size, one line per algorithm.

    python -m pycoll.bench plot run.json [more.json ...] -o busbw.png

One panel per (op, dtype); out-of-place rows; the size axis is log2. Several
files (p = 2 and p = 4, say) share the figure, their lines labelled by p.
matplotlib is imported here only (pip install 'pycoll[bench]').
"""
from __future__ import annotations

import argparse
import json
from collections import defaultdict


def main(argv) -> int:
    parser = argparse.ArgumentParser(prog="python -m pycoll.bench plot")
    parser.add_argument("files", nargs="+", help="JSON files written by --json")
    parser.add_argument("-o", "--output", default="busbw.png")
    parser.add_argument("--title", default=None)
    args = parser.parse_args(argv)
    try:
        import matplotlib
    except ImportError:
        parser.error("plotting needs matplotlib: pip install 'pycoll[bench]'")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels: defaultdict = defaultdict(lambda: defaultdict(list))
    metas = []
    for path in args.files:
        data = _read(parser, path)
        meta = data["meta"]
        metas.append(meta)
        for row in data["rows"]:
            if row["inplace"] or row["size"] == 0:
                continue
            label = row["algorithm"]
            if len(args.files) > 1:
                label += f" ({' '.join(meta['mpi'].split()[:2])}, p={meta['p']})"
            panels[(row["op"], row["dtype"])][label].append((row["size"], row["busbw"]))
    if not panels:
        parser.error("no out-of-place rows with a size above 0 in " + ", ".join(args.files))
    keys = sorted(panels)
    cols = min(2, len(keys))
    rows = (len(keys) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(6.5 * cols, 4.2 * rows), squeeze=False)
    for ax, key in zip(axes.flat, keys):
        for label, points in sorted(panels[key].items()):
            points.sort()
            style = "--" if label.startswith("native") else "-"
            ax.plot([s for s, _ in points], [b for _, b in points], style, marker=".", label=label)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("size (bytes)")
        ax.set_ylabel("busbw (GB/s)")
        ax.set_title(f"{key[0]}, {key[1]}")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small")
    for ax in list(axes.flat)[len(keys):]:
        ax.axis("off")
    title = args.title or f"pycoll {metas[0]['pycoll']}, {metas[0]['mpi']}, {metas[0]['date'][:10]}"
    fig.suptitle(title)
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    try:
        fig.savefig(args.output, dpi=110)
    except (OSError, ValueError) as exc:        # no such directory, unknown format
        parser.error(f"cannot write {args.output}: {exc}")
    return 0


def _read(parser, path: str) -> dict:
    """A --json file's contents; a usage error (exit 2) naming the file
    when it cannot be read or is not one."""
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError) as exc:
        parser.error(f"cannot read {path}: {exc}")
    if not isinstance(data, dict) or not isinstance(data.get("meta"), dict) \
            or not isinstance(data.get("rows"), list):
        parser.error(f"{path} is not a file written by --json (no 'meta' and 'rows')")
    return data
