"""allreduce, tree: binomial reduce to rank 0, then binomial broadcast.

Rank 0 combines the partials of its subtrees (reduce_binomial's tree), so
the result is computed on one rank and copied down the tree
(broadcast_binomial's tree; Note [Bitwise-identical results] in _p2p.py).
Written as a schedule (_schedule.py).

    steps          2 ceil(log2 p)
    bytes sent     n * ceil(log2 p)       (rank 0, in the broadcast)
    bytes reduced  n * ceil(log2 p)       (rank 0)
"""
import functools

from pycoll.algorithms import reduce_binomial
from pycoll.algorithms._schedule import RECV, SEND, execute
from pycoll.algorithms._shape import log2_ceil


def steps(p):
    return 2 * log2_ceil(p)


def bytes_on_wire(n, p):
    return n * log2_ceil(p)


def reduce_bytes(n, p):
    return n * log2_ceil(p)


@functools.cache
def schedule(p: int, r: int) -> tuple:
    # Binomial reduce to rank 0: children first (own partial on the left).
    out = list(reduce_binomial.schedule(p, r, 0))
    # Binomial broadcast from rank 0: from the parent, then to the children.
    mask = 1
    while mask < p and not r & mask:
        mask <<= 1
    if r:
        out.append((RECV, r - mask))
    mask >>= 1
    while mask:
        if r + mask < p:
            out.append((SEND, r + mask))
        mask >>= 1
    return tuple(out)


def run(t):
    execute(t, schedule(t.size, t.rank))
