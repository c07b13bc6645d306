"""allgather, ring: in step s rank r sends block r - s to r + 1 and receives
block r - s - 1 from r - 1, straight into the result.

    steps          p - 1
    bytes sent     (p - 1) * n            (n = one block)
    bytes reduced  0
"""
from pycoll.algorithms._shape import blocks_from_counts, own_block
from pycoll.algorithms.allreduce_ring import ring_allgather


def steps(p):
    return p - 1


def bytes_on_wire(n, p):
    return (p - 1) * n


def reduce_bytes(n, p):
    return 0


# This rank's own block is the algorithm's to put in place (the API does
# not): step 0 sends it from the input while copying it into the result
# (at p = 2, step 0 is the whole allgather).
def run(t):
    p, r, ch, out = t.size, t.rank, t.ch, t.out
    blocks = blocks_from_counts(t.counts)
    right, left = (r + 1) % p, (r - 1) % p
    mine, copy = own_block(t, *blocks[r])
    if p == 1:
        if copy is not None:
            copy[:] = mine
        return
    rlo, rn = blocks[left]
    ch.sendrecv_copying(mine, right, out[rlo:rlo + rn], left, copy)
    ring_allgather(ch, out, blocks, r, p, right, left, first=r, start=1)
