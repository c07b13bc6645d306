"""allreduce, ring: reduce-scatter then allgather around the ring.

The vector is cut into p chunks (``np.array_split`` of its elements). Every
rank sends to its right neighbour (r + 1) and receives from its left (r - 1).

Reduce-scatter: in step s, rank r sends chunk r - s and reduces the chunk
r - s - 1 that arrives into its own copy (the arriving partial is the left
operand). After p - 1 steps rank r holds chunk r + 1 complete:

    p = 3     step 0                  step 1                      owns
    rank 0    send c0, c2 = x2 + x0   send c2, c1 = (x1 + x2) + x0   c1
    rank 1    send c1, c0 = x0 + x1   send c0, c2 = (x2 + x0) + x1   c2
    rank 2    send c2, c1 = x1 + x2   send c1, c0 = (x0 + x1) + x2   c0

Allgather: p - 1 more steps pass the finished chunks on: in step s rank r
sends chunk r + 1 - s and receives chunk r - s.

Chunk c is summed in the order c, c + 1, ..., c - 1 on its way round and
finished on one rank, then copied (Note [Bitwise-identical results] in
_p2p.py). Each transfer is segmented; the reduction of one segment overlaps
the arrival of the next.

    steps          2(p - 1)
    bytes sent     2(p - 1)/p * n
    bytes reduced  (p - 1)/p * n
"""
from pycoll.algorithms._schedule import RS_LEFT, RS_NO_REDUCE, RS_SEND_PARTIAL
from pycoll.algorithms._shape import element_blocks


# Runs in place on a Pieces: every message is one chunk's range of the
# vector, addressed alike by its sender and its receiver.
PIECES = True


def steps(p):
    return 2 * (p - 1)


def bytes_on_wire(n, p):
    return 2 * (p - 1) * n / p


def reduce_bytes(n, p):
    return (p - 1) * n / p


def chunk_schedule(p: int, r: int, nbytes: int, itemsize: int) -> tuple:
    """run()'s messages for the C lane, in the reduce_scatter lane's form
    (pycoll/algorithms/_schedule.py), the partial sums being the result:
    p - 1 steps that send a chunk (x's own, then the partial sums') and
    reduce the arriving one into the result, x's chunk the right operand;
    then p - 1 steps of ring_allgather from chunk r + 1."""
    chunks = element_blocks(nbytes, itemsize, p)
    right, left = (r + 1) % p, (r - 1) % p
    reduce_scatter = tuple((right, left, chunks[(r - s) % p], chunks[(r - s - 1) % p],
                            RS_LEFT | (RS_SEND_PARTIAL if s else 0)) for s in range(p - 1))
    allgather = tuple((right, left, chunks[(r + 1 - s) % p], chunks[(r - s) % p],
                       RS_SEND_PARTIAL | RS_NO_REDUCE) for s in range(p - 1))
    return reduce_scatter + allgather


def run(t):
    p, r, ch, send, data = t.size, t.rank, t.ch, t.send, t.data
    chunks = element_blocks(len(data), t.itemsize, p)

    def chunk(buf, c):
        lo, n = chunks[c % p]
        return buf[lo:lo + n]

    # Every chunk meets this rank's own input once, as the right operand of
    # one reduction; chunk r is the one it never reduces (it arrives finished).
    right, left = (r + 1) % p, (r - 1) % p
    for s in range(p - 1):
        ch.sendrecv_reduce(chunk(send if s == 0 else data, r - s), right, chunk(send, r - s - 1),
                           left, received_left=True, out=chunk(data, r - s - 1))
    if p == 1 and data is not send:
        data[:] = send
    ring_allgather(ch, data, chunks, r, p, right, left, first=r + 1)


def ring_allgather(ch, buf, blocks, index, p, right, left, first, start=0):
    """Pass blocks around a ring until every position has all of them.

    The rank at ring position *index* starts with block *first* complete;
    in step s it sends block first - s and receives block first - s - 1.
    Blocks are indexed mod p; *right*/*left* are real ranks. Steps before
    *start* are the caller's.
    """
    def view(b):
        lo, n = blocks[b % p]
        return buf[lo:lo + n]

    for s in range(start, p - 1):
        ch.sendrecv(view(first - s), right, view(first - s - 1), left)
