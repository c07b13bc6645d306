"""allreduce, tree: binomial reduce to rank 0, then binomial broadcast.

Rank 0 combines the partials of its subtrees (reduce_binomial), so the
result is computed on one rank and copied down the tree (broadcast_binomial,
Note [Bitwise-identical results] in _p2p.py).

    steps          2 ceil(log2 p)
    bytes sent     n * ceil(log2 p)       (rank 0, in the broadcast)
    bytes reduced  n * ceil(log2 p)       (rank 0)
"""
from pycoll.algorithms._shape import log2_ceil
from pycoll.algorithms.broadcast_binomial import binomial_broadcast
from pycoll.algorithms.reduce_binomial import binomial_reduce


def steps(p):
    return 2 * log2_ceil(p)


def bytes_on_wire(n, p):
    return n * log2_ceil(p)


def reduce_bytes(n, p):
    return n * log2_ceil(p)


def run(t):
    binomial_reduce(t.ch, t.data, 0, t.rank, t.size)
    binomial_broadcast(t.ch, t.data, 0, t.rank, t.size)
