"""The binomial trees of broadcast, scatter and gather, without MPI.

The header of broadcast and scatter goes down binomial_edges' tree, and an
inline scatter's blocks ride in those same messages (pycoll/_header.py,
Note [Inline scatter]), cut by inline_scatter_spans from gather/scatter's
binomial_subtree. The two trees must be one tree, and the cuts must hand
every rank exactly its own block, for every p and root.
"""
import numpy as np
import pytest

from pycoll._header import inline_scatter_spans
from pycoll.algorithms._shape import binomial_subtree
from pycoll.algorithms.broadcast_binomial import binomial_edges

SIZES = list(range(1, 34)) + [63, 64, 65]


@pytest.mark.parametrize("p", SIZES)
def test_header_tree_is_the_scatter_subtree(p):
    for root in range(p):
        for r in range(p):
            rel = (r - root) % p
            parent, children = binomial_edges(root, r, p)
            up, end, subtrees = binomial_subtree(rel, p)
            assert parent == (None if up is None else (up + root) % p), (p, root, r)
            # the header's children, largest subtree first; the subtree's, smallest first
            assert children == [(first + root) % p for first, _ in reversed(subtrees)], (p, root, r)
            assert end - rel == 1 + sum(last - first for first, last in subtrees)


@pytest.mark.parametrize("p", SIZES)
def test_inline_scatter_spans_deliver_each_block_once(p):
    rng = np.random.default_rng(p)
    for root in range(p):
        counts = [int(c) for c in rng.integers(0, 4, p) * 8]     # some ranks get nothing
        # The root holds every block, in the order of ranks relative to it.
        held = {root: np.concatenate([np.full(counts[(root + i) % p], (root + i) % p)
                                      for i in range(p)]).astype(int)}
        order = [root]
        for r in order:                     # breadth first down the header's tree
            data = held[r]
            own, kids, sub = inline_scatter_spans(p, r, root, counts)
            assert sub == len(data), (p, root, r)
            assert own == counts[r] and (data[:own] == r).all(), (p, root, r)
            assert [child for child, _, _ in kids] == binomial_edges(root, r, p)[1]
            for child, lo, hi in kids:      # sent largest subtree first
                held[child] = data[lo:hi]
                order.append(child)
            covered = own
            for child, lo, hi in sorted(kids, key=lambda kid: kid[1:]):
                assert lo == covered, (p, root, r, child)       # the parts tile the rest
                covered = hi
            assert covered == sub, (p, root, r)
        assert sorted(order) == list(range(p))
