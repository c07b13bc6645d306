"""bench/perf_report.py's "auto within 10%" rows: a ratio from each launch,
the median over launches, like every other target. No MPI."""
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
import perf_report  # noqa: E402


def write_runs(where: Path, launches: list) -> None:
    """One allreduce sweep per launch: {algorithm: µs} at 4 KiB, float32."""
    for k, times in enumerate(launches, 1):
        rows = [{"op": "allreduce", "algorithm": a, "dtype": "float32", "size": 4096,
                 "inplace": False, "time_us": t, "busbw": 1.0} for a, t in times.items()]
        meta = {"mpi": "MPICH Version: 5.0.2", "date": "2026-11-25"}
        (where / f"allreduce_run{k}.json").write_text(json.dumps({"meta": meta, "rows": rows}))


def auto_row(where: Path) -> str:
    rows = perf_report.targets(perf_report.Runs(where), 2)
    return next(m for t, m, v in rows if t.startswith("auto within 10%"))


def test_one_slow_launch_cancels(tmp_path):
    # Launch 1 is slow for auto only, launch 2 for ring only: the medians
    # of the times say auto is 1.18x ring; each launch but the first says 1.0.
    write_runs(tmp_path, [{"auto": 5.9, "ring": 4.6, "tree": 9.0},
                          {"auto": 5.4, "ring": 5.4, "tree": 9.0},
                          {"auto": 4.4, "ring": 4.4, "tree": 9.0}])
    assert auto_row(tmp_path).startswith("1 of 1 ")
    assert perf_report.Runs(tmp_path).ratio("allreduce", "allreduce", "float32", 4096,
                                            "auto", "ring", key="time_us") == pytest.approx(1.0)


def test_auto_behind_in_every_launch_is_a_miss(tmp_path):
    write_runs(tmp_path, [{"auto": 6.0, "ring": 5.0, "tree": 9.0},
                          {"auto": 3.0, "ring": 2.5, "tree": 9.0},
                          {"auto": 12.0, "ring": 10.0, "tree": 9.5}])
    # ring has the lowest median time (5.0 against tree's 9.0), and auto
    # takes 1.2x ring's time in every launch, though tree won the third.
    row = auto_row(tmp_path)
    assert row.startswith("0 of 1 ") and "worst 1.20×" in row


def test_autotune_summary_counts_each_launchs_ratios(tmp_path):
    """bench/autotune.py summary: auto's and tuned's time over the best
    named algorithm of the same launch, the median over launches."""
    import autotune
    where = tmp_path / "mpich-5.0.2" / "p2" / "autotune"
    where.mkdir(parents=True)
    launches = [{"auto": 12.0, "tuned": 10.0, "ring": 10.0, "tree": 11.0},
                {"auto": 10.0, "tuned": 15.0, "ring": 20.0, "tree": 10.0},
                {"auto": 13.0, "tuned": 10.5, "ring": 10.0, "tree": 30.0}]
    for k, times in enumerate(launches, 1):
        rows = [{"op": "allreduce", "algorithm": a, "dtype": "float32", "size": 1 << 20,
                 "inplace": False, "time_us": t, **({"chosen": "ring"} if a == "tuned" else {})}
                for a, t in times.items()]
        (where / f"allreduce_run{k}.json").write_text(json.dumps({"rows": rows}))
    lines = autotune.summary(where)
    assert lines[0] == "mpich-5.0.2 p2: 1 (op, dtype, size), 3 launches"
    # auto: 1.2, 1.0, 1.3 -> 1.2, outside 10%; tuned: 1.0, 1.5, 1.05 -> 1.05
    assert "auto  within 10% of the best: 0 of 1; geometric mean 1.200" in lines[1]
    assert "tuned within 10% of the best: 1 of 1; geometric mean 1.050" in lines[2]
    assert "chose ring, ring, ring; best ring, tree, ring" in lines[3]
