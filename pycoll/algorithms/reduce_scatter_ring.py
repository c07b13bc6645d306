"""reduce_scatter, ring: the first half of allreduce_ring.

Rank i's result is block i of the reduced vector (np.array_split by rows).
In step s rank r sends block r - s - 1 to r + 1 and reduces the block
r - s - 2 arriving from r - 1 into its copy (the arriving partial on the
left); the last step reduces block r straight into the result.

    steps          p - 1
    bytes sent     (p - 1) * n            (n = one block)
    bytes reduced  (p - 1) * n
"""
from pycoll.algorithms._schedule import RS_INTO_RESULT, RS_LEFT, RS_SEND_PARTIAL
from pycoll.algorithms._shape import blocks_from_counts


def steps(p):
    return p - 1


def bytes_on_wire(n, p):
    return (p - 1) * n


def reduce_bytes(n, p):
    return (p - 1) * n


def schedule(p, r, counts) -> tuple:
    """run()'s steps for the C lane, in the form _schedule.py describes."""
    blocks = blocks_from_counts(counts)
    right, left = (r + 1) % p, (r - 1) % p
    return tuple((right, left, blocks[(r - s - 1) % p], blocks[(r - s - 2) % p],
                  RS_LEFT | (RS_SEND_PARTIAL if s else 0) | (RS_INTO_RESULT if s == p - 2 else 0))
                 for s in range(p - 1))


def run(t):
    p, r, ch, send, data = t.size, t.rank, t.ch, t.send, t.data
    blocks = blocks_from_counts(t.counts)

    def view(buf, b):
        lo, n = blocks[b % p]
        return buf[lo:lo + n]

    right, left = (r + 1) % p, (r - 1) % p
    for s in range(p - 1):
        last = s == p - 2
        ch.sendrecv_reduce(view(send if s == 0 else data, r - s - 1), right, view(send, r - s - 2),
                           left, received_left=True, out=t.out if last else view(data, r - s - 2))
    if p == 1:
        t.out[:] = view(send, 0)
