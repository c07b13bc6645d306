"""gather, binomial tree (scatter_binomial run backwards).

Blocks travel in relative order (rel = (rank - root) mod p) so that each
subtree's blocks form one contiguous range. A leaf sends its block to its
parent; an inner rank places its own block, receives its children's ranges
(all posted at once) and sends its whole subtree's range up. The root
rotates the result into rank order (no copy when the root is rank 0).

    steps          ceil(log2 p)
    bytes sent     about p/2 * n            (n = one block)
    bytes reduced  0
"""
from pycoll.algorithms._shape import blocks_from_counts, log2_ceil, span


def steps(p):
    return log2_ceil(p)


def bytes_on_wire(n, p):
    return (p // 2) * n if p > 1 else 0


def reduce_bytes(n, p):
    return 0


def run(t):
    p, r, root, ch = t.size, t.rank, t.root, t.ch
    rel_blocks = blocks_from_counts([t.counts[(i + root) % p] for i in range(p)])
    total = sum(t.counts)
    if r == root and root == 0:
        buf = t.out
    else:
        buf = ch.scratch("work", total)
    binomial_gather(ch, buf, rel_blocks, root, r, p, own=t.send)
    if r == root and root != 0:
        split = t.displs[root]          # rank order = relative order rotated right
        tail = total - split
        t.out[split:] = buf[:tail]
        t.out[:split] = buf[tail:]


def binomial_gather(ch, buf, blocks, root, rank, size, own):
    """Gather relative block i into blocks[i] of the root's *buf*."""
    rel = (rank - root) % size
    children = []
    mask = 1
    while mask < size and not rel & mask:
        if rel + mask < size:
            children.append((rel + mask, min(rel + 2 * mask, size)))
        mask <<= 1
    parent = (rel - mask + root) % size if rel else None
    if not children:
        if parent is not None:
            ch.send(own, parent)
        else:
            lo, n = blocks[rel]
            buf[lo:lo + n] = own
        return
    lo, n = blocks[rel]
    buf[lo:lo + n] = own
    transfers = []
    for first, last in children:
        clo, cn = span(blocks, first, last)
        transfers.append((buf[clo:clo + cn], (first + root) % size))
    ch.wait(ch.irecv_each(transfers))
    if parent is not None:
        lo, n = span(blocks, rel, min(rel + mask, size))
        ch.send(buf[lo:lo + n], parent)
