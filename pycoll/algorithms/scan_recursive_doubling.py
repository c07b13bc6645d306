"""scan, recursive doubling (inclusive or exclusive prefix reduction).

Each rank keeps a partial (the reduction over its aligned group of 2^k
ranks) and its result. In round k it swaps partials with rank r XOR 2^k
(when that rank exists); a partial from a lower rank goes on the left of
both the partial and the result, one from a higher rank on the right of the
partial only. Works for any p. The exclusive result of rank 0 is undefined.

    steps          ceil(log2 p)
    bytes sent     n * ceil(log2 p)
    bytes reduced  2 n * ceil(log2 p)
"""
from pycoll.algorithms._shape import log2_ceil


def steps(p):
    return log2_ceil(p)


def bytes_on_wire(n, p):
    return n * log2_ceil(p)


def reduce_bytes(n, p):
    return 2 * n * log2_ceil(p)


def run(t):
    p, r, ch, partial, result = t.size, t.rank, t.ch, t.data, t.out
    partial[:] = t.send
    theirs = ch.scratch("work", len(partial))
    have_result = not t.exclusive
    if have_result:
        result[:] = partial
    mask = 1
    while mask < p:
        partner = r ^ mask
        if partner < p:
            ch.sendrecv(partial, partner, theirs, partner)
            if partner < r:
                ch.reduce(partial, theirs, partial)
                if have_result:
                    ch.reduce(result, theirs, result)
                else:
                    result[:] = theirs
                    have_result = True
            else:
                ch.reduce(partial, partial, theirs)
        mask <<= 1
