"""barrier, dissemination: in round k every rank signals rank r + 2^k and
waits for rank r - 2^k, so after ceil(log2 p) rounds each rank has heard,
directly or through others, from every rank.

    steps          ceil(log2 p)
    bytes sent     0 (zero-byte messages)
    bytes reduced  0
"""
from pycoll.algorithms._shape import log2_ceil


def steps(p):
    return log2_ceil(p)


def bytes_on_wire(n, p):
    return 0


def reduce_bytes(n, p):
    return 0


def run(t):
    p, r, ch = t.size, t.rank, t.ch
    d = 1
    while d < p:
        ch.sync((r + d) % p, (r - d) % p)
        d <<= 1
