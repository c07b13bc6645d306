"""reduce, binomial tree.

Ranks are numbered relative to the root (rel = (rank - root) mod p). For
k = 0, 1, 2, ...: a rank whose bit k is set sends its partial to rel - 2^k
and stops; otherwise it receives the partial of child rel + 2^k (if it
exists) and reduces it into its own, its own partial (lower relative ranks)
on the left. The root ends with the result. Written as a schedule
(_schedule.py), so that a one-message reduce runs in C (the lane):

    p = 8 (rel):  k=0: 1->0 3->2 5->4 7->6   k=1: 2->0 6->4   k=2: 4->0

    steps          ceil(log2 p)
    bytes sent     n
    bytes reduced  n * ceil(log2 p)       (the root)
"""
import functools

from pycoll.algorithms._schedule import RECV_REDUCE, SEND, execute
from pycoll.algorithms._shape import log2_ceil


def steps(p):
    return log2_ceil(p)


def bytes_on_wire(n, p):
    return n if p > 1 else 0


def reduce_bytes(n, p):
    return n * log2_ceil(p)


@functools.cache
def schedule(p: int, r: int, root: int) -> tuple:
    """Rank r's steps (_schedule.py): receive-and-reduce from each child,
    own partial on the left, then send the partial to the parent."""
    rel = (r - root) % p
    out: list = []
    mask = 1
    while mask < p:
        if rel & mask:
            out.append((SEND, (rel - mask + root) % p))
            break
        if rel + mask < p:
            out.append((RECV_REDUCE, (rel + mask + root) % p, False))
        mask <<= 1
    return tuple(out)


def run(t):
    execute(t, schedule(t.size, t.rank, t.root))
