"""Index arithmetic shared by the algorithms: trees, folds, blocks.

Kept apart so that each algorithm module reads as its steps, with the
arithmetic named here once.
"""
from __future__ import annotations

import functools

from pycoll._kernels.copy import block


def pof2_floor(p: int) -> int:
    """The largest power of two <= p."""
    return 1 << (p.bit_length() - 1)


def log2_ceil(p: int) -> int:
    return (p - 1).bit_length()


def tree_depth(p: int) -> int:
    """The levels of a binomial tree of p ranks below its root: the most
    set bits of a relative rank < p (3 at p = 8, 1 at p = 3)."""
    last = p - 1
    bits = last.bit_length()
    return bits if last == (1 << bits) - 1 else bits - 1


def binomial_subtree(rel: int, p: int) -> tuple:
    """(parent, end, children) of relative rank *rel* in the binomial tree
    of gather_binomial and scatter_binomial: its parent (relative; None for
    the root), the end of its subtree [rel, end) and each child's subtree
    (first, last), smallest first."""
    mask, children = 1, []
    while mask < p and not rel & mask:
        if rel + mask < p:
            children.append((rel + mask, min(rel + 2 * mask, p)))
        mask <<= 1
    return (rel - mask if rel else None), min(rel + mask, p), children


class Fold:
    """Non-power-of-two process counts, folded onto a power of two.

    With pof2 = pof2_floor(p) and rem = p - pof2, the first 2*rem ranks pair
    up: the even rank of each pair hands its data to the odd one and sits
    out, the odd one becomes virtual rank rank // 2; ranks >= 2*rem become
    virtual rank rank - rem. The pof2 virtual ranks run the power-of-two
    algorithm; afterwards the odd ranks hand the result back.

        p = 6, rem = 2:   real 0 1 | 2 3 | 4 5
                          virt - 0 | - 1 | 2 3
    Virtual rank v stands for the real ranks first(v) .. last(v), which are
    consecutive, so a virtual block is a union of consecutive real blocks.
    """

    __slots__ = ("p", "pof2", "rem")

    def __init__(self, p: int):
        self.p = p
        self.pof2 = pof2_floor(p)
        self.rem = p - self.pof2

    @staticmethod
    @functools.cache
    def of(p: int) -> "Fold":
        """The Fold of p, made once."""
        return Fold(p)

    def virtual(self, rank: int):
        """The virtual rank of *rank*, or None if it sits out."""
        if rank < 2 * self.rem:
            return rank // 2 if rank % 2 else None
        return rank - self.rem

    def real(self, v: int) -> int:
        """The real rank that plays virtual rank *v*."""
        return 2 * v + 1 if v < self.rem else v + self.rem

    def first(self, v: int) -> int:
        """The first real rank that virtual rank *v* stands for."""
        return 2 * v if v < self.rem else v + self.rem

    def partner(self, rank: int) -> int:
        """The other rank of *rank*'s pair (ranks < 2*rem only)."""
        return rank ^ 1


def element_blocks(nbytes: int, itemsize: int, parts: int) -> list:
    """Byte (offset, length) of each block of ``np.array_split`` of the
    nbytes // itemsize elements into *parts* blocks."""
    n = nbytes // itemsize
    out = []
    for i in range(parts):
        start, length = block(n, parts, i)
        out.append((start * itemsize, length * itemsize))
    return out


def span(blocks: list, first: int, last: int) -> tuple:
    """Byte (offset, length) covering blocks first..last-1 (consecutive)."""
    if first >= last:
        return (blocks[first][0] if first < len(blocks) else 0), 0
    lo = blocks[first][0]
    hi = blocks[last - 1][0] + blocks[last - 1][1]
    return lo, hi - lo


def blocks_from_counts(counts) -> list:
    """(offset, length) of consecutive blocks of the given byte counts."""
    out, total = [], 0
    for c in counts:
        out.append((total, c))
        total += c
    return out


def own_block(t, lo: int, n: int) -> tuple:
    """(this rank's block as an allgather sends it, the view of the result
    it must be copied into or None): the input when the rank has one apart
    from the result, else the result's bytes [lo, lo + n) already in place.
    The allgathers put their own block in place themselves (the API does
    not), during their first step (Channel.sendrecv_copying)."""
    own = t.out[lo:lo + n]
    send = t.send
    if send is None or same_bytes(send, own):
        return own, None
    return send, own


def same_bytes(a, b) -> bool:
    """Whether byte views a and b are the same memory (start and length)."""
    return len(a) == len(b) and a.__array_interface__["data"][0] == b.__array_interface__["data"][0]
