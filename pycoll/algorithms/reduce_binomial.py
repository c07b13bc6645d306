"""reduce, binomial tree.

Ranks are numbered relative to the root (rel = (rank - root) mod p). For
k = 0, 1, 2, ...: a rank whose bit k is set sends its partial to rel - 2^k
and stops; otherwise it receives the partial of child rel + 2^k (if it
exists) and reduces it into its own, its own partial (lower relative ranks)
on the left. The root ends with the result:

    p = 8 (rel):  k=0: 1->0 3->2 5->4 7->6   k=1: 2->0 6->4   k=2: 4->0

    steps          ceil(log2 p)
    bytes sent     n
    bytes reduced  n * ceil(log2 p)       (the root)
"""
from pycoll.algorithms._shape import log2_ceil


def steps(p):
    return log2_ceil(p)


def bytes_on_wire(n, p):
    return n if p > 1 else 0


def reduce_bytes(n, p):
    return n * log2_ceil(p)


def run(t):
    binomial_reduce(t.ch, t.send, t.data, t.root, t.rank, t.size)


def binomial_reduce(ch, send, data, root, rank, size):
    """The root's *data* = the reduction of every rank's *send*."""
    rel = (rank - root) % size
    mine = send                         # this rank's partial so far
    mask = 1
    while mask < size:
        if rel & mask:
            ch.send(mine, (rel - mask + root) % size)
            return
        if rel + mask < size:
            ch.recv_reduce(mine, (rel + mask + root) % size, received_left=False, out=data)
            mine = data
        mask <<= 1
    if mine is not data:                # the root had no children: p == 1
        data[:] = mine
