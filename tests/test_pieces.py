"""Pieces: many arrays as one byte vector, and how transfers cut it."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

from pycoll._p2p import in_turns
from pycoll._pieces import Pieces, follows, joined_views, segments


def test_slices_are_views_or_pieces():
    a, b, c = (np.arange(n, dtype=np.uint8) for n in (10, 5, 20))
    v = Pieces([a, np.empty(0, np.uint8), b, c])
    assert len(v) == 35 and v.spans() == [(0, 10), (10, 15), (15, 35)]
    inside = v[11:14]
    assert type(inside) is np.ndarray and np.shares_memory(inside, b)
    assert list(inside) == [1, 2, 3]
    across = v[8:17]
    assert type(across) is Pieces and across.spans() == [(0, 2), (2, 7), (7, 9)]
    assert np.concatenate(across.views).tolist() == [8, 9, 0, 1, 2, 3, 4, 0, 1]
    across.views[1][0] = 99                         # writes land in the arrays
    assert b[0] == 99
    assert len(v[20:20]) == 0 and len(v[40:50]) == 0
    with pytest.raises(TypeError, match="contiguous slices"):
        v[::2]


def test_segments_never_cross_a_piece():
    v = Pieces([np.zeros(n, np.uint8) for n in (300, 10, 700)])
    segs = segments(v, 256)
    assert segs == [(0, 256), (256, 300), (300, 310), (310, 566), (566, 822), (822, 1010)]
    assert segments(np.zeros(600, np.uint8), 256) == [(0, 256), (256, 512), (512, 600)]
    assert segments(np.zeros(0, np.uint8), 256) == []


def test_joined_views_follow_the_agreed_joins():
    flat = np.arange(20, dtype=np.float32)
    a, b, c = flat[:5], flat[5:12], flat[12:20]
    assert follows(a, b) and follows(b, c) and not follows(a, c)
    assert not follows(np.ones(3), np.ones(3))
    one = joined_views([a, flat[5:5], b, c], (True, True))          # empty arrays do not count
    assert [len(v) for v in one] == [80] and np.shares_memory(one[0], flat)
    assert [len(v) for v in joined_views([a, b, c], (False, True))] == [20, 60]
    separate = [np.ones(3), np.ones(4)]
    assert [len(v) for v in joined_views(separate, (False,))] == [24, 32]
    assert joined_views(separate, (True,)) is None                  # they do not follow
    assert joined_views([np.ones((3, 4)).T, np.ones(2)], (False,)) is None


def test_a_packed_bucket_is_cut_where_the_layout_cuts():
    from pycoll.fusion.manager import _cut
    members = [np.ones(3, np.float32), np.ones(0, np.float32), np.ones(2, np.float32),
               np.ones(4, np.float32)]
    buf = np.zeros(36, np.uint8)
    assert [len(v) for v in _cut(buf, members, (False, True))] == [12, 24]
    assert [len(v) for v in _cut(buf, members, (True, True))] == [36]
    assert [len(v) for v in _cut(buf, members, (False, False))] == [12, 8, 16]


@given(st.lists(st.integers(0, 5), max_size=6))
def test_a_gather_posts_its_receives_in_turns(lengths):
    """Channel.irecv_each's order (Note [Posting in turns] in
    pycoll/_p2p.py): every segment of every source once, segment k of
    each source (in their order) before segment k + 1 of any."""
    cuts = [[(10 * k, 10 * k + 10) for k in range(n)] for n in lengths]
    order = in_turns(cuts)
    assert sorted(order) == sorted((i, lo, hi) for i, c in enumerate(cuts) for lo, hi in c)
    assert order == sorted(order, key=lambda posted: (posted[1], posted[0])), order
