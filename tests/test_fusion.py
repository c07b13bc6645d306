"""Async collectives and the FusionManager under mpiexec (see mpi_cases.py)."""
import pytest

from mpirun import run_ranks

pytestmark = pytest.mark.mpi


@pytest.mark.parametrize("p", [1, 2, 3, 4, 7])
def test_async_collectives(p):
    """async_op=True on every collective: results, issue order, errors at the call."""
    run_ranks(p, "async")


@pytest.mark.parametrize("p", [1, 2, 3, 4])
def test_async_calls_take_lanes(p):
    """Note [Async lanes]: async calls run on the lanes, in their turn,
    meeting blocking calls of the other ranks."""
    run_ranks(p, "async_lanes")


@pytest.mark.parametrize("p", [1, 2, 3, 5, 8])
def test_fusion_manager(p):
    """Fused results equal unfused ones (bitwise); ids, split indices, caps,
    every strategy (pack, split, pieces, each); accumulate; data-parallel mark_ready in different
    orders per rank; fused reduce_scatter/allgather; bad input."""
    run_ranks(p, "fusion")


@pytest.mark.parametrize("p", [1, 2, 3, 4])
def test_fusion_inline_calls(p):
    """Note [Inline buckets]: repeated calls with the same arrays skip the
    launch machinery, exactly; anything _planned checks sends them the
    full way again."""
    run_ranks(p, "fusion_inline")


@pytest.mark.parametrize("p", [1, 2, 3, 5])
def test_fused_reduce_scatter_and_allgather(p):
    """The ZeRO pair: exact for every dtype, op, shape and layout, over one
    bucket or several; kept buckets, new arrays, shapes set in place; small
    buckets on the lanes; in turn behind async calls; bad input."""
    run_ranks(p, "fusion_zero")


@pytest.mark.parametrize("p", [2, 4])
def test_overlap_is_real(p):
    """The caller keeps running while buckets are in flight."""
    run_ranks(p, "overlap")
