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
from pycoll.algorithms._schedule import EXCHANGE, SEED, execute_scan
from pycoll.algorithms._shape import log2_ceil


def steps(p):
    return log2_ceil(p)


def bytes_on_wire(n, p):
    return n * log2_ceil(p)


def reduce_bytes(n, p):
    return 2 * n * log2_ceil(p)


def schedule(p, r, exclusive):
    """This rank's steps (pycoll/algorithms/_schedule.py), read by run() and
    by the lane (ScanLane in pycoll/_lane_reduce.pyx)."""
    steps = [] if exclusive else [(SEED, -1)]
    mask = 1
    while mask < p:
        partner = r ^ mask
        if partner < p:
            steps.append((EXCHANGE, partner, partner < r))
        mask <<= 1
    return tuple(steps)


def run(t):
    execute_scan(t, schedule(t.size, t.rank, t.exclusive))
