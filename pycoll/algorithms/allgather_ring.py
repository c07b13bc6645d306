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


# The ring puts this rank's own block in place itself (the API does it for
# the other algorithms): from OVERLAP_COPY bytes up, step 0 sends the block
# from the input while it is copied into the result, so the copy costs no
# time (at p = 2, step 0 is the whole allgather). Below, the copy comes
# first and each step is one C call.
COPIES_OWN_BLOCK = True
OVERLAP_COPY = 64 << 10


def run(t):
    p, r, ch, out, send = t.size, t.rank, t.ch, t.out, t.send
    blocks = blocks_from_counts(t.counts)
    right, left = (r + 1) % p, (r - 1) % p
    lo, n = blocks[r]
    own = out[lo:lo + n]
    in_place = send is None or _same(send, own)
    if p == 1 or n < OVERLAP_COPY or in_place:
        if not in_place:
            own[:] = send
        ring_allgather(ch, out, blocks, r, p, right, left, first=r)
        return
    rlo, rn = blocks[left]
    ch.step += 1
    requests = ch.irecv(out[rlo:rlo + rn], left) + ch.isend(send, right)
    own[:] = send
    ch.wait(requests)
    ring_allgather(ch, out, blocks, r, p, right, left, first=r, start=1)


def _same(a, b) -> bool:
    """Whether byte views *a* and *b* are the same memory."""
    return len(a) == len(b) and a.__array_interface__["data"][0] == b.__array_interface__["data"][0]
