"""allreduce, Rabenseifner: recursive-halving reduce-scatter, then
recursive-doubling allgather.

The vector is cut into pof2 blocks. Reduce-scatter: in round k (distance
pof2/2, pof2/4, ..., 1) each rank keeps half of its current range of blocks
(the lower half if it is the lower rank of the pair), sends the other half
to its partner and reduces the half that arrives into the half it keeps
(the lower rank's partial on the left). After log2(pof2) rounds virtual
rank v holds block v complete. Allgather: the same pairs in reverse order
swap their (aligned, doubling) ranges until every rank has every block.

    pof2 = 4, reduce-scatter      round 1 (distance 2)   round 2 (distance 1)
    rank 0 keeps                  blocks 0-1             block 0
    rank 3 keeps                  blocks 2-3             block 3

A process count that is not a power of two is folded (``_shape.Fold``) as
in recursive doubling. Each block is finished on one rank and copied (Note
[Bitwise-identical results] in _p2p.py).

    steps          2 log2(pof2) + 2 if p is not a power of two
    bytes sent     2 (pof2 - 1)/pof2 * n + n if p is not a power of two
    bytes reduced  (pof2 - 1)/pof2 * n + n if p is not a power of two
"""
from pycoll.algorithms._shape import Fold, element_blocks, span


# Runs in place on a Pieces: every message is one range of the vector,
# addressed alike by its sender and its receiver (the fold included).
PIECES = True


def steps(p):
    fold = Fold(p)
    return 2 * (fold.pof2.bit_length() - 1) + (2 if fold.rem else 0)


def bytes_on_wire(n, p):
    fold = Fold(p)
    return 2 * (fold.pof2 - 1) * n / fold.pof2 + (n if fold.rem else 0)


def reduce_bytes(n, p):
    fold = Fold(p)
    return (fold.pof2 - 1) * n / fold.pof2 + (n if fold.rem else 0)


def run(t):
    p, r, ch, send, data = t.size, t.rank, t.ch, t.send, t.data
    fold = Fold.of(p)
    v = fold.virtual(r)
    mine = send
    if r < 2 * fold.rem:
        if v is None:
            ch.send(send, r + 1)
            ch.recv(data, r + 1)
            return
        ch.recv_reduce(send, r - 1, received_left=True, out=data)
        mine = data
    blocks = element_blocks(len(data), t.itemsize, fold.pof2)
    if halving_reduce_scatter(ch, mine, data, blocks, fold, v, r) is not data:
        data[:] = mine                          # p == 1
    doubling_allgather(ch, data, blocks, fold, v)
    if r < 2 * fold.rem:
        ch.send(data, r - 1)


def view(buf, blocks, first, last):
    lo, n = span(blocks, first, last)
    return buf[lo:lo + n]


def halving_reduce_scatter(ch, mine, data, blocks, fold, v, r):
    """Recursive halving over the pof2 virtual ranks: virtual rank v ends
    with ``blocks[v]`` of *data* reduced over all ranks. *mine* holds this
    rank's partial to start from (its input, or data itself). Returns where
    the partial now lives: data, unless there was nothing to halve."""
    lo, hi = 0, fold.pof2
    mask = fold.pof2 >> 1
    while mask:
        partner = fold.real(v ^ mask)
        mid = (lo + hi) // 2
        keep, give = ((lo, mid), (mid, hi)) if not v & mask else ((mid, hi), (lo, mid))
        ch.sendrecv_reduce(view(mine, blocks, *give), partner, view(mine, blocks, *keep),
                           partner, received_left=partner < r, out=view(data, blocks, *keep))
        mine = data
        lo, hi = keep
        mask >>= 1
    return mine


def doubling_allgather(ch, data, blocks, fold, v):
    """Recursive doubling over the pof2 virtual ranks: each starts with
    ``blocks[v]`` and swaps aligned ranges of 1, 2, 4, ... blocks."""
    mask = 1
    while mask < fold.pof2:
        mine = v & ~(mask - 1)
        theirs = (v ^ mask) & ~(mask - 1)
        partner = fold.real(v ^ mask)
        ch.sendrecv(view(data, blocks, mine, mine + mask), partner,
                    view(data, blocks, theirs, theirs + mask), partner)
        mask <<= 1
