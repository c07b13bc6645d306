"""allgather, recursive doubling: in round k each rank swaps everything it
has (an aligned range of 2^k blocks) with the rank 2^k away.

A process count that is not a power of two is folded (``_shape.Fold``): the
even rank of each of the first rem pairs gives its block to its odd partner,
which plays one virtual rank holding both blocks, and gets the whole result
back at the end.

    steps          log2(pof2) + 2 if p is not a power of two
    bytes sent     about (p - 1) * n, plus p * n if p is not a power of two
    bytes reduced  0
"""
from pycoll.algorithms._shape import Fold, blocks_from_counts, span


def steps(p):
    fold = Fold(p)
    return fold.pof2.bit_length() - 1 + (2 if fold.rem else 0)


def bytes_on_wire(n, p):
    return (p - 1) * n + (p * n if Fold(p).rem else 0)


def reduce_bytes(n, p):
    return 0


def run(t):
    p, r, ch, out = t.size, t.rank, t.ch, t.out
    fold = Fold.of(p)
    v = fold.virtual(r)
    blocks = blocks_from_counts(t.counts)
    if r < 2 * fold.rem:
        if v is None:
            lo, n = blocks[r]
            ch.send(out[lo:lo + n], r + 1)
            ch.recv(out, r + 1)
            return
        lo, n = blocks[r - 1]
        ch.recv(out[lo:lo + n], r - 1)

    def virtual_view(first, last):
        lo, n = span(blocks, fold.first(first), fold.first(last))
        return out[lo:lo + n]

    mask = 1
    while mask < fold.pof2:
        mine = v & ~(mask - 1)
        theirs = (v ^ mask) & ~(mask - 1)
        partner = fold.real(v ^ mask)
        ch.sendrecv(virtual_view(mine, mine + mask), partner,
                    virtual_view(theirs, theirs + mask), partner)
        mask <<= 1
    if r < 2 * fold.rem:
        ch.send(out, r - 1)
