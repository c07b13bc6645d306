"""broadcast, scatter + allgather (van de Geijn).

The message is cut into p blocks, numbered by relative rank
(rel = (rank - root) mod p). A binomial scatter gives relative rank i
block i (scatter_binomial's tree, straight into the broadcast buffer, where
block i already lies); a ring allgather in relative order then completes
every copy. Bandwidth-optimal for large messages; every byte of the result
comes from the root unchanged.

    steps          ceil(log2 p) + p - 1
    bytes sent     about 2 (p - 1)/p * n
    bytes reduced  0
"""
from pycoll.algorithms._shape import element_blocks, log2_ceil
from pycoll.algorithms.allreduce_ring import ring_allgather
from pycoll.algorithms.scatter_binomial import binomial_scatter


def steps(p):
    return log2_ceil(p) + p - 1


def bytes_on_wire(n, p):
    return 2 * (p - 1) * n / p


def reduce_bytes(n, p):
    return 0


def run(t):
    p, r, root, ch, data = t.size, t.rank, t.root, t.ch, t.data
    blocks = element_blocks(len(data), t.itemsize, p)
    rel = (r - root) % p
    binomial_scatter(ch, data, blocks, root, r, p, own=None)
    ring_allgather(ch, data, blocks, rel, p, right=(r + 1) % p, left=(r - 1) % p, first=rel)
