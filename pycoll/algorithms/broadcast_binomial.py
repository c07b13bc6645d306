"""broadcast, binomial tree.

Ranks are numbered relative to the root (rel = (rank - root) mod p). A rank
receives the whole message from the parent that clears its lowest set bit,
then sends it to its children rel + 2^k for every 2^k below that bit,
largest subtree first:

    p = 8 (rel):  0 -> 4, 2, 1    4 -> 6, 5    2 -> 3    6 -> 7

    steps          ceil(log2 p)
    bytes sent     n * depth              (the tree's depth: ceil(log2 p) for
                                           a power of two, less for others)
    bytes reduced  0

A rank's sends to its children leave at once, and between ranks of a node
each child makes its own copy, so the n bytes are copied once per level
of the tree on the way to its deepest rank: at p = 3 the root's two
children copy at the same time, one level, where the root sends 2n
(Note [Scatter's terms] in pycoll/tuning.py; a chain of three ranks
passes n on twice, and "auto", counting both as 2n, took the chain for
16-256 KiB at p = 3, 5-16x the tree's time on two cores).
"""
from pycoll.algorithms._shape import log2_ceil, tree_depth


def steps(p):
    return log2_ceil(p)


def bytes_on_wire(n, p):
    return n * tree_depth(p)


def reduce_bytes(n, p):
    return 0


def run(t):
    binomial_broadcast(t.ch, t.data, t.root, t.rank, t.size)


def binomial_broadcast(ch, data, root, rank, size):
    parent, children = binomial_edges(root, rank, size)
    if parent is not None:
        ch.recv(data, parent)
    sends = []
    for child in children:
        sends += ch.isend(data, child)
    ch.wait(sends)


def binomial_edges(root, rank, size):
    """(parent or None, children largest subtree first) of *rank* in the
    binomial tree rooted at *root*."""
    rel = (rank - root) % size
    parent, mask = None, 1
    while mask < size:
        if rel & mask:
            parent = (rel - mask + root) % size
            break
        mask <<= 1
    children = []
    mask >>= 1
    while mask:
        if rel + mask < size:
            children.append((rel + mask + root) % size)
        mask >>= 1
    return parent, children
