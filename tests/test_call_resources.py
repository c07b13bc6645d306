"""A communicator's tag counter and scratch (CallResources in
pycoll/_resources.pyx), which the C lanes and the general path share; run
without MPI."""
import numpy as np
import pytest

import pycoll
from pycoll._memory import HUGE_PAGE, empty_small_pages
from pycoll._resources import CallResources, huge_page_bytes, set_staging


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


# Note [Staging sends] in pycoll/_resources.pyx: a send of 256 KiB to 8 MiB
# from a buffer mostly on 4 KiB pages goes out of a copy on huge pages.
STAGE_FROM, STAGE_UP_TO = 256 << 10, 8 << 20
CAN_TELL = huge_page_bytes(np.ones(1)) is not None


def test_huge_page_bytes_counts_the_bytes_on_huge_pages():
    if not CAN_TELL:
        pytest.skip("this kernel cannot tell huge pages (PAGEMAP_SCAN is Linux 6.7+)")
    small = empty_small_pages(1 << 20, np.uint8)
    small[:] = 1
    assert huge_page_bytes(small) == 0
    assert huge_page_bytes(small[:0]) == 0
    huge = pycoll.empty(HUGE_PAGE, np.uint8)
    huge[:] = 1                                     # touched: the page is made now
    got = huge_page_bytes(huge)
    # The kernel may give 4 KiB pages where memory is fragmented.
    assert got in (0, HUGE_PAGE)
    if got:
        assert huge_page_bytes(huge[100:4196]) == 4096


@pytest.mark.parametrize("nbytes", [STAGE_FROM, 1 << 20, STAGE_UP_TO])
def test_a_send_from_small_pages_is_staged_as_a_copy(nbytes):
    if not CAN_TELL:
        pytest.skip("this kernel cannot tell huge pages: nothing is staged")
    calls = CallResources(1 << 20)
    x = empty_small_pages(nbytes, np.uint8)
    x[:] = np.arange(nbytes) % 251
    before = x.copy()
    sent = calls.staged(x)                  # "auto": the lanes have chosen nothing yet, a copy
    assert sent is not x and not np.shares_memory(sent, x)
    assert np.shares_memory(sent, calls.scratch("stage", nbytes))
    assert np.array_equal(sent, before) and np.array_equal(x, before)
    was = set_staging("off")
    try:
        assert calls.staged(x) is x
        for mode in ("stream", "copy"):
            set_staging(mode)
            calls.scratch("stage", nbytes)[:] = 0
            sent = calls.staged(x)
            assert np.shares_memory(sent, calls.scratch("stage", nbytes)), mode
            assert np.array_equal(sent, before) and np.array_equal(x, before), mode
    finally:
        assert set_staging(was) == "copy"
    assert was == "auto"


def test_staging_modes_are_named():
    with pytest.raises(ValueError, match="'sideways'.*off, copy, stream, auto"):
        set_staging("sideways")
    assert set_staging("auto") == "auto"


def test_what_is_not_staged_is_sent_as_it_is():
    calls = CallResources(1 << 20)
    small = empty_small_pages(STAGE_UP_TO + 4096, np.uint8)
    small[:] = 1
    for buf in (small[:STAGE_FROM - 1], small[:STAGE_UP_TO + 1], small[::2][:STAGE_FROM],
                [1, 2, 3], None):
        assert calls.staged(buf) is buf
    huge = pycoll.empty(1 << 20, np.uint8)
    huge[:] = 1
    if CAN_TELL and 2 * huge_page_bytes(huge) >= huge.nbytes:
        assert calls.staged(huge) is huge             # already on huge pages


def test_auto_takes_the_fastest_way_and_keeps_checking_the_others():
    """Note [Choosing the way]: each way twice in a row, then the fastest,
    with every EXPLORE-th call and the next trying one of the three in
    turn (a way far behind only in every FULL_ROUND-th round of trials);
    a change of the host's mode moves the choice within a few
    explorations."""
    from pycoll._resources import EXPLORE, FULL_ROUND, _ways_chosen

    fast = {0: 80e-6, 1: 50e-6, 2: 105e-6}       # as is, copy, stream (the fast mode)
    slow = {0: 85e-6, 1: 165e-6, 2: 68e-6}       # the slow mode
    change = (FULL_ROUND + 1) * 3 * EXPLORE     # after five rounds of trials
    chosen = _ways_chosen(lambda way, k: (fast if k < change else slow)[way], change + 400)
    assert chosen[:6] == ["off", "off", "copy", "copy", "stream", "stream"]
    assert chosen[6:EXPLORE] == ["copy"] * (EXPLORE - 6)
    # As is (1.6x the copy) and the stream (2.1x) are far behind: each is
    # tried in the first round and again in the fifth.
    for k in range(EXPLORE, change, EXPLORE):
        way = ("off", "copy", "stream")[k // EXPLORE % 3]
        full = k // (3 * EXPLORE) % FULL_ROUND == 0
        assert chosen[k] == chosen[k + 1] == (way if full or way == "copy" else "copy"), k
    assert all(c == "copy" for k, c in enumerate(chosen[6:change], 6) if k % EXPLORE > 1)
    # After the change the copy's mean climbs (a call weighs 1/4) past the
    # as-is one, and the stream, no longer far behind, takes over when it
    # is next tried.
    switched = next(k for k in range(change, change + 400)
                    if chosen[k] == "stream" and k % EXPLORE > 1)
    assert switched < change + 3 * EXPLORE, switched
    assert all(c == "stream" for k, c in enumerate(chosen[switched:], switched) if k % EXPLORE > 1)


def test_a_way_far_behind_that_pulls_ahead_is_found_in_a_full_round():
    """The copy, far behind "as is" (over FAR_BEHIND = 1.5 times its
    mean), is tried only in every FULL_ROUND-th round of trials; when the
    host turns fast the copy takes over at its first trial in such a
    round, no later."""
    from pycoll._resources import EXPLORE, FULL_ROUND, _ways_chosen

    slow = {0: 85e-6, 1: 165e-6, 2: 200e-6}      # as is, copy, stream
    fast = {0: 80e-6, 1: 50e-6, 2: 200e-6}
    change = 4 * EXPLORE                       # in the second round of trials
    chosen = _ways_chosen(lambda way, k: (slow if k < change else fast)[way], 1000)
    assert chosen[6:EXPLORE] == ["off"] * (EXPLORE - 6)
    full_round = 3 * EXPLORE * FULL_ROUND    # the first full round after the change
    copy_trial = full_round + EXPLORE        # and its trial of the copy
    assert all(c == "off" for k, c in enumerate(chosen[6:copy_trial], 6) if k % EXPLORE > 1)
    assert chosen[copy_trial:copy_trial + 2] == ["copy", "copy"]
    assert all(c == "copy" for k, c in enumerate(chosen[copy_trial:], copy_trial)
               if k % EXPLORE > 1)


def test_the_first_call_after_a_change_of_way_is_not_counted():
    """Here a send as is right after calls of another way took 33 us more
    than the next one (on MPICH, recursive doubling's 256 KiB allreduce as
    is after copied calls took 68 us, the next 36, every copied one 65).
    From call 100 on, as is is the fastest way; an exploration timed by its
    first call alone read it slower than the copy and never switched."""
    from pycoll._resources import EXPLORE, _ways_chosen

    before = {0: 80e-6, 1: 50e-6, 2: 105e-6}     # as is, copy, stream
    after = {0: 36e-6, 1: 65e-6, 2: 85e-6}
    last = [None]

    def seconds(way, k):
        t = (before if k < 100 else after)[way] + (33e-6 if way == 0 and last[0] != 0 else 0.0)
        last[0] = way
        return t

    chosen = _ways_chosen(seconds, 400)
    assert chosen[6:EXPLORE] == ["copy"] * (EXPLORE - 6)
    switched = next(k for k in range(100, 400) if chosen[k] == "off" and k % EXPLORE > 1)
    assert switched <= 100 + 3 * EXPLORE + 2, switched
    assert all(c == "off" for k, c in enumerate(chosen[switched:], switched) if k % EXPLORE > 1)


def test_a_stall_of_the_host_does_not_move_the_choice():
    """This host stalls a process for milliseconds now and then. A stalled
    call of the chosen way counts as a call twice its mean, no more:
    counted in full, one 10 ms call among 80 us ones would put the mean of
    "as is" at 2.6 ms, and the copy would run every call until "as is" was
    next tried, up to 3 * EXPLORE calls later."""
    from pycoll._resources import EXPLORE, _ways_chosen

    times = {0: 80e-6, 1: 110e-6, 2: 150e-6}     # as is, copy, stream
    stalls = {EXPLORE + 10, 2 * EXPLORE + 20, 4 * EXPLORE + 5}

    chosen = _ways_chosen(lambda way, k: 10e-3 if k in stalls else times[way], 6 * EXPLORE)
    assert chosen[6:EXPLORE] == ["off"] * (EXPLORE - 6)
    assert all(c == "off" for k, c in enumerate(chosen[6:], 6) if k % EXPLORE > 1), \
        [(k, c) for k, c in enumerate(chosen) if c != "off" and k % EXPLORE > 1]


def test_ranks_that_settled_apart_find_the_way_together():
    """An exchange lasts as long as its slower side, so a rank's time for
    its way depends on its peer's. Here both ranks as is take 30 us, both
    copying 70, both streaming 85, and a mixed pair as long as its slower
    way; rank 1's first calls as is (right after its input was rewritten)
    took 90 us, so the first six calls leave rank 0 as is and rank 1
    copying. Explorations that each rank took from "the other two" of its
    own choice only ever timed mixed pairs, and the two stayed apart
    (Note [Choosing the way]); explorations of the same way on both ranks
    bring them together within three."""
    from pycoll._resources import EXPLORE, _ways_chosen

    alone = {"off": 30e-6, "copy": 70e-6, "stream": 85e-6}

    def seconds(ways, k):
        both = max(alone[("off", "copy", "stream")[w]] for w in ways)
        return (both, 90e-6) if k < 2 else both

    chosen = _ways_chosen(seconds, 400, ranks=2)
    assert chosen[6] == ("off", "copy")     # as they settled
    together = next(k for k in range(6, 400) if k % EXPLORE > 1 and chosen[k] == ("off", "off"))
    assert together <= 3 * EXPLORE + 2, together
    assert all(c == ("off", "off") for k, c in enumerate(chosen[together:], together)
               if k % EXPLORE > 1)
