"""scan, linear: a segmented chain 0 -> 1 -> ... -> p-1.

Rank r receives the prefix of ranks 0..r-1, combines it with its own data
(the prefix on the left) and sends the new prefix on, segment by segment,
so the chain is pipelined. Exclusive: the received prefix is the result.

    steps          p - 1 (plus one per extra segment, pipelined)
    bytes sent     n (the limit of many segments; m of them take p - 2 + m
                   segment times: Note [Pipelined chains] in pycoll/tuning.py)
    bytes reduced  n
"""
from pycoll.algorithms._schedule import RECV_REDUCE, SEED, SEND


def steps(p):
    return p - 1


def bytes_on_wire(n, p):
    return n if p > 1 else 0


def reduce_bytes(n, p):
    return n if p > 1 else 0


def schedule(p, r, exclusive):
    """This rank's steps (pycoll/algorithms/_schedule.py) when the vector is
    one segment: run()'s messages, for the lane (ScanLane in
    pycoll/_lane_reduce.pyx)."""
    steps = [] if exclusive else [(SEED, -1)]
    if r > 0:
        steps.append((RECV_REDUCE, r - 1, True))
    if r + 1 < p:
        steps.append((SEND, r + 1))
    return tuple(steps)


def run(t):
    p, r, ch, send = t.size, t.rank, t.ch, t.send
    after = r + 1 if r + 1 < p else None
    if r == 0:
        if not t.exclusive:
            t.out[:] = send
        if after is not None:
            ch.send(send, after)
    elif t.exclusive:
        # the prefix arrives into out (the result) and goes on as prefix op x
        ch.recv_reduce_send(send, r - 1, after, received_left=True, out=t.data, keep=t.out)
    else:
        ch.recv_reduce_send(send, r - 1, after, received_left=True, out=t.out)
