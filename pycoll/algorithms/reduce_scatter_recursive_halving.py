"""reduce_scatter, recursive halving.

The pof2 virtual ranks of a fold (``_shape.Fold``) run
allreduce_rabenseifner's reduce-scatter on virtual blocks, where virtual
block v is the union of the real blocks of the ranks v stands for (they are
consecutive). The odd rank of a folded pair ends with both ranks' blocks
and passes the even rank its own.

    steps          log2(pof2) + 2 if p is not a power of two
    bytes sent     about (p - 1) * n, plus p * n if p is not a power of two
    bytes reduced  the same                      (n = one block)
"""
from pycoll.algorithms._schedule import (RS_COPY, RS_INTO_RESULT, RS_LEFT, RS_MINE_PARTIAL,
                                         RS_NO_REDUCE, RS_SEND_PARTIAL)
from pycoll.algorithms._shape import Fold, blocks_from_counts, span


def steps(p):
    fold = Fold(p)
    return fold.pof2.bit_length() - 1 + (2 if fold.rem else 0)


def bytes_on_wire(n, p):
    return (p - 1) * n + (p * n if Fold(p).rem else 0)


def reduce_bytes(n, p):
    return bytes_on_wire(n, p)


def schedule(p, r, counts) -> tuple:
    """run()'s steps for the C lane, in the form _schedule.py describes.
    A folded pair's even rank sends x and receives its block in one step;
    the odd rank first reduces the pair's vectors, and at the end sends the
    even rank its block and copies its own."""
    fold = Fold(p)
    blocks = blocks_from_counts(counts)
    v = fold.virtual(r)
    if v is None:
        return ((r + 1, r + 1, (0, sum(counts)), blocks[r], RS_INTO_RESULT | RS_NO_REDUCE),)
    folded = r < 2 * fold.rem
    out = [(-1, r - 1, (0, 0), (0, sum(counts)), RS_LEFT)] if folded else []
    partial = folded                        # this rank's operand: the partial sums
    lo, hi, mask = 0, fold.pof2, fold.pof2 >> 1
    while mask:
        partner = fold.real(v ^ mask)
        mid = (lo + hi) // 2
        keep, give = ((lo, mid), (mid, hi)) if not v & mask else ((mid, hi), (lo, mid))
        flags = (RS_LEFT if partner < r else 0) | (RS_INTO_RESULT if mask == 1 and not folded else 0)
        out.append((partner, partner, span(blocks, fold.first(give[0]), fold.first(give[1])),
                    span(blocks, fold.first(keep[0]), fold.first(keep[1])),
                    flags | (RS_SEND_PARTIAL | RS_MINE_PARTIAL if partial else 0)))
        partial = True
        lo, hi = keep
        mask >>= 1
    if folded:
        out.append((r - 1, -1, blocks[r - 1], (0, 0), RS_SEND_PARTIAL))
        out.append((-1, -1, (0, 0), blocks[r], RS_COPY))
    return tuple(out)


def run(t):
    p, r, ch, send, data = t.size, t.rank, t.ch, t.send, t.data
    fold = Fold.of(p)
    v = fold.virtual(r)
    blocks = blocks_from_counts(t.counts)
    mine = send
    if r < 2 * fold.rem:
        if v is None:
            ch.send(send, r + 1)
            ch.recv(t.out, r + 1)
            return
        ch.recv_reduce(send, r - 1, received_left=True, out=data)
        mine = data

    def virtual_view(buf, first, last):
        lo, n = span(blocks, fold.first(first), fold.first(last))
        return buf[lo:lo + n]

    lo, hi = 0, fold.pof2
    mask = fold.pof2 >> 1
    while mask:
        partner = fold.real(v ^ mask)
        mid = (lo + hi) // 2
        keep, give = ((lo, mid), (mid, hi)) if not v & mask else ((mid, hi), (lo, mid))
        # The last step keeps virtual block v. Where that is this rank's
        # block alone, it is reduced straight into the result, as the ring
        # does (not into data and then copied: at p = 2 and 8 MiB blocks
        # the copy made this 1.4-1.6x the ring's time).
        last = mask == 1 and r >= 2 * fold.rem
        ch.sendrecv_reduce(virtual_view(mine, *give), partner, virtual_view(mine, *keep), partner,
                           received_left=partner < r,
                           out=t.out if last else virtual_view(data, *keep))
        if last:
            return
        mine = data
        lo, hi = keep
        mask >>= 1
    # Virtual block v: this rank's block, and its even partner's if folded.
    if r < 2 * fold.rem:
        blo, bn = blocks[r - 1]
        ch.send(mine[blo:blo + bn], r - 1)
    blo, bn = blocks[r]
    t.out[:] = mine[blo:blo + bn]
