"""A communicator's tag counter and scratch (CallResources in
pycoll/_mpicall.pyx), which the C lanes and the general path share; run
without MPI."""
import numpy as np

from pycoll._mpicall import CallResources


def test_tags_count_up_and_wrap_after_tag_ub():
    calls = CallResources(3)
    assert [calls.next_tag() for _ in range(6)] == [0, 1, 2, 3, 0, 1]
    assert calls.tags_taken == 2


def test_scratch_is_one_buffer_per_slot_grown_as_needed():
    calls = CallResources(1 << 20)
    small = calls.scratch("lane", 16)
    assert small.dtype == np.uint8 and small.shape == (16,)
    assert calls.scratch("lane", 16) is small           # the view is kept
    assert np.shares_memory(calls.scratch("lane", 8), small)
    assert not np.shares_memory(calls.scratch("work", 16), small)

    big = calls.scratch("lane", 1000)                   # grows: a new buffer
    assert big.shape == (1000,) and not np.shares_memory(big, small)
    again = calls.scratch("lane", 16)                   # views of the new one from now on
    assert again is not small and np.shares_memory(again, big)
    assert calls.scratch("other", 0).shape == (0,)


def test_clear_releases_every_buffer():
    calls = CallResources(1 << 20)
    before = {slot: calls.scratch(slot, 64) for slot in ("lane", "output", "work", "input")}
    calls.clear()
    for slot, old in before.items():
        new = calls.scratch(slot, 64)
        assert new.shape == (64,) and not np.shares_memory(new, old), slot
