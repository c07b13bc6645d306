"""Regenerate README's performance section from fresh runs on this machine.

    python bench/perf_report.py                 # p = 2 and 4, 3 repeats each
    python bench/perf_report.py --repeat 1 --sizes 8,64K,1M,64M --dry-run

For p in {2, 4}, for allreduce, allgather, reduce_scatter and broadcast, it
runs ``mpiexec -n p python -m pycoll.bench OP -d float32,bfloat16 -a all``
(native MPI, auto and every algorithm in one launch) ``--repeat`` times,
keeps every JSON in bench/results/, takes the median busbw of each row over
the repeats, and writes the tables between the markers in README.md plus
the plot bench/results/busbw.png. Nothing here is timed by the tests.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
OPS = ("allreduce", "allgather", "reduce_scatter", "broadcast")
BEGIN, END = "<!-- perf-table -->", "<!-- /perf-table -->"


def mpiexec() -> str:
    return str(Path(sys.executable).parent / "mpiexec")


def launch(p: int, op: str, sizes: list, out: Path, iters: int) -> None:
    cmd = [mpiexec(), "-n", str(p)]
    env = {**os.environ, "MPIEXEC_TIMEOUT": "3000"}
    version = subprocess.run([mpiexec(), "--version"], capture_output=True, text=True).stdout
    if "Open MPI" in version:
        cmd.append("--oversubscribe")
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_btl="^ofi")
    cmd += [sys.executable, "-m", "pycoll.bench", op, "-b", sizes[0], "-e", sizes[-1], "-f", "4",
            "-n", str(iters), "-w", "3", "-d", "float32,bfloat16", "-a", "all", "--json", str(out)]
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL, timeout=3600)


def median_rows(paths: list) -> tuple:
    """(meta of the first run, {key: (median busbw, median time, runs)})."""
    acc = defaultdict(list)
    meta = None
    for path in paths:
        data = json.loads(Path(path).read_text())
        meta = meta or data["meta"]
        for row in data["rows"]:
            key = (row["op"], row["dtype"], row["size"], row["inplace"], row["algorithm"])
            acc[key].append((row["busbw"], row["time_us"]))
    return meta, {k: (statistics.median(b for b, _ in v), statistics.median(t for _, t in v), len(v))
                  for k, v in acc.items()}


def table(op: str, dtype: str, rows: dict, sizes: set) -> list:
    """Markdown: one line per size, busbw per algorithm, ratio to native."""
    algos = sorted({k[4] for k in rows if k[0] == op and k[1] == dtype},
                   key=lambda a: (a != "native", a != "auto", a))
    lines = ["| size | " + " | ".join(algos) + " | auto / native |",
             "|---:|" + "---:|" * (len(algos) + 1)]
    for size in sorted(s for (o, d, s, i, a) in rows if o == op and d == dtype and not i):
        if size not in sizes:
            continue
        cells = []
        for a in algos:
            hit = rows.get((op, dtype, size, False, a))
            cells.append(f"{hit[0]:.2f}" if hit else "n/a")
        native, auto = rows.get((op, dtype, size, False, "native")), rows.get((op, dtype, size, False, "auto"))
        ratio = f"{auto[0] / native[0]:.2f}" if native and auto and native[0] > 0 else "–"
        line = f"| {human(size)} | " + " | ".join(cells) + f" | {ratio} |"
        if line not in lines:
            lines.append(line)
    return lines


def human(n: int) -> str:
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} B"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--procs", default="2,4")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--sizes", default="8,64M", help="first and last size (factor 4)")
    parser.add_argument("--show", default="8,4096,65536,1048576,16777216,67108864",
                        help="sizes (bytes) shown in the README tables")
    parser.add_argument("--reuse", action="store_true", help="use the JSON already in bench/results")
    parser.add_argument("--dry-run", action="store_true", help="print the section, leave README alone")
    args = parser.parse_args()
    RESULTS.mkdir(parents=True, exist_ok=True)
    procs = [int(p) for p in args.procs.split(",")]
    sizes = args.sizes.split(",")
    shown = {int(s) for s in args.show.split(",")}
    runs = defaultdict(list)
    for p in procs:
        for op in OPS:
            for k in range(args.repeat):
                out = RESULTS / f"{op}_p{p}_run{k + 1}.json"
                if not args.reuse:
                    print(f"p={p} {op} run {k + 1}/{args.repeat}", flush=True)
                    launch(p, op, sizes, out, args.iters)
                runs[p].append(out)
    section = [BEGIN, ""]
    for p in procs:
        meta, rows = median_rows(runs[p])
        section += [f"**p = {p}** — {meta['mpi']}, mpi4py {meta['mpi4py']}, pycoll {meta['pycoll']}, "
                    f"{meta['date'][:10]}; busbw in GB/s, out-of-place, median of "
                    f"{args.repeat} runs of `mpiexec -n {p} python -m pycoll.bench OP -b {sizes[0]} "
                    f"-e {sizes[-1]} -f 4 -n {args.iters} -w 3 -d float32,bfloat16 -a all` "
                    f"(`python bench/perf_report.py`).", ""]
        for op in OPS:
            for dtype in ("float32", "bfloat16"):
                section += [f"{op}, {dtype}, p = {p}:", ""] + table(op, dtype, rows, shown) + [""]
    plot = RESULTS / "busbw.png"
    files = [str(RESULTS / f"allreduce_p{p}_run1.json") for p in procs]
    subprocess.run([sys.executable, "-m", "pycoll.bench", "plot", *files, "-o", str(plot)], check=True)
    section += [f"![busbw against size, allreduce]({plot.relative_to(ROOT)})", "", END]
    text = "\n".join(section)
    if args.dry_run:
        print(text)
        return 0
    readme = ROOT / "README.md"
    body = readme.read_text()
    if BEGIN not in body:
        body += "\n" + text + "\n"
    else:
        head, rest = body.split(BEGIN, 1)
        body = head + text + rest.split(END, 1)[1]
    readme.write_text(body)
    print(f"README.md updated ({datetime.date.today()})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
