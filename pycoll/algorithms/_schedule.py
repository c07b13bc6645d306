"""Schedules: algorithms that move the whole vector at every step.

Recursive doubling and the binomial tree never cut the vector: each step
sends it, receives it, or receives a partial and reduces it in. Such an
algorithm is written as its schedule for (p, rank): a tuple of steps

    (SEND, peer)                   send this rank's partial to peer
    (RECV, peer)                   receive the vector from peer
    (RECV_REDUCE, peer, left)      receive a partial, reduce it into ours
    (EXCHANGE, peer, left)         swap partials with peer, reduce

where *left* says the received partial is the left operand (Note
[Bitwise-identical results] in _p2p.py). The partial starts as the rank's
input (``send``) and lives in ``data`` from its first reduction or receipt;
a rank whose last step is a SEND (off a reduce's root) ends with no result.

A scan keeps two values, the partial and the result (the prefix so far),
and its schedule (ScanLane in pycoll/_lane_reduce.pyx) reads the same kinds
with one more:

    (SEED, -1)                     the result starts as the input (inclusive)
    (EXCHANGE, peer, left)         swap partials; one from the left reduces
                                   into both, the left operand of each (the
                                   result's first one is copied, exclusive)
    (RECV_REDUCE, peer, True)      the same from a lower rank, without sending
    (SEND, peer)                   send the partial on

Two interpreters run a schedule: ``execute`` below with the Channel's
segmented primitives, at any size; and pycoll/_lane_reduce.pyx, in C, when the
vector is one segment (the small-message lane). Both read the same
schedule, so the algorithm exists once.
"""
from __future__ import annotations

from pycoll._p2p import lands_in

SEND, RECV, RECV_REDUCE, EXCHANGE, SEED = 0, 1, 2, 3, 4

# A reduce_scatter's steps cut the vector, so its lane (ReduceScatterLane in
# pycoll/_lane_reduce.pyx) reads another form, made by the algorithm's
# schedule(p, r, counts): per step (dest, source, (lo, bytes) sent,
# (lo, bytes) received, flags), dest or source -1 where that half is not
# done, and the flags below. The step reduces the received range with this
# rank's operand of the same range, into the partial sums (the "output"
# scratch, at the range's offset) or the result.
RS_SEND_PARTIAL = 1     # send from the partial sums, not from x
RS_MINE_PARTIAL = 2     # this rank's operand is the partial sums' range, not x's
RS_INTO_RESULT = 4      # the received range lands in the result
RS_NO_REDUCE = 8        # only receive (a folded pair's even rank gets its block)
RS_LEFT = 16            # the received range is the left operand
RS_COPY = 32            # no message: the partial sums' range into the result


def execute(t, steps) -> None:
    """Run *steps* on task *t* with the Channel's primitives."""
    ch, data = t.ch, t.data
    mine = t.send
    theirs = None
    for step in steps:
        kind, peer = step[0], step[1]
        if kind == SEND:
            ch.send(mine, peer)
        elif kind == RECV:
            ch.recv(data, peer)
            mine = data
        elif kind == RECV_REDUCE:
            ch.recv_reduce(mine, peer, received_left=step[2], out=data)
            mine = data
        else:
            # The first exchange of a call that is not in place receives
            # straight into data (Note [Reduce in place] in _p2p.py).
            if lands_in(data, mine):
                into = data
            else:
                if theirs is None:
                    theirs = ch.scratch("work", len(data))
                into = theirs
            ch.sendrecv(mine, peer, into, peer)
            if step[2]:
                ch.reduce(data, into, mine)
            else:
                ch.reduce(data, mine, into)
            mine = data
    # A rank whose last step sent its partial on (off a reduce's root)
    # keeps no result; otherwise nothing arrived (p == 1).
    if mine is not data and not (steps and steps[-1][0] == SEND):
        data[:] = mine


def execute_scan(t, steps) -> None:
    """Run a scan's *steps* on task *t* with the Channel's primitives: the
    partial in t.data, the result in t.out."""
    ch, partial, result = t.ch, t.data, t.out
    mine = t.send
    theirs = None
    have_result = False
    for step in steps:
        kind, peer = step[0], step[1]
        if kind == SEED:
            result[:] = mine
            have_result = True
        elif kind == SEND:
            ch.send(mine, peer)
        else:
            if theirs is None:
                theirs = ch.scratch("work", len(partial))
            if kind == EXCHANGE:
                ch.sendrecv(mine, peer, theirs, peer)
            else:
                ch.recv(theirs, peer)
            if step[2]:
                # the partial first: in place, the result is the input
                ch.reduce(partial, theirs, mine)
                if have_result:
                    ch.reduce(result, theirs, result)
                else:
                    result[:] = theirs
                    have_result = True
            else:
                ch.reduce(partial, mine, theirs)
            mine = partial
