"""allgather, ring: in step s rank r sends block r - s to r + 1 and receives
block r - s - 1 from r - 1, straight into the result.

    steps          p - 1
    bytes sent     (p - 1) * n            (n = one block)
    bytes reduced  0
"""
from pycoll.algorithms._shape import blocks_from_counts
from pycoll.algorithms.allreduce_ring import ring_allgather


def steps(p):
    return p - 1


def bytes_on_wire(n, p):
    return (p - 1) * n


def reduce_bytes(n, p):
    return 0


def run(t):
    p, r = t.size, t.rank
    # t.out already holds this rank's block at its place (the API copies it).
    ring_allgather(t.ch, t.out, blocks_from_counts(t.counts), r, p,
                   right=(r + 1) % p, left=(r - 1) % p, first=r)
