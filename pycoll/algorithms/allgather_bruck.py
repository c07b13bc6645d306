"""allgather, Bruck: ceil(log2 p) rounds for any p.

Each rank keeps a rotated buffer whose block i is rank (r + i)'s block. In
round k (distance d = 2^k) it sends its first min(d, p - d) blocks to rank
r - d and receives the same number from rank r + d into blocks d, d+1, ...;
a final rotation puts the blocks in rank order.

    p = 5, rank 0 holds    start: 0    d=1: 0 1    d=2: 0 1 2 3    d=4: 0 1 2 3 4

    steps          ceil(log2 p)
    bytes sent     (p - 1) * n            (n = one block)
    bytes reduced  0
"""
from pycoll.algorithms._shape import blocks_from_counts, log2_ceil, own_block, span


def steps(p):
    return log2_ceil(p)


def bytes_on_wire(n, p):
    return (p - 1) * n


def reduce_bytes(n, p):
    return 0


# This rank's own block is the algorithm's to put in place (the API does
# not): it goes to the front of the rotated buffer while the first round
# sends it from the input.
def run(t):
    p, r, ch, out = t.size, t.rank, t.ch, t.out
    total = sum(t.counts)
    rotated = blocks_from_counts([t.counts[(r + i) % p] for i in range(p)])
    buf = ch.scratch("work", total)
    split = t.displs[r]                 # rank r's block starts the rotated buffer
    tail = total - split
    mine, _ = own_block(t, split, t.counts[r])
    front = buf[:t.counts[r]]
    if p == 1:
        front[:] = mine
    d = 1
    while d < p:
        count = min(d, p - d)
        rlo, rn = span(rotated, d, d + count)
        if d == 1:
            ch.sendrecv_copying(mine, (r - 1) % p, buf[rlo:rlo + rn], (r + 1) % p, front)
        else:
            slo, sn = span(rotated, 0, count)
            ch.sendrecv(buf[slo:slo + sn], (r - d) % p, buf[rlo:rlo + rn], (r + d) % p)
        d <<= 1
    out[split:] = buf[:tail]
    out[:split] = buf[tail:]
