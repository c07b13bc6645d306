"""allreduce, recursive doubling: log2(p) exchanges of the whole vector.

In round k rank r exchanges its whole partial with the rank 2^k away
(r XOR 2^k) and both compute lower ⊕ higher from the same two operands,
so after log2(p) rounds every rank holds the same bits (Note
[Bitwise-identical results] in _p2p.py).

A process count that is not a power of two is folded (``_shape.Fold``):
the first 2*rem ranks pair up, the even one hands its vector to the odd
one (one extra step before) and gets the result back (one extra step after).

    p = 6:  rank 0: send 1, recv 1        rank 1: recv+reduce 0, exchange 3, 5, send 0
            rank 4 (virtual 2): exchange 5 (virtual 3), exchange 1 (virtual 0)

Latency-optimal; sends the whole vector every round, so it is the choice
for small messages. Written as a schedule (_schedule.py), so that one
segment's worth runs in C.

    steps          log2(pof2) + 2 if p is not a power of two
    bytes sent     n * (log2(pof2) + 1 if p is not a power of two)
    bytes reduced  n * (log2(pof2) + 1 if p is not a power of two)
"""
import functools

from pycoll.algorithms._schedule import EXCHANGE, RECV, RECV_REDUCE, SEND, execute
from pycoll.algorithms._shape import Fold


def steps(p):
    fold = Fold(p)
    return fold.pof2.bit_length() - 1 + (2 if fold.rem else 0)


def bytes_on_wire(n, p):
    fold = Fold(p)
    return n * (fold.pof2.bit_length() - 1 + (1 if fold.rem else 0))


def reduce_bytes(n, p):
    return bytes_on_wire(n, p)


@functools.cache
def schedule(p: int, r: int) -> tuple:
    fold = Fold(p)
    v = fold.virtual(r)
    if v is None:                               # even rank of a pair: hand over, get back
        return ((SEND, r + 1), (RECV, r + 1))
    out: list = []
    if r < 2 * fold.rem:
        out.append((RECV_REDUCE, r - 1, True))
    mask = 1
    while mask < fold.pof2:
        partner = fold.real(v ^ mask)
        out.append((EXCHANGE, partner, partner < r))
        mask <<= 1
    if r < 2 * fold.rem:
        out.append((SEND, r - 1))
    return tuple(out)


def run(t):
    execute(t, schedule(t.size, t.rank))
