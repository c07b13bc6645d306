"""The cost model and its calibration."""
import json
import math
import subprocess
import sys

import pytest

from mpirun import launch
from pycoll import tuning
from pycoll._comm import Settings
from pycoll.algorithms import ALGORITHMS, REGISTRY


def test_fit_recovers_known_parameters():
    alpha, beta, gamma = 7e-6, 1.5e-10, 3e-11
    samples = [(s, w, r, s * alpha + w * beta + r * gamma)
               for s, w, r in [(1, 8, 4), (1, 1e3, 5e2), (2, 1e5, 5e4), (2, 1e6, 5e5), (3, 1e7, 2e6)]]
    got = tuning.fit(samples, gamma)
    assert got == pytest.approx((alpha, beta), rel=1e-6)


def test_fit_is_non_negative():
    # times that fall with size cannot be a positive slope
    samples = [(1, 1e3, 0, 5e-6), (1, 1e6, 0, 4e-6)]
    alpha, beta = tuning.fit(samples, 3e-11)
    assert alpha >= 0 and beta >= 0


def test_select_is_the_argmin_of_the_model():
    settings = Settings()
    for collective, names in ALGORITHMS.items():
        for n in (8, 1 << 16, 1 << 20, 1 << 26):
            for p in (2, 3, 8):
                pick = tuning.select(collective, n, p, settings, "float32")
                times = {a: tuning.modelled_time(collective, a, n, p, None, "float32") for a in names}
                assert times[pick] == min(times.values())


def test_half_types_cost_more_per_reduced_byte():
    assert tuning.gamma(tuning.DEFAULT_PARAMS, "bfloat16") > tuning.gamma(tuning.DEFAULT_PARAMS, "float32")
    t32 = tuning.modelled_time("allreduce", "ring", 1 << 20, 4, None, "float32")
    t16 = tuning.modelled_time("allreduce", "ring", 1 << 20, 4, None, "bfloat16")
    assert t16 > t32


def test_a_pipelined_chain_counts_its_segments():
    """Note [Pipelined chains]: m segments take p - 2 + m segment times."""
    module = REGISTRY["broadcast"]["pipeline"]
    n = 16 << 10                                # below a segment: one message, 3 links
    assert tuning.terms("broadcast", "pipeline", n, 4) == (3, 3 * n, 0)
    n = 64 << 20
    seg = tuning.pipeline_segment("broadcast", "pipeline", n, 4)
    m = -(-n // seg)
    assert m > 1
    steps, wire, _ = tuning.terms("broadcast", "pipeline", n, 4)
    assert steps == 2 + m and wire == pytest.approx(n * (2 + m) / m)
    assert tuning.segment("broadcast", "pipeline", n, 4, Settings()) == seg
    # a chain of two ranks is one message: the module's own terms
    for n in (0, 8, 64 << 20):
        assert tuning.terms("broadcast", "pipeline", n, 2) == (
            module.steps(2), module.bytes_on_wire(n, 2), 0)
    # the chain's reductions are counted per segment too (scan)
    steps, wire, reduced = tuning.terms("scan", "linear", 1000, 5)
    assert (steps, wire, reduced) == (4, 4000, 4000)
    settings = Settings()
    for n in (1 << 10, 16 << 10, 64 << 10):
        assert tuning.select("broadcast", n, 4, settings) == "binomial"
    # at p = 3 the tree's two children copy at once: one level, where the
    # chain passes the data on twice
    for n in (16 << 10, 256 << 10, 4 << 20):
        assert tuning.select("broadcast", n, 3, settings) == "binomial"


def test_uncalibrated_scatter_sends_large_blocks_straight():
    """Without a calibration, p = 4: the linear scatter from 256 KiB blocks,
    whose receivers copy their blocks at once (scatter_linear's terms), the
    binomial tree at 64 KiB."""
    settings = Settings()
    assert tuning.select("scatter", 64 << 10, 4, settings) == "binomial"
    for n in (256 << 10, 1 << 20, 4 << 20):
        assert tuning.select("scatter", n, 4, settings) == "linear"


def test_override_and_segment_rules():
    settings = Settings(algorithms={"allreduce": "tree"})
    assert tuning.select("allreduce", 1 << 20, 4, settings) == "tree"
    plain = Settings()
    assert tuning.segment("allreduce", "ring", 1 << 24, 4, plain) == tuning.REDUCE_SEGMENT
    assert tuning.segment("allgather", "ring", 1 << 24, 4, plain) == tuning.WHOLE
    assert tuning.segment("broadcast", "pipeline", 1 << 24, 2, plain) == tuning.WHOLE
    pipelined = tuning.segment("broadcast", "pipeline", 1 << 26, 8, plain)
    assert tuning.MIN_PIPELINE_SEGMENT <= pipelined <= tuning.MAX_PIPELINE_SEGMENT
    for n in (1000, 237983 * 7, 1 << 26):
        assert tuning.segment("scan", "linear", n, 5, plain) % 64 == 0
    assert tuning.segment("allreduce", "ring", 1 << 24, 4, Settings(segment_bytes=256)) == 256


def test_pipeline_segments_take_the_per_message_alpha():
    """A pipelined chain's segment comes from the per-message alpha of the
    "small" fit, not from a big-vector fit's intercept, which a calibration
    may clamp to 0 (MPICH p = 4 did, and its broadcasts ran 64 KiB
    segments at 64 MiB, 0.46x native)."""
    fit = {"tiny": (2.1e-05, 1.8e-10), "small": (2.0e-05, 2.2e-10),
           "large": (0.0, 4.8e-10), "huge": (0.0, 2.0e-10)}
    settings = Settings(params=tuning.merge_params({"algorithms": {"broadcast": {"pipeline": fit}}}))
    for n in (16 << 20, 64 << 20):
        alpha, beta = fit["small"][0], fit[tuning.regime(n)][1]
        best = math.sqrt(n * alpha / (2 * beta))        # p = 4: two links behind the first
        got = tuning.segment("broadcast", "pipeline", n, 4, settings)
        assert tuning.MIN_PIPELINE_SEGMENT < got <= tuning.MAX_PIPELINE_SEGMENT, (n, got)
        assert abs(got - best) <= 64, (n, got, best)
        assert got % 64 == 0


def test_reduction_segment_is_the_calibrations():
    """Note [Reduction segments]: reductions cut their transfers at the
    calibration's reduce_segment; data movement stays whole; a calibration
    from before the segment was measured keeps the 1 MiB it was made with."""
    plain = Settings()
    assert tuning.DEFAULT_PARAMS["reduce_segment"] == tuning.REDUCE_SEGMENT
    algorithms = {"allreduce": {"ring": {"small": [1e-6, 2e-10], "large": [2e-6, 1e-10]}}}
    tuned = Settings(params=tuning.merge_params({"reduce_segment": 4 << 20, "algorithms": algorithms}))
    legacy = Settings(params=tuning.merge_params({"algorithms": algorithms}))
    broken = Settings(params=tuning.merge_params({"reduce_segment": "big", "algorithms": algorithms}))
    for collective, algorithm in (("allreduce", "ring"), ("allreduce", "recursive_doubling"),
                                  ("reduce", "binomial"), ("reduce_scatter", "ring")):
        assert tuning.segment(collective, algorithm, 1 << 26, 4, plain) == tuning.REDUCE_SEGMENT
        assert tuning.segment(collective, algorithm, 1 << 26, 4, tuned) == 4 << 20
        assert tuning.segment(collective, algorithm, 1 << 26, 4, legacy) == tuning.LEGACY_REDUCE_SEGMENT
        assert tuning.segment(collective, algorithm, 1 << 26, 4, broken) == tuning.REDUCE_SEGMENT
    assert tuning.segment("allgather", "ring", 1 << 26, 4, tuned) == tuning.WHOLE
    # PYCOLL_SEGMENT_BYTES overrides a calibration too.
    assert tuning.segment("allreduce", "ring", 1 << 26, 4,
                          Settings(segment_bytes=256, params=tuned.params)) == 256


def test_choose_reduce_segment_takes_the_smallest_of_the_fastest():
    cases = ("allreduce ring 4194304", "reduce binomial 16777216")
    one_mib, four, sixteen = 1 << 20, 4 << 20, 16 << 20
    # 16 MiB is fastest on both cases: it wins.
    times = {one_mib: dict(zip(cases, (1.3, 1.2))), four: dict(zip(cases, (1.1, 1.1))),
             sixteen: dict(zip(cases, (1.0, 1.0)))}
    assert tuning.choose_reduce_segment(times) == sixteen
    # 4 MiB within SEGMENT_TIE of 16 MiB: the smaller segment (less scratch) wins.
    times[four] = dict(zip(cases, (1.0, 1.0 + tuning.SEGMENT_TIE / 2)))
    assert tuning.choose_reduce_segment(times) == four
    # Scores are relative per case: a large case does not drown a small one.
    times = {one_mib: {"a": 1.0, "b": 100.0}, four: {"a": 2.0, "b": 99.0}}
    assert tuning.choose_reduce_segment(times) == one_mib
    with pytest.raises(ValueError, match="same timed cases"):
        tuning.choose_reduce_segment({one_mib: {"a": 1.0}, four: {"b": 1.0}})


def test_every_algorithm_has_default_parameters():
    for collective, names in ALGORITHMS.items():
        for name in names:
            pieces = tuning.DEFAULT_PARAMS["algorithms"][collective][name]
            assert set(pieces) == set(tuning.REGIMES)
            assert all(v >= 0 for pair in pieces.values() for v in pair)
            assert REGISTRY[collective][name].steps(4) >= 0


def test_cache_file_is_found_and_merged(tmp_path, monkeypatch):
    monkeypatch.setenv("PYCOLL_TUNE_DIR", str(tmp_path))
    version = "MPICH Version:      5.0.2\nMPICH Release date: ..."
    assert tuning.library_slug(version) == "mpich-5.0.2"
    assert tuning.library_slug("Open MPI v5.0.11, package: Open MPI") == "openmpi-5.0.11"
    assert tuning.load_params(version, 4) is None
    path = tuning.cache_path(version, 4)
    assert path.parent == tmp_path and path.name.endswith("-mpich-5.0.2-p4.json")
    path.write_text(json.dumps({"params": {"gamma": 1e-11, "kernel_cost": {"bfloat16": 3.0},
                                           "algorithms": {"allreduce": {"ring": {
                                               "small": [1e-6, 2e-10], "large": [2e-6, 1e-10]}}}}}))
    params = tuning.load_params(version, 4)
    assert params["gamma"] == 1e-11 and params["kernel_cost"]["bfloat16"] == 3.0
    assert params["algorithms"]["allreduce"]["ring"]["large"] == (2e-6, 1e-10)
    # A calibration made before the "huge" regime: "large" stands for it;
    # before "tiny", "small".
    assert params["algorithms"]["allreduce"]["ring"]["huge"] == (2e-6, 1e-10)
    assert params["algorithms"]["allreduce"]["ring"]["tiny"] == (1e-6, 2e-10)
    assert params["algorithms"]["allreduce"]["tree"] == tuning.DEFAULT_PARAMS["algorithms"]["allreduce"]["tree"]
    path.write_text("not json")
    assert tuning.load_params(version, 4) is None


@pytest.mark.parametrize("params", [
    {"algorithms": {}, "gamma": "abc"},
    {"algorithms": {}, "gamma": None},
    {"algorithms": {}, "kernel_cost": [1, 2]},
    {"algorithms": {}, "kernel_cost": {"float32": "x"}},
    {"algorithms": {"allreduce": []}},
    {"algorithms": {"allreduce": {"ring": {"small": [1e-6], "large": [1e-6, 1e-10]}}}},
    {"algorithms": {"allreduce": {"ring": {"small": "ab", "large": [1e-6, 1e-10]}}}},
], ids=["gamma str", "gamma null", "costs list", "cost str", "algorithms list", "short pair",
        "pair str"])
def test_a_calibration_this_version_cannot_read_is_ignored(tmp_path, monkeypatch, caplog, params):
    # Valid JSON with the wrong content (edited by hand, another version's):
    # the default parameters, and a warning. It used to raise from every
    # Communicator(), or on rank 0 alone, leaving the others waiting.
    monkeypatch.setenv("PYCOLL_TUNE_DIR", str(tmp_path))
    tuning.cache_path("MPICH Version: 5.0.2", 2).write_text(json.dumps({"params": params}))
    with caplog.at_level("WARNING", logger="pycoll"):
        assert tuning.load_params("MPICH Version: 5.0.2", 2) is None
    assert "does not hold parameters this version reads" in caplog.text


def test_no_home_directory_means_the_default_parameters(monkeypatch):
    monkeypatch.delenv("PYCOLL_TUNE_DIR", raising=False)

    def no_home():
        raise RuntimeError("Could not determine home directory.")
    monkeypatch.setattr(tuning.Path, "home", staticmethod(no_home))
    assert tuning.load_params("MPICH Version: 5.0.2", 2) is None


def test_regimes_split_at_eager_sizes_the_segment_and_the_cache():
    assert tuning.regime(0) == tuning.regime(tuning.TINY) == "tiny"
    assert tuning.regime(tuning.TINY + 1) == "small"
    assert tuning.regime(tuning.SPLIT) == "small"
    assert tuning.regime(tuning.SPLIT + 1) == "large"
    assert tuning.regime(tuning.HUGE) == "large"
    assert tuning.regime(tuning.HUGE + 1) == "huge"


def test_footprint_prices_the_bytes_at_the_cold_regime():
    """An array sent on its own inside a large bucket: its own alpha, the
    bucket's beta."""
    ring = tuning.DEFAULT_PARAMS["algorithms"]["allreduce"]["ring"]
    n, p = 256 << 10, 2
    hot = tuning.modelled_time("allreduce", "ring", n, p)
    cold = tuning.modelled_time("allreduce", "ring", n, p, footprint=64 << 20)
    wire = 2 * (p - 1) * n / p
    assert cold - hot == pytest.approx(wire * (ring["huge"][1] - ring["small"][1]))
    assert tuning.modelled_time("allreduce", "ring", n, p, footprint=n // 2) == hot


def test_a_bucket_copies_in_the_caches_up_to_huge():
    """Note [Copies in the caches]: the cached cost up to HUGE bytes, the
    memory's above; a calibration's values replace either."""
    params = tuning.DEFAULT_PARAMS
    assert tuning.pack_beta(params, 0) == tuning.pack_beta(params, tuning.HUGE) == tuning.PACK_BETA_CACHED
    assert tuning.pack_beta(params, tuning.HUGE + 1) == tuning.PACK_BETA
    assert tuning.PACK_BETA_CACHED < tuning.PACK_BETA
    mine = {"pack_beta": 1e-10, "pack_beta_cached": 3e-11}
    assert (tuning.pack_beta(mine, 1 << 20), tuning.pack_beta(mine, 64 << 20)) == (3e-11, 1e-10)


def test_fit_of_one_sample_grows_with_the_bytes():
    # One sample fits alpha alone and beta alone exactly; beta must win, or
    # a regime calibrated at one size would price every larger size the same.
    alpha, beta = tuning.fit([(1, 1 << 25, 0, 8e-3)], 0.0)
    assert alpha == 0 and beta == pytest.approx(8e-3 / (1 << 25))
    # Two samples on a line with an intercept: both parameters come back.
    alpha, beta = tuning.fit([(2, 1e6, 0, 2e-5 + 1e-4), (2, 4e6, 0, 2e-5 + 4e-4)], 0.0)
    assert alpha == pytest.approx(1e-5) and beta == pytest.approx(1e-10)


def test_one_low_reading_at_8_bytes_does_not_pick_the_tree():
    """The calibration's tiny sizes (pycoll/tune.py, SIZES): at p = 2 the
    tree takes about 1.18x recursive doubling's time at every tiny size;
    one reading of 0.84x at 8 B (seen in real calibrations) must not make
    the tree the model's pick below 1 KiB. With 8 B the only size under
    1 KiB, it did."""
    from pycoll.bench.harness import parse_size
    from pycoll.tune import SIZES

    p, gamma = 2, 2e-11
    tiny = [n for n in map(parse_size, SIZES) if tuning.regime(n) == "tiny"]

    def fitted(sizes):
        params = {"gamma": gamma, "kernel_cost": {"float32": 1.0}, "algorithms": {"allreduce": {}}}
        for name in ("recursive_doubling", "tree"):
            module = REGISTRY["allreduce"][name]
            samples = []
            for n in sizes:
                t = 3e-6 + n * 3e-10                       # recursive doubling, as the sweeps time it
                if name == "tree":
                    t *= 0.84 if n == 8 else 1.18
                samples.append((module.steps(p), module.bytes_on_wire(n, p), module.reduce_bytes(n, p), t))
            pieces = dict.fromkeys(tuning.REGIMES, tuning.fit(samples, gamma))
            params["algorithms"]["allreduce"][name] = pieces
        return {n: tuning.modelled_time("allreduce", "tree", n, p, params)
                / tuning.modelled_time("allreduce", "recursive_doubling", n, p, params)
                for n in (4, 64, 256)}

    assert len([n for n in tiny if n < 1024]) >= 3, tiny
    assert all(r > 1.0 for r in fitted(tiny).values()), fitted(tiny)
    assert any(r < 1.0 for r in fitted([8, 1024, 4096, 16384]).values())  # the old sizes


def test_kernel_gamma_is_a_cost_per_byte():
    g = tuning.kernel_gamma("float32", 1 << 16, repeat=2)
    assert 0 < g < 1e-8


@pytest.mark.mpi
def test_a_calibration_path_it_cannot_write_is_refused_up_front(tmp_path):
    (tmp_path / "file").write_text("")
    for out, message in [(tmp_path, "it is a directory"), (tmp_path / "file" / "tune.json", "File exists")]:
        proc = launch(2, ["-m", "pycoll.tune", "--sizes", "4", "--collectives", "broadcast",
                          "--out", out], timeout=120)
        assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
        assert f"cannot write the calibration to {out}" in proc.stderr and message in proc.stderr
        assert "Traceback" not in proc.stderr and "gamma" not in proc.stdout, proc.stdout


@pytest.mark.parametrize("argv,message", [
    (["--sizes", "1K,4x"], "argument --sizes: '4x' is not a size"),
    (["--sizes", "1K,-4"], "argument --sizes: size -4 is negative"),
    (["--segments", "1M,"], "argument --segments: '' is not a size"),
    (["--budget", "-1"], "argument --budget: '-1' is not a number of seconds above 0"),
    (["--budget", "nan"], "argument --budget: 'nan' is not a number of seconds above 0"),
    (["--collectives", "scan"], "--collectives: unknown scan"),
    # one process (a singleton MPI): every collective a local copy, no fit
    (["--sizes", "1K"], "one process has nothing to calibrate"),
])
def test_bad_tune_flags_are_argparse_errors(tmp_path, argv, message):
    out = tmp_path / "tune.json"
    proc = subprocess.run([sys.executable, "-m", "pycoll.tune", *argv, "--out", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and not out.exists(), proc.stderr


@pytest.mark.mpi
def test_calibration_writes_a_cache_the_communicator_loads(tmp_path, monkeypatch):
    out = tmp_path / "tune.json"
    proc = launch(2, ["-m", "pycoll.tune", "--sizes", "4,1K,64K", "--collectives", "allreduce,allgather",
                      "--segments", "4K,1M", "--budget", "0.002", "--out", out], timeout=240,
                  env={"PYCOLL_SEGMENT_BYTES": None})
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(out.read_text())
    assert data["p"] == 2 and set(data["params"]["algorithms"]) == {"allreduce", "allgather"}
    assert "measured" in proc.stdout and "model" in proc.stdout
    # Never an empty call (4 B is no float32 element per allgather block
    # at p = 2): at least one element everywhere.
    sizes = {n for points in data["measured"].values() for samples in points.values()
             for n, _ in samples}
    assert min(sizes) == 4, sorted(sizes)
    # The segment was chosen from both candidates, timed on the same cases
    # (only 64K is larger than the smaller one).
    segments = data["segments"]
    assert set(segments) == {"4096", "1048576"} and segments["4096"].keys() == segments["1048576"].keys()
    assert {case.split()[-1] for case in segments["4096"]} == {"65536"}
    assert data["params"]["reduce_segment"] == tuning.choose_reduce_segment(
        {int(c): cases for c, cases in segments.items()})
    # Where Communicators look for (this machine, this MPI, p = 2): copy it there.
    monkeypatch.setenv("PYCOLL_TUNE_DIR", str(tmp_path / "cache"))
    cache = tuning.cache_path(data["mpi"], 2)
    cache.parent.mkdir()
    cache.write_text(out.read_text())
    # one os.write per rank: print() lines from two ranks can interleave
    proc = launch(2, ["-c", "import os, numpy as np, pycoll; c = pycoll.Communicator(); "
                            "c.allreduce(np.ones(1 << 16, np.float32), algorithm='ring'); "
                            "plan, = c._plans.values(); "
                            "os.write(1, f\"GAMMA {c.settings.params['gamma']} "
                            "SEGMENT {plan.channel.segment}\\n\".encode())"],
                  timeout=120, env={"PYCOLL_TUNE_DIR": str(tmp_path / "cache"),
                                    "PYCOLL_SEGMENT_BYTES": None})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.count(f"GAMMA {data['params']['gamma']} "
                             f"SEGMENT {data['params']['reduce_segment']}") == 2
