"""Autotune against the model: "auto" and "tuned" beside every algorithm.

    python bench/autotune.py run [--procs 2] [--repeat 3]    # in an MPI venv: this MPI
    python bench/autotune.py summary                         # every library's runs

``run`` sweeps allreduce, reduce and reduce_scatter from 1 MiB to 64 MiB
(float32 and bfloat16), "auto", "tuned" (auto on a Communicator with
autotune=True, timed after its trials) and every named algorithm taking
turns, into bench/results/<mpi>/p<P>/autotune/. ``summary`` prints, per
(op, dtype, size), each launch's time of auto and of tuned over the best
named algorithm of that launch, their medians over launches, and how many
are within 10% (Note [Tuning online] in pycoll/_trials.py).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

from perf_report import RESULTS, launch

from pycoll import tuning
from pycoll.algorithms import ALGORITHMS
from pycoll.bench.harness import TUNED, TUNED_OPS

SWEEP = ["-b", "1M", "-e", "64M", "-f", "4", "-n", "4", "-R", "5", "-w", "3", "-T", "1000",
         "-d", "float32,bfloat16"]


def run(p: int, repeat: int) -> None:
    library = launch(1, ["-c", "from mpi4py import MPI; print(MPI.Get_library_version())"])
    where = RESULTS / tuning.library_slug(library) / f"p{p}" / "autotune"
    where.mkdir(parents=True, exist_ok=True)
    for k in range(1, repeat + 1):
        for op in TUNED_OPS:
            print(f"{where.parent.parent.name}: {op} run {k}/{repeat}", flush=True)
            launch(p, ["-m", "pycoll.bench", op, *SWEEP, "-a",
                       ",".join(["auto", TUNED, *ALGORITHMS[op]]),
                       "--json", str(where / f"{op}_run{k}.json")])


def summary(where: Path) -> list:
    """The report's lines for one library's runs."""
    ratios = defaultdict(lambda: {"auto": [], TUNED: [], "chosen": [], "best": []})
    for path in sorted(where.glob("*_run*.json")):
        times = defaultdict(dict)
        for row in json.loads(path.read_text())["rows"]:
            if not row["inplace"]:
                key = (row["op"], row["dtype"], row["size"])
                times[key][row["algorithm"]] = row["time_us"]
                if row["algorithm"] == TUNED:
                    ratios[key]["chosen"].append(row.get("chosen"))
        for key, t in times.items():
            named = {a: v for a, v in t.items() if a not in ("auto", TUNED)}
            best = min(named, key=named.get)
            ratios[key]["best"].append(best)
            for a in ("auto", TUNED):
                ratios[key][a].append(t[a] / named[best])
    if not ratios:
        return []
    medians = {a: {key: statistics.median(r[a]) for key, r in ratios.items()} for a in ("auto", TUNED)}
    lines = [f"{where.parent.parent.name} {where.parent.name}: {len(ratios)} (op, dtype, size), "
             f"{len(next(iter(ratios.values()))['auto'])} launches"]
    for a, m in medians.items():
        worst = max(m, key=m.get)
        lines.append(f"  {a:5} within 10% of the best: {sum(r <= 1.1 for r in m.values())} of {len(m)}; "
                     f"geometric mean {statistics.geometric_mean(m.values()):.3f}; worst {m[worst]:.2f} "
                     f"({worst[0]} {worst[1]} {worst[2] >> 20} MiB)")
    for key in sorted(ratios):
        r = ratios[key]
        lines.append(f"  {key[0]:14} {key[1]:9} {key[2] >> 20:3} MiB  "
                     + "  ".join(f"{a} {medians[a][key]:.2f} ({', '.join(f'{x:.2f}' for x in r[a])})"
                                 for a in ("auto", TUNED))
                     + f"  chose {', '.join(map(str, r['chosen']))}; best {', '.join(r['best'])}")
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=("run", "summary"))
    parser.add_argument("--procs", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    if args.command == "run":
        run(args.procs, args.repeat)
    for where in sorted(RESULTS.glob("*/p*/autotune")):
        print("\n".join(summary(where)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
