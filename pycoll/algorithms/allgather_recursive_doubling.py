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
from pycoll.algorithms._shape import Fold, blocks_from_counts, own_block, span


def steps(p):
    fold = Fold(p)
    return fold.pof2.bit_length() - 1 + (2 if fold.rem else 0)


def bytes_on_wire(n, p):
    return (p - 1) * n + (p * n if Fold(p).rem else 0)


def reduce_bytes(n, p):
    return 0


# This rank's own block is the algorithm's to put in place (the API does
# not): the first round sends it from the input while copying it into the
# result.
def run(t):
    p, r, ch, out = t.size, t.rank, t.ch, t.out
    fold = Fold.of(p)
    v = fold.virtual(r)
    blocks = blocks_from_counts(t.counts)
    mine, copy = own_block(t, *blocks[r])
    if r < 2 * fold.rem:
        if v is None:
            ch.send(mine, r + 1)
            ch.recv(out, r + 1)         # the whole result, this rank's block included
            return
        if copy is not None:            # the first round sends it with the partner's
            copy[:] = mine
            mine, copy = copy, None
        lo, n = blocks[r - 1]
        ch.recv(out[lo:lo + n], r - 1)

    def virtual_view(first, last):
        lo, n = span(blocks, fold.first(first), fold.first(last))
        return out[lo:lo + n]

    mask = 1
    while mask < fold.pof2:
        mine_v = v & ~(mask - 1)
        theirs = (v ^ mask) & ~(mask - 1)
        partner = fold.real(v ^ mask)
        received = virtual_view(theirs, theirs + mask)
        if copy is not None:            # round 0 of an unfolded rank: its own block alone
            ch.sendrecv_copying(mine, partner, received, partner, copy)
            copy = None
        else:
            ch.sendrecv(virtual_view(mine_v, mine_v + mask), partner, received, partner)
        mask <<= 1
    if copy is not None:                # p == 1
        copy[:] = mine
    if r < 2 * fold.rem:
        ch.send(out, r - 1)
