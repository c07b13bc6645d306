"""Pieces: many arrays as one byte vector, and how transfers cut it."""
import numpy as np
import pytest

from pycoll._pieces import Pieces, byte_views, segments


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


def test_byte_views_merge_adjacent_views_of_one_buffer():
    flat = np.arange(40, dtype=np.float64)
    parts = [flat[:10], flat[10:25].reshape(3, 5), flat[25:25], flat[25:30], flat[32:40]]
    views = byte_views(parts)
    assert [len(v) for v in views] == [240, 64]     # [0, 30) merged; a gap before 32
    assert np.shares_memory(views[0], flat) and views[0].view(np.float64)[-1] == 29
    separate = [np.ones(3), np.ones(3)]
    assert [len(v) for v in byte_views(separate)] == [24, 24]
    # views of different buffers never merge, even if their memory happens to touch
    assert len(byte_views([flat[:5], np.ones(5)])) == 2
