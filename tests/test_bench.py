"""The benchmark CLI at tiny sizes under mpiexec: the table's format, the
JSON schema and correctness (#wrong = 0 everywhere). Never timings."""
import json
import subprocess
import sys

import numpy as np
import pytest

from mpirun import launch

pytestmark = pytest.mark.mpi

ROW_FIELDS = 6 + 2 * 5          # case columns + two groups of 5
JSON_KEYS = {"op", "algorithm", "dtype", "redop", "root", "size", "count", "inplace",
             "time_us", "algbw", "busbw", "wrong", "iters"}
FACTORS = {"allreduce": lambda p: 2 * (p - 1) / p, "broadcast": lambda p: 1.0,
           "reduce": lambda p: 1.0, "scan": lambda p: 1.0}


def data_rows(text):
    """The table's data rows, split into fields ("n/a" groups padded)."""
    rows = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        fields = line.split()
        if "n/a" in fields:
            i = fields.index("n/a")
            fields[i:i + 1] = ["n/a"] * 5
            if "n/a" in fields[i + 5:]:
                j = fields.index("n/a", i + 5)
                fields[j:j + 1] = ["n/a"] * 5
        rows.append(fields)
    return rows


def test_cli_every_dtype_and_redop():
    """-d all -o all: native runs MPI's logical ops on bool (MPI defines no
    SUM there), complex AVG is checked against a component-wise division
    (as pycoll divides), and complex128 keeps its own column."""
    proc = launch(3, ["-m", "pycoll.bench", "all", "-b", "8", "-e", "64", "-f", "8", "-n", "1",
                      "-w", "1", "-a", "native,auto", "-d", "all", "-o", "all"], timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "# Out of bounds values : 0 OK" in proc.stdout
    rows = data_rows(proc.stdout)
    assert rows and all(len(r) == ROW_FIELDS for r in rows), [r for r in rows if len(r) != ROW_FIELDS][:3]
    assert all(r[9] in ("0", "n/a") and r[14] in ("0", "n/a") for r in rows)
    native_bool = {r[3] for r in rows if r[2] == "bool" and r[3] != "none" and r[5] == "native"
                   and r[6] != "n/a"}
    assert native_bool == {"sum", "prod", "max", "min", "band", "bor", "bxor"}, native_bool
    assert any(r[2] == "complex128" and r[3] == "avg" for r in rows)


@pytest.mark.parametrize("p", [1, 3])
def test_cli_scan(tmp_path, p):
    """scan, by name: every algorithm and native (MPI_Scan, MPI's logical
    ops on bool), in and out of place, each rank's prefix checked; busbw
    factor 1."""
    out = tmp_path / "scan.json"
    proc = launch(p, ["-m", "pycoll.bench", "scan", "-b", "8", "-e", "4K", "-f", "8", "-n", "2",
                      "-w", "1", "-a", "all", "-d", "float32,bfloat16,int32,bool", "-o", "all",
                      "--json", out], timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "# Out of bounds values : 0 OK" in proc.stdout
    rows = json.loads(out.read_text())["rows"]
    assert {row["algorithm"] for row in rows} == {"native", "auto", "recursive_doubling", "linear"}
    assert {row["inplace"] for row in rows} == {False, True}
    assert {row["redop"] for row in rows if row["dtype"] == "bool"} == {
        "sum", "prod", "max", "min", "band", "bor", "bxor"}
    for row in rows:
        assert row["op"] == "scan" and row["root"] == -1 and row["wrong"] == 0, row
        assert row["busbw"] == pytest.approx(row["algbw"])
    assert not any(row["algorithm"] == "native" and row["dtype"] == "bfloat16" for row in rows)


@pytest.mark.parametrize("p", [1, 2, 3])
def test_cli_sweep_every_op_and_algorithm(tmp_path, p):
    out = tmp_path / "run.json"
    proc = launch(p, ["-m", "pycoll.bench", "all", "-b", "8", "-e", "4K", "-f", "8", "-n", "2",
                      "-w", "1", "-a", "all", "-d", "float32,bfloat16,int32", "-o", "sum,max",
                      "-r", str(p - 1), "--json", out], timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    text = proc.stdout
    assert f"benchmark on {p} ranks" in text and "MPI" in text and "dtype float32,bfloat16,int32" in text
    assert "# Out of bounds values : 0 OK" in text
    assert "# Avg bus bandwidth    :" in text
    rows = data_rows(text)
    assert rows and all(len(r) == ROW_FIELDS for r in rows), [r for r in rows if len(r) != ROW_FIELDS][:3]
    for r in rows:
        for wrong in (r[9], r[14]):
            assert wrong in ("0", "n/a"), r
    data = json.loads(out.read_text())
    assert {"mpi", "p", "pycoll", "date"} <= set(data["meta"]) and data["meta"]["p"] == p
    # "tuned" rows also say what autotune chose (None: not tuned, too small)
    assert data["rows"] and all(set(row) == JSON_KEYS | ({"chosen"} if row["algorithm"] == "tuned"
                                                         else set()) for row in data["rows"])
    assert all(row["chosen"] is None for row in data["rows"] if row["algorithm"] == "tuned")
    assert all(row["wrong"] == 0 for row in data["rows"])
    seen = {(row["op"], row["algorithm"]) for row in data["rows"]}
    from pycoll.algorithms import ALGORITHMS
    for op in ("allreduce", "broadcast", "reduce", "gather", "scatter", "allgather",
               "reduce_scatter", "alltoall"):
        tuned = ("tuned",) if op in ("allreduce", "reduce", "reduce_scatter") else ()
        for algorithm in ("auto", "native", *tuned, *ALGORITHMS[op]):
            assert (op, algorithm) in seen, (op, algorithm)
        assert tuned or (op, "tuned") not in seen
    assert not any(op == "scan" for op, _ in seen), "all is nccl-tests' eight collectives"
    for row in data["rows"]:
        if row["time_us"] > 0:
            assert row["algbw"] == pytest.approx(row["size"] / row["time_us"] / 1e3)
        if row["op"] in FACTORS:
            assert row["busbw"] == pytest.approx(row["algbw"] * FACTORS[row["op"]](p))
        if row["op"] in ("gather", "scatter", "allgather", "reduce_scatter", "alltoall"):
            assert row["size"] % p == 0            # rounded to p blocks
        assert row["root"] == (p - 1 if row["op"] in ("broadcast", "reduce", "gather", "scatter") else -1)
    # native reduces neither bfloat16 nor AVG: those rows are n/a, not rows
    assert not any(r["algorithm"] == "native" and r["dtype"] == "bfloat16"
                   and r["op"] in ("allreduce", "reduce", "reduce_scatter", "scan")
                   for r in data["rows"])
    if p == 2:
        # the plot of allreduce's rows (3 panels): all 24 take 9 s here
        png, few = tmp_path / "busbw.png", tmp_path / "allreduce.json"
        few.write_text(json.dumps({**data, "rows": [r for r in data["rows"] if r["op"] == "allreduce"]}))
        pytest.importorskip("matplotlib")
        plot = subprocess.run([sys.executable, "-m", "pycoll.bench", "plot", str(few), "-o", str(png)],
                              capture_output=True, text=True, timeout=120)
        assert plot.returncode == 0, plot.stderr
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("p", [2, 3])
def test_round_us_times_more_iterations_of_small_messages(tmp_path, p):
    # -T 50000: a round of n = 2 calls of an 8-byte allreduce lasts far less
    # than 50 ms, so every case runs more iterations, as many on every rank
    # (else the launch would hang or fail), and still computes right.
    out = tmp_path / "run.json"
    proc = launch(p, ["-m", "pycoll.bench", "allreduce", "-b", "8", "-e", "64", "-f", "8",
                      "-n", "2", "-w", "3", "-R", "1", "-T", "50000", "-a", "auto,ring,native",
                      "--json", out], timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    data = json.loads(out.read_text())
    assert data["meta"]["round_us"] == 50000
    rows = data["rows"]
    assert len(rows) == 2 * 3 * 2 and all(r["wrong"] == 0 for r in rows)
    assert all(2 < r["iters"] <= 100_000 for r in rows), [r["iters"] for r in rows]
    # ... and as many in every case at a size (Note [Equal rounds])
    for size in (8, 64):
        assert len({r["iters"] for r in rows if r["size"] == size}) == 1, rows
    # without -T, exactly n
    proc = launch(p, ["-m", "pycoll.bench", "allreduce", "-b", "8", "-e", "8", "-n", "2", "-w", "1",
                      "-a", "ring", "--json", out], timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert {r["iters"] for r in json.loads(out.read_text())["rows"]} == {2}


@pytest.mark.parametrize("p", [2])
def test_tuned_is_timed_on_its_choice(tmp_path, p):
    # -a tuned: auto on a Communicator(autotune=True), warmed up until its
    # trials have chosen; the row names the choice, one of the candidates.
    # (p = 3 took 25 s of CI's 20 minutes, warming 1 MiB trials on three
    # ranks of two cores; the harness is the same at any p, and the
    # trials' agreement at p = 3 and 5 is test_collectives' test_autotune.)
    from pycoll import tuning
    from pycoll._comm import Settings
    out = tmp_path / "run.json"
    proc = launch(p, ["-m", "pycoll.bench", "allreduce", "-b", "1M", "-e", "1M", "-n", "2", "-w", "1",
                      "-R", "1", "-a", "tuned,auto", "--json", out],
                  timeout=240, env={"PYCOLL_SEGMENT_BYTES": None})   # as candidates() below
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = json.loads(out.read_text())["rows"]
    assert {r["algorithm"] for r in rows} == {"tuned", "auto"} and all(r["wrong"] == 0 for r in rows)
    candidates = tuning.candidates("allreduce", 1 << 20, p, Settings(), "float32")
    assert len(candidates) > 1, candidates
    assert all(r["chosen"] in candidates for r in rows if r["algorithm"] == "tuned"), rows
    assert all("chosen" not in r for r in rows if r["algorithm"] == "auto")


@pytest.mark.parametrize("p", [2, 3])
def test_equal_counts_time_the_dtypes_at_one_count(tmp_path, p):
    # -E: every dtype at the first one's element count (sizes are the first
    # dtype's bytes), all in one table, each result checked. BAND is not
    # defined for float16: that pair is skipped, int32 still runs.
    out = tmp_path / "run.json"
    proc = launch(p, ["-m", "pycoll.bench", "allreduce", "-b", "64", "-e", "4K", "-f", "8",
                      "-n", "2", "-w", "1", "-R", "2", "-E", "-d", "float32,float16,int32",
                      "-o", "sum,band", "-a", "ring,native", "--json", out], timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "(equal counts)" in proc.stdout and "# Out of bounds values : 0 OK" in proc.stdout
    assert "allreduce float16: skipped, BAND is not defined for float16" in proc.stdout
    rows = json.loads(out.read_text())["rows"]
    assert all(r["wrong"] == 0 for r in rows)
    counts = {}
    for r in rows:
        counts.setdefault((r["redop"], r["count"]), set()).add(r["dtype"])
        assert r["size"] == r["count"] * {"float32": 4, "float16": 2, "int32": 4}[r["dtype"]]
    assert sorted(c for redop, c in counts if redop == "sum") == [16, 128, 1024]
    for (redop, count), dtypes in counts.items():
        assert dtypes == ({"float32", "float16", "int32"} if redop == "sum" else {"int32"})


@pytest.mark.parametrize("p, memory", [(2, "huge"), (3, "huge"), (2, "small")])
def test_memory_modes_run_every_case_on_their_buffers(tmp_path, p, memory):
    # -M huge: buffers from pycoll.empty (huge pages from 256 KiB); -M
    # small: all on 4 KiB pages. Every result still checked; the meta
    # says which memory the run used.
    out = tmp_path / "run.json"
    proc = launch(p, ["-m", "pycoll.bench", "allreduce", "-b", "64K", "-e", "1M", "-f", "16",
                      "-n", "2", "-w", "1", "-M", memory, "-a", "ring,rabenseifner,native",
                      "--json", out], timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert f"memory {memory}" in proc.stdout and "# Out of bounds values : 0 OK" in proc.stdout
    data = json.loads(out.read_text())
    assert data["meta"]["memory"] == memory
    assert len(data["rows"]) == 2 * 3 * 2 and all(r["wrong"] == 0 for r in data["rows"])


def vm_flags(a) -> set:
    """The VmFlags of the memory maps array a spans (Linux): "hg" for
    MADV_HUGEPAGE, "nh" for MADV_NOHUGEPAGE."""
    lo, hi, flags, inside = a.ctypes.data, a.ctypes.data + a.nbytes, set(), False
    with open("/proc/self/smaps") as f:
        for line in f:
            fields = line.split()
            if len(fields) >= 5 and "-" in fields[0] and ":" not in fields[0]:
                start, end = (int(x, 16) for x in fields[0].split("-"))
                inside = end > lo and start < hi
            elif inside and fields[0] == "VmFlags:":
                flags.update(fields[1:])
    return flags


def test_bench_buffers_by_memory_mode():
    import mmap

    from pycoll._dtypes import Op
    from pycoll._memory import HUGE_FROM, HUGE_PAGE
    from pycoll.bench.ops import SPECS, Bench
    if not hasattr(mmap, "MADV_HUGEPAGE"):
        pytest.skip("no MADV_HUGEPAGE here: pycoll.empty is numpy.empty")
    benches = {m: Bench(SPECS["allreduce"], "float32", HUGE_FROM // 4, 2, 0, 0, Op.SUM, memory=m)
               for m in ("numpy", "huge", "small")}
    for b in benches.values():
        assert b.send.shape == b.recv.shape == (HUGE_FROM // 4,) and b.send.dtype == np.float32
        assert not b.send.any() and not b.recv.any()
    huge, small = benches["huge"], benches["small"]
    assert huge.send.ctypes.data % HUGE_PAGE == 0 and huge.recv.ctypes.data % HUGE_PAGE == 0
    # Each small-pages buffer is a mapping of its own, advised against huge pages.
    assert small.send.ctypes.data % mmap.PAGESIZE == 0 and small.recv.ctypes.data % mmap.PAGESIZE == 0
    assert "nh" in vm_flags(small.send) and "hg" not in vm_flags(small.send)
    assert "hg" in vm_flags(huge.send) and "nh" not in vm_flags(huge.send)


@pytest.mark.parametrize("argv,message", [
    (["allreduce", "-d", "float128"], "unknown dtype float128"),
    (["allreduce", "-o", "band"], "-o band is not defined for float32"),
    (["allreduce", "-o", "mean"], "unknown op 'mean'"),
    (["allreduce", "-a", "bruck"], "allreduce has no algorithm bruck"),
    (["broadcast", "-b", "1q"], "'1q' is not a size"),        # quoted as given
    (["allgather", "-f", "1"], "step factor must be at least 2"),
    (["allgather", "-b", "1M", "-e", "1K"], "is larger than -e"),
    (["frobnicate"], "invalid choice: 'frobnicate'"),
    (["allreduce", "-T", "-5"], "-w and -T at least 0"),
    (["allreduce", "-T", "1000", "-w", "1"], "-T needs -w 2 or more"),
])
def test_bad_flags_are_argparse_errors(argv, message):
    proc = subprocess.run([sys.executable, "-m", "pycoll.bench", *argv], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr


def test_plot_of_a_file_it_cannot_use_is_a_usage_error(tmp_path):
    pytest.importorskip("matplotlib")
    (tmp_path / "other.json").write_text('{"rows": []}')
    (tmp_path / "table.txt").write_text("#  size  count\n")
    for name, message in [("missing.json", "cannot read"), ("table.txt", "cannot read"),
                          ("other.json", "is not a file written by --json")]:
        proc = subprocess.run([sys.executable, "-m", "pycoll.bench", "plot", str(tmp_path / name),
                               "-o", str(tmp_path / "out.png")], capture_output=True, text=True,
                              timeout=120)
        assert proc.returncode == 2 and message in proc.stderr and name in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr, proc.stderr
    # an output it cannot write: no such directory, a format matplotlib lacks
    good = tmp_path / "good.json"
    proc = launch(1, ["-m", "pycoll.bench", "allreduce", "-e", "16", "--json", good], timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    for out, message in [(tmp_path / "no" / "such.png", "No such file or directory"),
                         (tmp_path / "out.qqq", "Format 'qqq' is not supported")]:
        proc = subprocess.run([sys.executable, "-m", "pycoll.bench", "plot", str(good), "-o", str(out)],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2 and f"cannot write {out}" in proc.stderr, proc.stderr
        assert message in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_too_large_a_size_is_refused_up_front():
    proc = launch(2, ["-m", "pycoll.bench", "allreduce", "-b", "256G", "-e", "256G"], timeout=60)
    assert proc.returncode == 2
    assert "-e 274877906944 needs about" in proc.stderr and "bytes available" in proc.stderr


def test_a_json_path_it_cannot_write_is_refused_up_front(tmp_path):
    """--json is written by rank 0 after the sweep: a path it cannot write
    is a usage error on every rank before any case runs."""
    for path, message in [(tmp_path / "no" / "such.json", "no directory"),
                          (tmp_path, "is a directory")]:
        proc = launch(2, ["-m", "pycoll.bench", "allreduce", "-e", "16", "--json", path], timeout=120)
        assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
        assert f"error: --json {path}: {message}" in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr and "allreduce" not in proc.stdout, proc.stdout


@pytest.mark.parametrize("mode", [[], ["--async"], ["--input", "memoryview"]])
def test_latency_script_runs_every_collective(mode):
    """bench/latency.py --collective all at p = 2: one JSON line per
    collective, in order, with both sides' times (the script itself; its
    numbers are for bench/NOTES.md)."""
    proc = launch(2, ["bench/latency.py", "--collective", "all", "--rounds", "2",
                      "--calls", "20", *mode], timeout=120)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    results = [json.loads(line) for line in proc.stdout.strip().splitlines()]
    assert [r["collective"] for r in results] == [
        "allreduce", "reduce", "broadcast", "gather", "scatter", "allgather",
        "reduce_scatter", "alltoall", "scan", "barrier"], proc.stdout
    for result in results:
        assert result["async"] == ("--async" in mode)
        assert result["pycoll_us"] > 0 and result["native_us"] > 0


def test_v_variants_script_runs():
    """bench/v_variants.py at p = 3: a line per size, every case timed."""
    proc = launch(3, ["bench/v_variants.py", "--bytes", "16,4K", "--rounds", "1",
                      "--calls", "3"], timeout=120)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    lines = proc.stdout.strip().splitlines()
    assert [line.split(":")[0] for line in lines] == ["16 B, p = 3", "4096 B, p = 3"], lines
    for line in lines:
        assert line.count("sizes=") == 3 and "MPI_Alltoallv" in line, line


def test_latency_script_names_its_collectives(tmp_path):
    """Two named collectives: two lines, and --json writes their list; a
    name it does not know is refused."""
    out = tmp_path / "latency.json"
    proc = launch(2, ["bench/latency.py", "--collective", "scan,gather", "--rounds", "1",
                      "--calls", "5", "--json", out], timeout=120)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert [r["collective"] for r in json.loads(out.read_text())] == ["scan", "gather"]
    assert len(proc.stdout.strip().splitlines()) == 2, proc.stdout
    proc = launch(1, ["bench/latency.py", "--collective", "allreduce,bcast"], timeout=60)
    assert proc.returncode != 0 and "'bcast': expected allreduce, reduce" in proc.stderr, proc.stderr


def test_latency_script_broadcasts_into_none():
    """bench/latency.py --collective broadcast --into-none runs."""
    proc = launch(2, ["bench/latency.py", "--collective", "broadcast", "--rounds", "2",
                      "--calls", "20", "--into-none"], timeout=120)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1])["pycoll_us"] > 0


def test_latency_script_accumulates():
    """bench/latency.py --accumulate: the reductions on bfloat16 with
    accumulate="float32"; a collective that reduces nothing ignores it."""
    for collective, half in (("scan", True), ("reduce_scatter", True), ("gather", False)):
        proc = launch(2, ["bench/latency.py", "--collective", collective, "--rounds", "2",
                          "--calls", "20", "--accumulate"], timeout=120)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        result = json.loads(proc.stdout.strip().splitlines()[-1])
        assert result["accumulate"] is half and result["pycoll_us"] > 0, result


@pytest.mark.parametrize("flag", ["ragged", "in_place"])
def test_latency_script_gathers_ragged_and_in_place(flag):
    """bench/latency.py --ragged (gather and allgather with sizes= against
    native Gatherv and Allgatherv) and --in-place (x in its own block of
    out, against native IN_PLACE); other collectives ignore them."""
    for collective, used in (("gather", True), ("allgather", True), ("scatter", False)):
        proc = launch(2, ["bench/latency.py", "--collective", collective, "--rounds", "2",
                          "--calls", "20", "--" + flag.replace("_", "-")], timeout=120)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        result = json.loads(proc.stdout.strip().splitlines()[-1])
        assert result[flag] is used and result["pycoll_us"] > 0, result


def test_fusion_small_script():
    """bench/fusion_small.py at p = 2: one JSON line per case, every
    variant timed (its numbers are for the README's fusion section)."""
    proc = launch(2, ["bench/fusion_small.py", "--rounds", "1", "--calls", "5"], timeout=120)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    lines = [json.loads(line) for line in proc.stdout.strip().splitlines()]
    assert len(lines) == 6 and all(d["p"] == 2 for d in lines)
    assert all(d["fused_us"] > 0 and d["per_array_us"] > 0 and d["flat_us"] > 0 for d in lines)
    assert lines[3]["split_indices"] == [4] and lines[3]["ways"] == ["pack"]


def test_latency_script_out_like_input_and_allreduce_in_place():
    """bench/latency.py --out-input (out= of the --input kind) and
    --in-place for allreduce (out=x, against native IN_PLACE)."""
    for extra, in_place in (([], False), (["--in-place"], True)):
        proc = launch(2, ["bench/latency.py", "--collective", "allreduce", "--rounds", "2",
                          "--calls", "20", "--input", "memoryview", "--out-input", *extra],
                      timeout=120)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        result = json.loads(proc.stdout.strip().splitlines()[-1])
        assert result["out_input"] and result["in_place"] is in_place and result["pycoll_us"] > 0


def test_fusion_zero_script():
    """bench/fusion_zero.py at p = 2: one JSON line per case asked for,
    every variant timed, and how the reduce_scatter went (its numbers are
    for the README's fusion section)."""
    proc = launch(2, ["bench/fusion_zero.py", "--rounds", "1", "--calls", "5",
                      "--cases", "2 x 8 B,8 x 1 MiB"], timeout=120)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    lines = [json.loads(line) for line in proc.stdout.strip().splitlines()]
    assert [d["case"] for d in lines] == ["2 x 8 B", "8 x 1 MiB"]
    for d in lines:
        assert all(d[f"{way}_{op}_us"] > 0 for way in ("fused", "per_array", "flat")
                   for op in ("rs", "ag")), d
    assert lines[0]["arrays_alone"] == 0 and lines[1]["arrays_alone"] == 8, lines
