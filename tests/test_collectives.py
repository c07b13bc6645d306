"""The collectives under mpiexec: the grid of mpi_cases.py at p = 1..8.

Each test is one launch of one group of cases on p ranks (about 0.3-8 s);
see mpi_cases.py for what a group checks and mpirun.py for how a launch is
bounded and judged. From p = 5 on, a group takes half of its (op, dtype)
pairs and array forms, the odd half at odd p and the even at even p (Note
[Wide launches] in mpi_cases.py).
"""
import subprocess
import sys
import time

import pytest

from mpirun import run_ranks

pytestmark = pytest.mark.mpi

PROCESS_COUNTS = [1, 2, 3, 4, 5, 7, 8]


@pytest.mark.parametrize("p", PROCESS_COUNTS)
def test_reductions(p):
    """allreduce, reduce, reduce_scatter, scan: every algorithm x every
    (op, dtype) x counts 0, 1, p-1, p+1, 1000 (multi-segment) x roots."""
    run_ranks(p, "reductions")


@pytest.mark.parametrize("p", PROCESS_COUNTS)
def test_movement(p):
    """broadcast, gather, scatter, allgather, alltoall, barrier: every
    algorithm x dtypes x counts x roots, uneven sizes, scalars."""
    run_ranks(p, "movement")


@pytest.mark.parametrize("p", PROCESS_COUNTS)
def test_special(p):
    """NaN payloads and signed zeros (bitwise identical everywhere),
    accumulate="float32", non-contiguous inputs, out= views, in place,
    communicator forms, torch tensors when torch is installed."""
    run_ranks(p, "special")


@pytest.mark.parametrize("p", [1, 2, 3, 5, 8])
def test_mixed(p):
    """Seeded random calls combining what the grids vary one at a time
    (layouts, out=, async_op, sizes=, roots, algorithms, counts), as
    bench/soak.py does at p = 4 (test_reliability.py), and beyond it:
    array-likes as x and out=, ragged sizes=, FusionManager calls, queues
    of async calls waited in a different order on each rank, p = 1 to 8.
    A strided out= that a large general-path call left unwritten passes
    every grid and fails here (and in the soak). The segment is 4 KiB
    (the grids' 256 B would cut the 70001-element calls too finely to be
    quick); MIXED_SEED and MIXED_CASES search further by hand."""
    run_ranks(p, "mixed", env={"PYCOLL_SEGMENT_BYTES": "4096"})


def test_mixed_in_checks_mode():
    """The same draws with checks mode on (PYCOLL_CHECKS=1): every form of
    every call agrees across ranks and gives the same results."""
    run_ranks(3, "mixed", env={"PYCOLL_SEGMENT_BYTES": "4096", "PYCOLL_CHECKS": "1"})


@pytest.mark.parametrize("p", [2, 3, 4])
def test_bfloat16_from_a_root_on_ranks_without_ml_dtypes(p):
    """pycoll imports ml_dtypes on first use of bfloat16: ranks that have
    not imported it receive the root's bfloat16 into None, broadcast and
    scatter, inline and whole, and forward it down the tree."""
    run_ranks(p, "bfloat16_first_heard")


@pytest.mark.parametrize("p", [1, 2, 3, 6, 8])
def test_small_message_lane(p):
    """Repeated small allreduces run in the C lane: every (op, dtype),
    in place and out=; strided, overlapping and read-only cases go to the
    Python path and still come out right."""
    run_ranks(p, "lane")


@pytest.mark.parametrize("p", [2, 3])
def test_lanes_with_the_tuners_segments(p):
    """The lanes with messages the tuner leaves whole (PYCOLL_SEGMENT_BYTES
    unset): the allgather lane's first step copies 80 KB blocks in place
    while both messages are in flight, in one C call."""
    run_ranks(p, "lane", env={"PYCOLL_SEGMENT_BYTES": None})


@pytest.mark.parametrize("p, transport", [(2, None), (3, None), (2, "mpi4py")])
def test_staged_sends(p, transport):
    """Sends from 4 KiB pages staged on huge pages (Note [Staging sends]):
    the same bits with staging on and off, on the lanes and on mpi4py's
    calls (the general path). The segment is the default one, so that
    messages of 256 KiB and more are whole and the lanes take them."""
    run_ranks(p, "staging", env={"PYCOLL_TRANSPORT": transport, "PYCOLL_SEGMENT_BYTES": None})


@pytest.mark.parametrize("p", [1, 2, 3, 5])
def test_autotune(p):
    """Communicator(autotune=True): allreduce (float32, bfloat16), reduce and
    reduce_scatter try their candidates, every call exact; the ranks choose
    alike, and drop a candidate that only the last rank times slow."""
    run_ranks(p, "autotune", env={"PYCOLL_SEGMENT_BYTES": None})


@pytest.mark.parametrize("p", [1, 3, 4])
def test_the_same_as_mpi4py(p):
    """README's "Coming from mpi4py" table: each mpi4py buffer call
    (Allreduce, IN_PLACE, Reduce, Scan, Exscan, Reduce_scatter(_block),
    Bcast, Gather(v), Allgather(v), Scatter(v), Alltoall, Barrier,
    Iallreduce) gives what its pycoll counterpart gives."""
    run_ranks(p, "against_mpi")


def test_mpi4py_transport():
    """PYCOLL_TRANSPORT=mpi4py: every message through mpi4py, same results."""
    run_ranks(3, "reductions", env={"PYCOLL_TRANSPORT": "mpi4py"})
    run_ranks(2, "lane", env={"PYCOLL_TRANSPORT": "mpi4py"})


@pytest.mark.parametrize("p", [1, 2, 3, 5, 8])
def test_errors(p):
    """Bad input raises on every rank before any message, errors on the
    root travel in the header, and the ranks still agree afterwards."""
    run_ranks(p, "errors")


def test_segments_hold_whole_elements():
    """A segment of 100 bytes (no multiple of 8 or 16) still cuts vectors
    between elements: the plans round it down (found by bench/soak.py)."""
    run_ranks(3, "reductions", env={"PYCOLL_SEGMENT_BYTES": "100"})


@pytest.mark.parametrize("p", [3, 8])
def test_default_segment_size(p):
    """The grid once more with the default segment size instead of the
    tests' tiny one."""
    run_ranks(p, "reductions", env={"PYCOLL_SEGMENT_BYTES": ""})


def test_settings_are_rank_zeros():
    """Every rank runs with rank 0's PYCOLL_* settings, whatever its own."""
    per_rank = [{"PYCOLL_SEGMENT_BYTES": "4096", "PYCOLL_ALGORITHM_ALLREDUCE": "tree"},
                {"PYCOLL_SEGMENT_BYTES": "100", "PYCOLL_ALGORITHM_ALLREDUCE": "ring"},
                {"PYCOLL_SEGMENT_BYTES": "7"}]
    run_ranks(3, "settings", per_rank_env=per_rank,
              env={"EXPECT_SEGMENT": "4096", "EXPECT_ALGORITHM": "tree"})


def test_bad_setting_raises_everywhere():
    out = subprocess.run(
        [sys.executable, "-c", "import pycoll; pycoll.Communicator()"],
        capture_output=True, text=True, timeout=120,
        env={**__import__("os").environ, "PYCOLL_ALGORITHM_ALLREDUCE": "magic"})
    assert out.returncode != 0
    assert "PYCOLL_ALGORITHM_ALLREDUCE=magic: allreduce has ring" in out.stderr


def test_a_failing_rank_fails_fast_with_its_traceback():
    start = time.monotonic()
    with pytest.raises(AssertionError) as info:
        run_ranks(4, "fail", timeout=60)
    assert "RuntimeError: rank 3 fails on purpose" in str(info.value)
    assert time.monotonic() - start < 30


def test_a_rank_that_does_not_report_fails_the_launch():
    with pytest.raises(AssertionError, match=r"ranks reporting success \[0, 1\]"):
        run_ranks(3, "silent", timeout=60)
