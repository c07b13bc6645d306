"""Pieces: one byte vector made of many arrays, without copying them.

A fused bucket is a list of arrays that one collective treats as a single
vector. Packing them into a buffer costs two copies of every byte, which at
large sizes is as much as the collective itself. Algorithms that only ever
slice their vector and hand the slices to the Channel's primitives can run
on the arrays where they lie instead:

    v = Pieces([a.reshape(-1).view(np.uint8) for a in arrays])
    len(v)          # total bytes
    v[lo:hi]        # a numpy view when the range lies in one array, else Pieces

The Channel cuts every transfer of a Pieces at its piece boundaries as well
as at the segment size (``segments``), so each message is one contiguous
numpy view and each reduction one kernel call. Both ends of a message cut
it the same way as long as they address the same range of the same layout,
which holds for the algorithms marked ``PIECES = True`` run in place (see
pycoll/algorithms/__init__.py) when every rank's pieces are cut at the same
places: the FusionManager agrees on those first (Note [Same layout
everywhere] in pycoll/fusion/manager.py).
"""
from __future__ import annotations

import bisect

import numpy as np


class Pieces:
    """A read-write byte vector over contiguous uint8 views (the pieces).

    Zero-length views are dropped; a Pieces never has an empty piece.
    """

    __slots__ = ("views", "starts", "nbytes")

    def __init__(self, views):
        self.views = [v for v in views if len(v)]
        starts, at = [], 0
        for v in self.views:
            starts.append(at)
            at += len(v)
        self.starts = starts
        self.nbytes = at

    def __len__(self) -> int:
        return self.nbytes

    def __getitem__(self, key):
        if not isinstance(key, slice) or key.step not in (None, 1):
            raise TypeError("a Pieces takes contiguous slices only")
        lo, hi, _ = key.indices(self.nbytes)
        if hi <= lo:
            return np.empty(0, np.uint8)
        starts = self.starts
        first = bisect.bisect_right(starts, lo) - 1
        last = bisect.bisect_right(starts, hi - 1) - 1
        if first == last:
            base = starts[first]
            return self.views[first][lo - base:hi - base]
        views = [self.views[first][lo - starts[first]:]]
        views += self.views[first + 1:last]
        views.append(self.views[last][:hi - starts[last]])
        return Pieces(views)

    def spans(self) -> list:
        """(start, end) of each piece."""
        return [(s, s + len(v)) for s, v in zip(self.starts, self.views)]

    def __repr__(self) -> str:
        return f"<Pieces {len(self.views)} pieces, {self.nbytes} bytes>"


def follows(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether b starts where a ends, both views of one C-contiguous
    buffer (the two can travel as one piece)."""
    root, start = _root(a)
    if root is None:
        return False
    other, at = _root(b)
    return other is root and at == start + a.nbytes


def joined_views(arrays, joins) -> list | None:
    """Byte views of *arrays* joined into one where *joins* says (one flag
    per non-empty array after the first: it follows the one before), or
    None when these arrays cannot lie that way: one is not C-contiguous and
    aligned, or a join falls between two that do not follow each other."""
    arrays = [a for a in arrays if a.nbytes]
    if not all(a.flags.c_contiguous and a.flags.aligned for a in arrays):
        return None
    runs: list = []                     # [first, last] array of each piece
    for k, a in enumerate(arrays):
        if k and joins[k - 1]:
            if not follows(arrays[k - 1], a):
                return None
            runs[-1][1] = a
        else:
            runs.append([a, a])
    views = []
    for first, last in runs:
        if first is last:
            views.append(first.reshape(-1).view(np.uint8))
        else:
            root, start = _root(first)
            views.append(_view((root, start, _root(last)[1] + last.nbytes)))
    return views


def _root(a: np.ndarray):
    """(the C-contiguous array that owns a's memory, a's byte offset in it),
    or (None, 0) when there is no such array."""
    root = a
    while isinstance(root.base, np.ndarray):
        root = root.base
    if not root.flags.c_contiguous:
        return None, 0
    offset = a.__array_interface__["data"][0] - root.__array_interface__["data"][0]
    if not 0 <= offset <= root.nbytes - a.nbytes:
        return None, 0
    return root, offset


def _view(run) -> np.ndarray:
    root, start, end = run
    return root.reshape(-1).view(np.uint8)[start:end]


def segments(buf, step: int) -> list:
    """(lo, hi) byte ranges of one transfer of *buf*: at most *step* bytes,
    and never across a piece boundary of a Pieces."""
    if type(buf) is not Pieces:
        n = len(buf)
        return [(lo, min(lo + step, n)) for lo in range(0, n, step)]
    return [(lo, min(lo + step, end)) for start, end in buf.spans()
            for lo in range(start, end, step)]


def is_pieces(*bufs) -> bool:
    return any(type(b) is Pieces for b in bufs)
