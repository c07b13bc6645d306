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


def test_calibration_table_scores_the_segments_as_the_calibration_did(tmp_path, monkeypatch):
    """One row per calibration: the half types' kernel cost, each
    candidate segment's mean time relative to the fastest, the segment kept
    (the smallest within SEGMENT_TIE of the best score)."""
    from pycoll import tuning
    one, four = 1 << 20, 4 << 20
    segments = {str(one): {"a": 1.2, "b": 2.0}, str(four): {"a": 1.0, "b": 2.04}}
    kept = tuning.choose_reduce_segment({int(c): t for c, t in segments.items()})
    where = tmp_path / "mpich-5.0.2" / "p2"
    where.mkdir(parents=True)
    (where / "tuning.json").write_text(json.dumps({
        "mpi": "MPICH Version: 5.0.2", "p": 2, "date": "2026-11-26T04:06:37+00:00",
        "params": {"kernel_cost": {"float32": 1.0, "float16": 1.631, "bfloat16": 1.297},
                   "reduce_segment": kept},
        "segments": segments}))
    (tmp_path / "openmpi-5.0.11" / "p4").mkdir(parents=True)       # no calibration: no row
    monkeypatch.setattr(perf_report, "RESULTS", tmp_path)
    lines = perf_report.calibration_section()
    assert lines[0] == perf_report.CALIBRATION_BEGIN and lines[-1] == perf_report.CALIBRATION_END
    rows = [line for line in lines if line.startswith("| MPICH")]
    # 1 MiB: (1.2/1.0 + 2.0/2.0) / 2 = 1.100; 4 MiB: (1.0 + 2.04/2.0) / 2 = 1.010.
    assert rows == ["| MPICH Version: 5.0.2, p = 2 | 2026-11-26 | 1.63× | 1.30× | 1.100 | 1.010 | 4 MiB |"]
    assert kept == four
    assert "1 MiB segments | 4 MiB segments" in lines[2]
