"""allreduce, recursive doubling: log2(p) exchanges of the whole vector.

In round k rank r exchanges its whole partial with the rank 2^k away
(r XOR 2^k) and both compute lower ⊕ higher from the same two operands,
so after log2(p) rounds every rank holds the same bits (Note
[Bitwise-identical results] in _p2p.py).

A process count that is not a power of two is folded (``_shape.Fold``):
the first 2*rem ranks pair up, the even one hands its vector to the odd
one (one extra step before) and gets the result back (one extra step after).

Latency-optimal; sends the whole vector every round, so it is the choice
for small messages.

    steps          log2(pof2) + 2 if p is not a power of two
    bytes sent     n * (log2(pof2) + 1 if p is not a power of two)
    bytes reduced  n * (log2(pof2) + 1 if p is not a power of two)
"""
from pycoll.algorithms._shape import Fold


def steps(p):
    fold = Fold(p)
    return fold.pof2.bit_length() - 1 + (2 if fold.rem else 0)


def bytes_on_wire(n, p):
    fold = Fold(p)
    return n * (fold.pof2.bit_length() - 1 + (1 if fold.rem else 0))


def reduce_bytes(n, p):
    return bytes_on_wire(n, p)


def run(t):
    p, r, ch, data = t.size, t.rank, t.ch, t.data
    fold = Fold(p)
    v = fold.virtual(r)
    if r < 2 * fold.rem:
        if v is None:                            # even: hand over, get the result
            ch.send(data, r + 1)
            ch.recv(data, r + 1)
            return
        ch.recv_reduce(data, r - 1, received_left=True)
    theirs = ch.scratch("work", len(data))
    mask = 1
    while mask < fold.pof2:
        partner = fold.real(v ^ mask)
        ch.sendrecv(data, partner, theirs, partner)
        if partner < r:
            ch.reduce(data, theirs, data)
        else:
            ch.reduce(data, data, theirs)
        mask <<= 1
    if r < 2 * fold.rem:
        ch.send(data, r - 1)
