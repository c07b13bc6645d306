"""broadcast, binomial tree.

Ranks are numbered relative to the root (rel = (rank - root) mod p). A rank
receives the whole message from the parent that clears its lowest set bit,
then sends it to its children rel + 2^k for every 2^k below that bit,
largest subtree first:

    p = 8 (rel):  0 -> 4, 2, 1    4 -> 6, 5    2 -> 3    6 -> 7

    steps          ceil(log2 p)
    bytes sent     n * ceil(log2 p)       (the root)
    bytes reduced  0
"""
from pycoll.algorithms._shape import log2_ceil


def steps(p):
    return log2_ceil(p)


def bytes_on_wire(n, p):
    return n * log2_ceil(p)


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
