"""scatter, binomial tree.

Blocks are laid out in relative order (rel = (rank - root) mod p): the root
rotates its input once so that the subtree of every rank is one contiguous
range. A rank receives its subtree's range from its parent (a leaf receives
its block straight into the result), keeps its own block and passes each
child its subtree's range, largest first:

    p = 8 (rel):  0 -> 4 (blocks 4-7), 2 (2-3), 1 (1)    4 -> 6 (6-7), 5 (5)

    steps          ceil(log2 p)
    bytes sent     about (p - 1) * n        (the root; n = one block)
    bytes reduced  0
"""
from pycoll.algorithms._shape import blocks_from_counts, log2_ceil, span


def steps(p):
    return log2_ceil(p)


def bytes_on_wire(n, p):
    return (p - 1) * n


def reduce_bytes(n, p):
    return 0


def run(t):
    p, r, root, ch = t.size, t.rank, t.root, t.ch
    rel_blocks = blocks_from_counts([t.counts[(i + root) % p] for i in range(p)])
    total = sum(t.counts)
    if r == root:
        buf = relative_order(t.send, t.displs[root], ch.scratch("work", total)) if root else t.send
    else:
        buf = ch.scratch("work", total)
    binomial_scatter(ch, buf, rel_blocks, root, r, p, own=t.out)


def relative_order(buf, split, into):
    """*into* = buf rotated left by *split* bytes (the root's block first)."""
    tail = len(buf) - split
    into[:tail] = buf[split:]
    into[tail:] = buf[:split]
    return into


def binomial_scatter(ch, buf, blocks, root, rank, size, own=None):
    """Binomial scatter of *buf*, which holds relative block i at blocks[i]
    (the root starts with all of them). Given *own*, this rank's block
    ends there: a rank with no children receives it straight into own,
    the others copy it while their sends are in flight; returns whether
    it did."""
    rel = (rank - root) % size
    mask = 1
    while mask < size:
        if rel & mask:
            parent = (rel - mask + root) % size
            last = min(rel + mask, size)
            if own is not None and last == rel + 1:
                ch.recv(own, parent)
                return True
            lo, n = span(blocks, rel, last)
            ch.recv(buf[lo:lo + n], parent)
            break
        mask <<= 1
    mask >>= 1
    sends = []
    while mask:
        child = rel + mask
        if child < size:
            lo, n = span(blocks, child, min(child + mask, size))
            sends += ch.isend(buf[lo:lo + n], (child + root) % size)
        mask >>= 1
    if own is not None:
        lo, n = blocks[rel]
        own[:] = buf[lo:lo + n]
    ch.wait(sends)
    return own is not None
