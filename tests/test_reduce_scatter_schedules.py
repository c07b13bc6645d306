"""The reduce_scatter lane's schedules (the ring's and recursive halving's
``schedule``, read by ReduceScatterLane in pycoll/_lane_reduce.pyx), run
without MPI at every p up to 33.

Each rank's steps run as the lane runs them: a step posts its send, then
waits for its receive, and sends are buffered, one FIFO per (source, dest)
pair, as MPI's non-overtaking order keeps them. Rank r's vector is 2^r in
every element, so a result of 2^p - 1 in every element of block r says
every rank's block went in exactly once; every message must be received
whole and every step reached (no rank left waiting).
"""
from collections import defaultdict, deque

import numpy as np
import pytest

from pycoll.algorithms import reduce_scatter_recursive_halving, reduce_scatter_ring
from pycoll.algorithms._schedule import (RS_COPY, RS_INTO_RESULT, RS_MINE_PARTIAL,
                                         RS_NO_REDUCE, RS_SEND_PARTIAL)
from pycoll.algorithms._shape import blocks_from_counts

ITEM = 8                                    # int64
MODULES = {"ring": reduce_scatter_ring, "recursive_halving": reduce_scatter_recursive_halving}


def run_schedules(module, p: int, counts: list) -> list:
    """Every rank's result block after its schedule ran."""
    blocks = blocks_from_counts(counts)
    x = [np.full(sum(counts) // ITEM, 1 << r, np.int64) for r in range(p)]
    partial = [np.zeros(sum(counts) // ITEM, np.int64) for _ in range(p)]
    result = [np.zeros(blocks[r][1] // ITEM, np.int64) for r in range(p)]
    steps = [module.schedule(p, r, counts) for r in range(p)]
    queues = defaultdict(deque)
    at, posted = [0] * p, [False] * p

    def view(buf, lo, n):
        return buf[lo // ITEM:(lo + n) // ITEM]

    moved = True
    while moved:
        moved = False
        for r in range(p):
            if at[r] == len(steps[r]):
                continue
            dest, source, (slo, sn), (rlo, rn), flags = steps[r][at[r]]
            if flags & RS_COPY:
                result[r][:] = view(partial[r], rlo, rn)
            else:
                if dest >= 0 and not posted[r]:
                    sent = view(partial[r] if flags & RS_SEND_PARTIAL else x[r], slo, sn)
                    queues[(r, dest)].append(sent.copy())
                    posted[r] = moved = True
                if source >= 0:
                    if not queues[(source, r)]:
                        continue                    # wait for it
                    message = queues[(source, r)].popleft()
                    assert message.size * ITEM == rn, (p, r, at[r], message.size * ITEM, rn)
                    if flags & RS_INTO_RESULT:
                        assert rn == blocks[r][1], (p, r, at[r])
                        into = result[r]
                    else:
                        into = view(partial[r], rlo, rn)
                    if flags & RS_NO_REDUCE:
                        into[:] = message
                    else:
                        into[:] = message + view(partial[r] if flags & RS_MINE_PARTIAL else x[r],
                                                 rlo, rn)
            at[r] += 1
            posted[r], moved = False, True
    assert at == [len(s) for s in steps], f"p = {p}: ranks stuck at steps {at}"
    assert not any(queues.values()), f"p = {p}: messages never received"
    return result


@pytest.mark.parametrize("algorithm", sorted(MODULES))
@pytest.mark.parametrize("p", range(2, 34))
def test_every_rank_gets_its_block_reduced_once(algorithm, p):
    rng = np.random.default_rng(p)
    for counts in ([ITEM] * p, [int(c) * ITEM for c in rng.integers(1, 5, p)]):
        results = run_schedules(MODULES[algorithm], p, counts)
        for r, block in enumerate(results):
            assert block.size * ITEM == counts[r]
            assert (block == (1 << p) - 1).all(), (algorithm, p, counts, r, block)
