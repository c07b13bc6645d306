"""The StepLane programs of pycoll/_lanes.py, run by a simulator instead of
MPI: every rank's program, for every p from 2 to 12 and every root, must pair
each send with a receive of the same size, finish when every message is a
rendezvous (a send completes only once its receive is posted, as MPI's
large messages do), and leave every rank with the collective's result.

The MPI grid (mpi_cases.py) runs the lanes themselves, at a few p and with
messages small enough to leave eagerly; this covers every p and root, and
the order of messages that only the rendezvous protocol would punish.
"""
import itertools
import random
from types import SimpleNamespace

import numpy as np
import pytest

from pycoll import _lane_move, _lanes

KIND = {code: name for name, code in _lane_move.STEP.items()}
BUFFER = {code: name for name, code in _lane_move.BUFFER.items()}
PS = range(2, 13)                           # at p = 1 every lane is a copy (Note [Solo lanes])


def run(programs, buffers):
    """Run every rank's steps with rendezvous messages: a send and its
    receive complete together, once both are posted, and a step completes
    when all its messages have. Each rank posts one step at a time, so
    messages between two ranks match in order. Returns the buffers; fails
    on a size mismatch or a deadlock."""
    p = len(programs)
    pc = [0] * p
    pending = [set() for _ in range(p)]     # "send" / "recv": the current step's messages not yet matched

    def span(r, buf, lo, n):
        return buffers[r][BUFFER[buf]][lo:lo + n]

    def post(r):
        """Start rank r's steps until one waits for a message."""
        while pc[r] < len(programs[r]) and not pending[r]:
            kind, dest, sb, so, sn, source, rb, ro, rn, cb, co = programs[r][pc[r]]
            kind = KIND[kind]
            if kind == "copy":
                assert sn == rn
                span(r, rb, ro, rn)[:] = span(r, sb, so, sn)
                pc[r] += 1
                continue
            if kind == "sendrecv_copy":
                span(r, cb, co, sn)[:] = span(r, sb, so, sn)
            if kind == "send_copy":                 # the receive span is copied, not received
                span(r, cb, co, rn)[:] = span(r, rb, ro, rn)
            pending[r] = {"send"} if kind in ("send", "send_copy") else {"recv"} if kind == "recv" \
                else {"send", "recv"}

    for r in range(p):
        post(r)
    while any(pending):
        progress = False
        for r in range(p):
            if "recv" not in pending[r]:
                continue
            step = programs[r][pc[r]]
            source, rb, ro, rn = step[5], step[6], step[7], step[8]
            theirs = programs[source][pc[source]] if "send" in pending[source] else None
            if theirs is None or theirs[1] != r:
                continue                    # the sender has not posted its send to r
            assert theirs[4] == rn, f"rank {source} sends {theirs[4]} bytes, rank {r} receives {rn}"
            span(r, rb, ro, rn)[:] = span(source, theirs[2], theirs[3], theirs[4])
            pending[r].discard("recv")
            pending[source].discard("send")
            progress = True
        assert progress, f"deadlock: ranks at steps {pc} of {[len(prog) for prog in programs]}"
        for r in range(p):
            if not pending[r] and pc[r] < len(programs[r]):
                pc[r] += 1
                post(r)
    assert pc == [len(prog) for prog in programs]
    return buffers


def rank_data(r: int, n: int) -> np.ndarray:
    return (np.arange(n, dtype=np.int64) * 7 + 1000 * r + 1).astype(np.uint8)


def comm(p, r):
    return SimpleNamespace(size=p, rank=r)


def uneven(p):
    """Block sizes of np.array_split of 3p + 1 rows of 4 bytes."""
    return tuple(4 * len(b) for b in np.array_split(np.arange(3 * p + 1), p))


def count_sets(p):
    """Even, uneven and random blocks; then some empty (Note [Empty lanes]):
    one rank's data only, np.array_split of fewer rows than ranks, random."""
    rng = random.Random(p)
    some_empty = tuple(4 * len(b) for b in np.array_split(np.arange(p // 2 + 1), p))
    return [(4,) * p, uneven(p), tuple(rng.randint(1, 9) for _ in range(p)),
            (0,) * (p - 1) + (4,), (4,) + (0,) * (p - 1), some_empty,
            tuple(rng.choice((0, 0, 3, 8)) for _ in range(p - 1)) + (5,)]


def no_empty_message(programs) -> None:
    """A data program sends and receives no empty message: the general path
    sends none (Note [Empty lanes]), and the lane refuses them."""
    for r, program in enumerate(programs):
        for step in program:
            kind = KIND[step[0]]
            assert (kind not in ("send", "sendrecv", "sendrecv_copy", "copy", "send_copy")
                    or step[4] > 0) \
                and (kind not in ("recv", "sendrecv", "sendrecv_copy", "send_copy")
                     or step[8] > 0), (r, step)


@pytest.mark.parametrize("p", PS)
@pytest.mark.parametrize("program", ["ring", "recursive_doubling", "bruck"])
def test_allgather_programs(p, program):
    make = {"ring": _lanes._allgather_ring_program, "recursive_doubling": _lanes._allgather_rd_program,
            "bruck": _lanes._allgather_bruck_program}[program]
    big = _lanes.COPY_OVERLAP                       # the own block copied while it is sent
    for counts in count_sets(p) + [(big,) * p, (big,) + (0,) * (p - 1), (0, big) * (p // 2) + (1,) * (p % 2)]:
        total = sum(counts)
        programs = [make(p, r, counts) for r in range(p)]
        no_empty_message(programs)
        buffers = [{"x": rank_data(r, counts[r]), "out": np.zeros(total, np.uint8),
                    "work": np.zeros(total, np.uint8)} for r in range(p)]
        run(programs, buffers)
        expected = np.concatenate([rank_data(r, counts[r]) for r in range(p)])
        for r in range(p):
            np.testing.assert_array_equal(buffers[r]["out"], expected, err_msg=f"rank {r}, {counts}")


def alltoall_matrices(p: int):
    """Byte matrices m[i][j] (what rank i sends rank j): the even splits of
    a few lengths (the last two with empty blocks), then uneven ones: random
    with zeros, one rank sending everything to one other, nothing sent."""
    for rows in (p, 2 * p, 5 * p, p - 1, p // 2):
        counts = [4 * len(b) for b in np.array_split(np.arange(rows), p)]
        yield [counts] * p
    rng = random.Random(p)
    yield [[4 * rng.choice((0, 0, 1, 3, 7)) for _ in range(p)] for _ in range(p)]
    yield [[8 if (i, j) == (p - 1, 0) else 0 for j in range(p)] for i in range(p)]
    yield [[0] * p for _ in range(p)]


@pytest.mark.parametrize("p", PS)
def test_alltoall_program(p):
    for matrix in alltoall_matrices(p):
        mine = [rank_data(r, sum(matrix[r])) for r in range(p)]
        received = [[matrix[s][r] for s in range(p)] for r in range(p)]
        programs = [_lanes._alltoall_program(p, r, matrix[r], received[r]) for r in range(p)]
        no_empty_message(programs)
        buffers = [{"x": mine[r], "out": np.zeros(sum(received[r]), np.uint8)} for r in range(p)]
        run(programs, buffers)
        for r in range(p):
            blocks = [mine[s][sum(matrix[s][:r]):sum(matrix[s][:r + 1])] for s in range(p)]
            np.testing.assert_array_equal(buffers[r]["out"], np.concatenate(blocks),
                                          err_msg=f"rank {r}, {matrix}")


@pytest.mark.parametrize("p", PS)
def test_barrier_program(p):
    """Every round's messages meet, and no rank leaves before every rank has
    entered: after the rounds, each rank has heard from all others, through
    some chain of messages (tracked here as the set of ranks known)."""
    programs = [_lanes._barrier_program(p, r) for r in range(p)]
    assert all(len(prog) == (p - 1).bit_length() for prog in programs)
    run(programs, [{"word": np.zeros(0, np.uint8)} for _ in range(p)])
    known = [{r} for r in range(p)]
    for k in range(len(programs[0])):
        heard = [set(known[programs[r][k][5]]) for r in range(p)]
        for r in range(p):
            known[r] |= heard[r]
    assert all(k == set(range(p)) for k in known)


def rooted(p, root, counts, algorithm):
    plan = SimpleNamespace(algorithm=algorithm, args=SimpleNamespace(root=root, counts=counts))
    return [_lanes._RootedLane(comm(p, r), plan, ()) for r in range(p)]


@pytest.mark.parametrize("p", PS)
@pytest.mark.parametrize("algorithm", ["binomial", "linear"])
def test_gather_and_scatter_programs(p, algorithm):
    for counts, root in itertools.product(count_sets(p), range(p)):
        lanes = rooted(p, root, counts, algorithm)
        total = sum(counts)
        blocks = [rank_data(r, counts[r]) for r in range(p)]
        whole = np.concatenate(blocks)

        buffers = [{"x": blocks[r], "out": np.zeros(total, np.uint8),
                    "work": np.zeros(total, np.uint8)} for r in range(p)]
        programs = [lane.gather_steps() for lane in lanes]
        no_empty_message(programs)
        run(programs, buffers)
        np.testing.assert_array_equal(buffers[root]["out"], whole,
                                      err_msg=f"gather to {root}, {counts}")

        buffers = [{"x": whole if r == root else np.zeros(0, np.uint8),
                    "out": np.zeros(counts[r], np.uint8),
                    "work": np.zeros(total, np.uint8)} for r in range(p)]
        programs = [lane.scatter_steps() for lane in lanes]
        no_empty_message(programs)
        run(programs, buffers)
        for r in range(p):
            np.testing.assert_array_equal(buffers[r]["out"], blocks[r],
                                          err_msg=f"scatter from {root} to {r}, {counts}")


def test_the_simulator_finds_a_deadlock():
    """Two ranks that both send before receiving: eager MPI would let
    them through, a rendezvous does not."""
    step = _lanes._step
    programs = [[step("send", send=("x", 0, 4), dest=1 - r), step("recv", recv=("out", 0, 4), source=1 - r)]
                for r in range(2)]
    buffers = [{"x": rank_data(r, 4), "out": np.zeros(4, np.uint8)} for r in range(2)]
    with pytest.raises(AssertionError, match="deadlock"):
        run(programs, buffers)


def test_the_simulator_finds_a_size_mismatch():
    step = _lanes._step
    programs = [[step("send", send=("x", 0, 4), dest=1)], [step("recv", recv=("out", 0, 2), source=0)]]
    buffers = [{"x": rank_data(0, 4)}, {"out": np.zeros(4, np.uint8)}]
    with pytest.raises(AssertionError, match="sends 4 bytes, rank 1 receives 2"):
        run(programs, buffers)
