"""Lanes: the C programs of plain, repeated calls.

A lane (pycoll/_lane_move.pyx, pycoll/_lane_reduce.pyx) runs one call
signature's messages as C calls over MPI, without the Python of the
general path (api.py), which at small sizes is most of a call's time. The functions here make a signature's lane
on its first call, from the plan the general path would run: the same
messages, tags and order, so that ranks taking either path meet. Each
make_*() returns the lane, or None when the call must take the general path
(which also reports whatever is wrong with it); api.py's entry points try
the lane first and make it with made().

A StepLane program is a list of _step()s: copies between its buffers (x,
out, work and the header word) and sends, receives and exchanges of byte
spans of them.
"""
from __future__ import annotations

import numpy as np

from pycoll import _header, _lane_move, _message, _resources
from pycoll._dtypes import dtype_of
from pycoll._header import HEADER_INLINE, INLINE_BYTES, SHORT_DIMS, WORD_BYTES
from pycoll._p2p import COPY_OVERLAP
from pycoll._plan import (LANE_MAX_BYTES, _alltoall_args, _broadcast_plan, _cached_lane,
                          _check_algorithm, _check_counts, _check_matrix, _check_root,
                          _gather_args, _keep, _plan, _scatter_plan)
from pycoll.algorithms._shape import Fold, binomial_subtree, blocks_from_counts, span
from pycoll.algorithms.broadcast_binomial import binomial_edges


def made(c, key: tuple, make) -> bool:
    """After a lane entry of pycoll._lane_move answered NOT_TAKEN: whether it
    had no lane for this call signature (*key*) and make() has just made
    one (on the signature's first call), so that the caller tries the entry
    again."""
    if c.transport is None or not c._progress.in_turn():
        return False
    try:
        if key in c._plans:
            return False                    # a signature without a lane, or a call it refused
    except TypeError:
        return False                        # an unhashable argument: the general path says why
    return _cached_lane(c, key, make) is not None


def _step(kind: str, send=None, dest: int = -1, recv=None, source: int = -1, copy=None) -> tuple:
    """One step of a pycoll._lane_move.StepLane program; a span is (buffer
    name, lo, hi) in bytes. A "copy" step copies *send* to *recv*; a
    "send_copy" sends *send* and copies *recv* (nothing is received) to
    *copy* meanwhile."""
    sb, slo, shi = send or ("x", 0, 0)
    rb, rlo, rhi = recv or ("x", 0, 0)
    cb, clo, _ = copy or ("x", 0, 0)
    buffer = _lane_move.BUFFER
    return (_lane_move.STEP[kind], dest, buffer[sb], slo, shi - slo, source, buffer[rb], rlo,
            rhi - rlo, buffer[cb], clo)


def _without_empty(steps) -> list:
    """A data-movement program without its empty messages and copies
    (Note [Empty lanes]): an exchange with one side empty becomes the other
    side alone, after its copy if it had one; a send_copy without its send
    or its copy, the other alone."""
    kinds, names = _lane_move.STEP, {code: name for name, code in _lane_move.BUFFER.items()}
    kept = []
    for step in steps:
        kind, dest, sb, slo, sn, source, rb, rlo, rn, cb, clo = step
        send, recv = (names[sb], slo, slo + sn), (names[rb], rlo, rlo + rn)
        if kind == kinds["send_copy"] and not (sn and rn):
            if rn:
                kept.append(_step("copy", send=recv, recv=(names[cb], clo, clo + rn)))
            if sn:
                kept.append(_step("send", send=send, dest=dest))
        elif kind in (kinds["sendrecv"], kinds["sendrecv_copy"]) and not (sn and rn):
            if sn and kind == kinds["sendrecv_copy"]:
                kept.append(_step("copy", send=send, recv=(names[cb], clo, clo + sn)))
            if sn:
                kept.append(_step("send", send=send, dest=dest))
            if rn:
                kept.append(_step("recv", recv=recv, source=source))
        elif sn or rn:
            kept.append(step)
    return kept


def _largest_message(steps) -> int:
    """The largest message a StepLane program sends or receives."""
    kinds = _lane_move.STEP
    sizes = [n for kind, *rest in steps if kind != kinds["copy"]
             for n in ((rest[3],) if kind == kinds["send_copy"] else (rest[3], rest[7]))]
    return max(sizes, default=0)


# Note [Empty lanes]
# ~~~~~~~~~~~~~~~~~~
# An allreduce or reduce of no elements, and a reduce_scatter, gather,
# allgather or alltoall whose every block is empty (x has no rows, or rows
# of no elements), sends no message on the general path, whatever the
# algorithm: Channel skips empty transfers, as MPI does for a count of 0.
# Its lane is therefore the empty program: one tag taken, as the general
# path takes, the empty result allocated, nothing sent. Without it such a
# call cost 6-12 us in Python at p = 2 against native MPI's 1 us. Where
# only some blocks are empty (an alltoall of fewer rows than ranks, a
# gather with a 0 in sizes=, a scatter of fewer rows than ranks), the
# programs leave out the empty messages as the general path does
# (_without_empty here; _plan._schedule_without_empty for the schedules
# of reduce_scatter and the ring's allreduce): an exchange with one side
# empty is its other side alone, a blocking send or receive whose peer,
# in the same step, posts the matching receive or send, so no cycle of
# sends waits on itself (tests/test_lane_programs.py runs them with
# rendezvous messages).


# Note [Solo lanes]
# ~~~~~~~~~~~~~~~~~
# On one rank every collective is a copy of x (a reduction of one operand;
# AVG divides by 1), and the general path spent 5-13 us of Python on it
# where MPI takes well under one. So at p = 1 the lanes take these calls
# too: allreduce, reduce and reduce_scatter as an allreduce lane without
# steps (its result is a copy of x), gather, allgather, alltoall and
# scatter as a StepLane of one copy (no step for no data). Frameworks run
# at world size 1 for tests and debugging.

def _solo_lane(c, collective: str, plan, x):
    """The lane of a gather, allgather, alltoall or scatter at p = 1: the
    result, a copy of x (Note [Solo lanes])."""
    n = x.nbytes
    steps = [_step("copy", send=("x", 0, n), recv=("out", 0, n))] if n else []
    return _lane_move.StepLane(c, c.transport, steps, plan.args.shape, x.dtype, n, n, 0, True,
                               collective=collective, algorithm=plan.algorithm,
                               own_at=0 if collective in ("allgather", "gather") else -1)


def _root_lane_args(c, collective: str, x, root, algorithm):
    """(root, algorithm, DType) of a root's call that a lane may take, or
    None when they are not plainly valid (the general path reports why)."""
    try:
        r = _check_root(root, c.size)
        alg = _check_algorithm(collective, algorithm)
        dtype = dtype_of(x.dtype, "x")
    except (TypeError, ValueError):
        return None
    return (r, alg, dtype) if r == root else None


# ---------------------------------------------------------------------------
# The broadcast lane: the binomial tree's edges, one message each, the data
# inside the header's message when it fits.


def make_broadcast(c, x, root, algorithm, rest):
    """The lane (pycoll._lane_move.BroadcastLane) of this signature: the
    binomial tree (or, at p = 2, the pipeline: one link, one message) with
    the data in one message, inside the header's when it fits
    (_header.inline_broadcast); None when the call must take the general path
    (which also reports whatever is wrong with it). A receiver's lane hands
    a header it did not expect to rest(c, x, root, algorithm, message,
    deadline), the general path from there, with the caller's algorithm."""
    checked = _root_lane_args(c, "broadcast", x, root, algorithm)
    if checked is None or x.ndim > SHORT_DIMS or x.nbytes > LANE_MAX_BYTES:
        return None
    r, alg, dtype = checked
    if x.dtype != dtype.numpy:
        return None
    plan = _broadcast_plan(c, dtype, x.shape, r, alg)
    if not _header.on_tree(c, plan) or x.nbytes > plan.channel.segment:
        return None
    parent, children = binomial_edges(r, c.rank, c.size)
    inline = _header.inline_broadcast(c, plan, x.nbytes)
    room = WORD_BYTES + (x.nbytes if inline else 0) if parent is None else WORD_BYTES + INLINE_BYTES
    word = _header.make_word(dtype, x.shape)
    if inline:
        word[0] = HEADER_INLINE
    return _lane_move.BroadcastLane(c, c.transport, word.view(np.uint8), -1 if parent is None else parent,
                                    children, x.nbytes, x.dtype.alignment, inline, room,
                                    lambda x, message, deadline, algorithm:
                                    rest(c, x, r, algorithm, message, deadline),
                                    algorithm=plan.algorithm)


# Note [Broadcasts into None]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~
# A rank off the root may pass x=None and get a new array, shaped by the
# header the root sends first. Its lane cannot know that shape before the
# header arrives, so it guesses: the last broadcast from that root and
# algorithm that this rank received into None left its dtype and shape
# under ("broadcast-none", root, algorithm) (remember_broadcast) and made
# that signature's lane. The lane entry receives into a new array of that
# shape; a header that says otherwise goes, as on any receiver's lane, to
# the general path from there (BroadcastLane's rest), which gets None for
# x and allocates what the header says. Before, every such call took the
# general path: 28.5 us at 8 B and p = 2 (MPICH), against 3.6 us for a
# scatter with x=None on its lane.

def remember_broadcast(c, y, root: int, algorithm, rest) -> None:
    """After a broadcast received into x=None off the root: the lane of
    y's signature, and y's dtype and shape as the next such call's guess
    (Note [Broadcasts into None]); no guess when there is no lane."""
    key = ("broadcast-lane", y.dtype, y.shape, root, algorithm)
    made(c, key, lambda: make_broadcast(c, y, root, algorithm, rest))
    try:
        lane = c._plans.get(key)
    except TypeError:
        return
    if lane is not None:
        _keep(c, ("broadcast-none", root, algorithm), None, lambda: (y.dtype, y.shape))
    else:
        c._plans.pop(("broadcast-none", root, algorithm), None)


# ---------------------------------------------------------------------------
# The allgather lane: a repeated, plain allgather of one (dtype, shape,
# algorithm), every message within a segment, runs as a
# pycoll._lane_move.StepLane program made from the algorithm's messages
# below, with none of the Python of a general call (about 10 us of it, a
# seventh of a 1 MiB allgather at p = 2 here). The messages, tags and
# their order are those of allgather_ring.run,
# allgather_recursive_doubling.run and allgather_bruck.run, so ranks taking
# either path meet.


def make_allgather(c, x, algorithm, sizes=None):
    """The lane of this signature (*sizes*: None or a tuple of ints), or
    None when the call must take the general path (which also reports
    whatever is wrong with it)."""
    try:
        plan = _plan(c, ("allgather", x.dtype, x.shape, algorithm, sizes),
                     lambda: _gather_args("allgather", c, x, algorithm, sizes))
    except (TypeError, ValueError):
        return None
    counts, p = plan.args.counts, c.size
    if x.dtype != plan.args.dtype.numpy:
        return None
    if p == 1:
        return _solo_lane(c, "allgather", plan, x)
    if max(counts) == 0:
        steps = []                          # Note [Empty lanes]
    elif plan.algorithm == "ring":
        steps = _allgather_ring_program(p, c.rank, counts)
    elif plan.algorithm == "recursive_doubling":
        steps = _allgather_rd_program(p, c.rank, counts)
    elif plan.algorithm == "bruck":
        steps = _allgather_bruck_program(p, c.rank, counts)
    else:
        return None
    if len(steps) > _resources.MAX_LANE_STEPS \
            or _largest_message(steps) > min(plan.channel.segment, LANE_MAX_BYTES):
        return None
    work = sum(counts) if plan.algorithm == "bruck" else 0
    return _lane_move.StepLane(c, c.transport, steps, plan.args.shape, x.dtype, counts[c.rank],
                               sum(counts), work, True, collective="allgather",
                               algorithm=plan.algorithm, own_at=sum(counts[:c.rank]))


# Note [Own blocks]
# ~~~~~~~~~~~~~~~~~
# MPI's in-place allgather and gather (MPI_IN_PLACE) keep each rank's
# block where the result puts it; in pycoll that is x passed as its own
# block of out, comm.allgather(buf[lo:hi], out=buf). The programs only
# read x (to send it, and to copy it into its block, a copy onto itself
# that StepLane skips) and write every other block (Bruck's rotation
# writes x's block too, with the copy of x its first round made in
# work, after x's last read), and a gather's root
# on a rotated tree copies x into work first; so the lanes take such a
# call (StepLane's own_at) where any other overlap of x and out goes to
# the general path, which copies x first. At 8 B on two ranks an
# in-place allgather took 36-37 us on the general path, 3.7-4.4 us on
# its lane (native MPI_IN_PLACE 2.9-3.6 us; bench/NOTES.md).


def _allgather_ring_program(p: int, r: int, counts) -> list:
    """Rank r's steps of allgather_ring.run (x apart from out): step 0
    sends x to the right while copying it into its place; step s forwards
    block r - s to the right and receives block r - s - 1 from the left."""
    spans = [(lo, lo + n) for lo, n in blocks_from_counts(counts)]
    right, left = (r + 1) % p, (r - 1) % p
    steps = _exchange_copying(("x", 0, counts[r]), right, ("out", *spans[left]), left,
                              ("out", *spans[r]))
    return _without_empty(steps + [_step("sendrecv", send=("out", *spans[(r - s) % p]), dest=right,
                                         recv=("out", *spans[(r - s - 1) % p]), source=left)
                                   for s in range(1, p - 1)])


def _exchange_copying(send, dest: int, recv, source: int, copy) -> list:
    """The steps of Channel.sendrecv_copying (the copy first below
    COPY_OVERLAP bytes, else while the messages are in flight)."""
    if send[2] - send[1] < COPY_OVERLAP:
        return [_step("copy", send=send, recv=copy),
                _step("sendrecv", send=send, dest=dest, recv=recv, source=source)]
    return [_step("sendrecv_copy", send=send, dest=dest, recv=recv, source=source, copy=copy)]


def _allgather_rd_program(p: int, r: int, counts) -> list:
    """Rank r's steps of allgather_recursive_doubling.run (x apart from out):
    the folded ranks' hand-over, the rounds of swaps, the hand-back."""
    fold = Fold.of(p)
    v = fold.virtual(r)
    blocks = blocks_from_counts(counts)
    lo, n = blocks[r]
    mine: tuple | None = ("x", 0, n)
    copy: tuple | None = ("out", lo, lo + n)
    whole = ("out", 0, sum(counts))
    steps = []
    if r < 2 * fold.rem:
        if v is None:
            return _without_empty([_step("send", send=mine, dest=r + 1),
                                   _step("recv", recv=whole, source=r + 1)])
        steps.append(_step("copy", send=mine, recv=copy))
        mine, copy = copy, None
        plo, pn = blocks[r - 1]
        steps.append(_step("recv", recv=("out", plo, plo + pn), source=r - 1))

    def virtual_span(first, last):
        vlo, vn = span(blocks, fold.first(first), fold.first(last))
        return ("out", vlo, vlo + vn)

    mask = 1
    while mask < fold.pof2:
        mine_v, theirs = v & ~(mask - 1), (v ^ mask) & ~(mask - 1)
        partner = fold.real(v ^ mask)
        received = virtual_span(theirs, theirs + mask)
        if copy is not None:
            steps += _exchange_copying(mine, partner, received, partner, copy)
            copy = None
        else:
            steps.append(_step("sendrecv", send=virtual_span(mine_v, mine_v + mask), dest=partner,
                               recv=received, source=partner))
        mask <<= 1
    if r < 2 * fold.rem:
        steps.append(_step("send", send=whole, dest=r - 1))
    return _without_empty(steps)


def _allgather_bruck_program(p: int, r: int, counts) -> list:
    """Rank r's steps of allgather_bruck.run (x apart from out, or its own
    block of out): the blocks gathered rotated in work, rank r's first,
    its own copied there while the first round sends it, then rotated
    into out."""
    total = sum(counts)
    rotated = blocks_from_counts([counts[(r + i) % p] for i in range(p)])
    split = sum(counts[:r])                     # rank r's block starts the rotated buffer
    tail = total - split
    steps = []
    d = 1
    while d < p:
        count = min(d, p - d)
        rlo, rn = span(rotated, d, d + count)
        received = ("work", rlo, rlo + rn)
        if d == 1:
            steps += _exchange_copying(("x", 0, counts[r]), (r - 1) % p, received, (r + 1) % p,
                                       ("work", 0, counts[r]))
        else:
            slo, sn = span(rotated, 0, count)
            steps.append(_step("sendrecv", send=("work", slo, slo + sn), dest=(r - d) % p,
                               recv=received, source=(r + d) % p))
        d <<= 1
    steps += [_step("copy", send=("work", 0, tail), recv=("out", split, total)),
              _step("copy", send=("work", tail, total), recv=("out", 0, split))]
    return _without_empty(steps)


# ---------------------------------------------------------------------------
# Lanes of gather and scatter: a repeated, plain call of one signature whose
# every message fits in one segment runs its algorithm's messages as C calls
# (pycoll/_lane_move.pyx), without the general path's Python (10-25 us of
# it at 8 B, p = 2). The messages, tags and their order are those of the
# general path (gather_linear/gather_binomial, scatter_linear/
# scatter_binomial and the header), so ranks taking either path meet.


class _RootedLane:
    """The byte spans a gather or scatter moves at this rank, for its
    plan's algorithm: with *buffer*, this rank's block goes to or comes
    from buffer[own] and the children's subtrees are buffer[lo:hi] from or
    to their ranks; *up* is (parent rank, lo, hi) or None at the root; a
    rank without children sends or receives its block alone. The root's
    buffer is laid out by rank when *rotate* is 0, else relative to the
    root (rank order rotated by *rotate* bytes)."""

    __slots__ = ("shape", "total", "own", "up", "children", "rotate")
    up: tuple | None                    # (parent, lo, hi) of what goes up; None at the root

    def __init__(self, c, plan, shape: tuple):
        p, r, root, counts = c.size, c.rank, plan.args.root, plan.args.counts
        self.shape, self.total, self.rotate = shape, sum(counts), 0
        if plan.algorithm == "linear":
            displs = blocks_from_counts(counts)
            lo, n = displs[r]
            self.own = (lo, lo + n)
            self.up = None if r == root else (root, lo, lo + n)
            self.children = [] if r != root else [
                (i, displs[i][0], displs[i][0] + displs[i][1]) for i in range(p) if i != root]
            return
        rel = (r - root) % p
        blocks = blocks_from_counts([counts[(i + root) % p] for i in range(p)])
        parent, end, children = binomial_subtree(rel, p)
        self.own = (blocks[rel][0], blocks[rel][0] + blocks[rel][1])
        self.up = None if parent is None else (
            (parent + root) % p, blocks[rel][0], blocks[end - 1][0] + blocks[end - 1][1])
        self.children = [((first + root) % p, blocks[first][0],
                          blocks[last - 1][0] + blocks[last - 1][1]) for first, last in children]
        if r == root:
            self.rotate = sum(counts[:root])

    @staticmethod
    def fits(c, plan) -> bool:
        """Whether every message is one whole segment's C call: p >= 2
        and the whole vector within a segment (empty blocks send nothing,
        Note [Empty lanes])."""
        counts = plan.args.counts
        return c.size >= 2 and sum(counts) <= min(plan.channel.segment, LANE_MAX_BYTES)

    def gather_steps(self) -> list:
        """A gather's steps at this rank (pycoll._lane_move.StepLane): the
        root's out filled with every rank's x, in rank order; a rank with
        children gathers its subtree in work (the root of a tree in rank
        order straight in out), then sends it up."""
        lo, hi = self.own
        x = ("x", 0, hi - lo)
        if not self.children:                   # a leaf (p >= 2: not the root)
            assert self.up is not None
            return _without_empty([_step("send", send=x, dest=self.up[0])])
        buf = "out" if self.rotate == 0 and self.up is None else "work"
        steps = [_step("copy", send=x, recv=(buf, lo, hi))]
        steps += [_step("recv", recv=(buf, clo, chi), source=rank) for rank, clo, chi in self.children]
        if self.up is not None:
            dest, ulo, uhi = self.up
            steps.append(_step("send", send=(buf, ulo, uhi), dest=dest))
        elif buf == "work":
            split = self.rotate             # relative order back to rank order
            tail = self.total - split
            steps += [_step("copy", send=("work", 0, tail), recv=("out", split, self.total)),
                      _step("copy", send=("work", tail, self.total), recv=("out", 0, split))]
        return _without_empty(steps)

    def scatter_steps(self) -> list:
        """A scatter's data steps at this rank (pycoll._lane_move.StepLane),
        after the header: the root sends each child its subtree's blocks
        from x (rotated into work first when the tree is not in rank order),
        largest subtree first; a rank with children receives its subtree in
        work and passes theirs on; every rank's own block ends in out, a
        rank with children copying it while its first send is in flight
        (Note [Own block in flight])."""
        lo, hi = self.own
        if self.up is None:
            buf, steps = "x", []
            if self.rotate:
                split, tail = self.rotate, self.total - self.rotate
                buf = "work"
                steps += [_step("copy", send=("x", split, self.total), recv=("work", 0, tail)),
                          _step("copy", send=("x", 0, split), recv=("work", tail, self.total))]
        elif not self.children:
            return _without_empty([_step("recv", recv=("out", 0, hi - lo), source=self.up[0])])
        else:
            source, ulo, uhi = self.up
            buf, steps = "work", [_step("recv", recv=("work", ulo, uhi), source=source)]
        (first, flo, fhi), *others = reversed(self.children)
        steps.append(_step("send_copy", send=(buf, flo, fhi), dest=first, recv=(buf, lo, hi),
                           copy=("out", 0, hi - lo)))
        steps += [_step("send", send=(buf, clo, chi), dest=rank) for rank, clo, chi in others]
        return _without_empty(steps)


# Note [Own block in flight]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~
# A scatter's root, and a rank of the binomial tree with children, keeps
# its own block and sends the rest on. Its lane copies the block into out
# while its first send (the largest subtree's, on the tree) is in flight
# (a "send_copy" step: MPI_Isend, the copy, MPI_Wait), as the general
# path copies it while its sends are in flight (bench/NOTES.md,
# "Scatter's own block"). Before, the lane copied it after its last send:
# a large send waits for its receiver, whose MPI call moves the data, and
# the copy came after it instead of beside it (at 4-16 MiB and p = 2 the
# lane now moves 1.7-1.8x native's bandwidth, 1.0x before). A receive
# does not gain the same way (a gather's root, tried): its message moves
# while the receiver is inside MPI, not while it copies.


def make_gather(c, x, root, algorithm, sizes=None):
    """The lane of this signature (*sizes*: None or a tuple of ints), or
    None when the call must take the general path (which also reports
    whatever is wrong with it)."""
    try:
        r = _check_root(root, c.size)
        plan = _plan(c, ("gather", x.dtype, x.shape, root, algorithm, sizes),
                     lambda: _gather_args("gather", c, x, algorithm, sizes, root=r))
    except (TypeError, ValueError):
        return None
    if r != root or x.dtype != plan.args.dtype.numpy:
        return None
    if c.size == 1:
        return _solo_lane(c, "gather", plan, x)
    if max(plan.args.counts) == 0:                          # Note [Empty lanes]
        return _lane_move.StepLane(c, c.transport, [], plan.args.shape, x.dtype, 0, 0, 0,
                                   c.rank == r, collective="gather", algorithm=plan.algorithm)
    if not _RootedLane.fits(c, plan):
        return None
    lane = _RootedLane(c, plan, plan.args.shape)
    steps = lane.gather_steps()
    if len(steps) > _resources.MAX_LANE_STEPS:
        return None
    # Work where the rank forwards its subtree or the root reorders.
    work = lane.total if lane.children and (lane.up is not None or lane.rotate) else 0
    return _lane_move.StepLane(c, c.transport, steps, plan.args.shape, x.dtype,
                               lane.own[1] - lane.own[0], lane.total, work, lane.up is None,
                               collective="gather", algorithm=plan.algorithm,
                               own_at=sum(plan.args.counts[:r]) if c.rank == r else -1)


def make_scatter_receiver(c, root, algorithm, receive, sizes=None):
    """A non-root's header lane (pycoll._lane_move.ScatterReceiver) for
    scatters from *root* (of *sizes*: None or a tuple of ints), or None. A
    header word that does not name its last data lane goes to
    receive(c, receiver, root, algorithm, message, out, tag, deadline)."""
    try:
        r = _check_root(root, c.size)
        alg = _check_algorithm("scatter", algorithm)
        _check_counts(sizes, c.size)        # bad sizes raise before the header, on the general path
    except (TypeError, ValueError):
        return None
    if r != root or r == c.rank:
        return None
    parent, children = binomial_edges(r, c.rank, c.size)
    receiver = _lane_move.ScatterReceiver(
        c, c.transport, parent, children,
        lambda message, out, tag, deadline:
        receive(c, receiver, r, alg, message, out, tag, deadline or None),
        WORD_BYTES + INLINE_BYTES, HEADER_INLINE)
    return receiver


def make_scatter_data(c, word, root, algorithm, sizes=None):
    """A receiver's data lane of the signature a header word names (and
    *sizes*), or None: sizes that do not add up to the root's rows are the
    general path's error to raise."""
    dtype, shape = _header.read(c, root, None, word)
    try:
        plan = _scatter_plan(c, dtype, shape, root, algorithm, sizes)
    except ValueError:
        return None
    if word[0] == HEADER_INLINE:
        return _inline_scatter_lane(c, plan, dtype.numpy, None)
    if not _RootedLane.fits(c, plan):
        return None
    return _scatter_step_lane(c, plan, dtype.numpy)


def _inline_scatter_lane(c, plan, dtype, word):
    """This rank's part of an inline scatter (Note [Inline scatter] in
    _header.py) as a StepLane: on the root (*word* given) x is the caller's
    array, in rank order; elsewhere x is the received message, the word then
    the blocks. Each child's message is put together in work (the word,
    then its subtree's blocks) and sent; this rank's block is copied to out."""
    p, r, root, counts = c.size, c.rank, plan.args.root, plan.args.counts
    own, kids, sub = _header.inline_scatter_spans(p, r, root, counts)
    total, split = sum(counts), sum(counts[:root])

    def pieces(lo, hi):
        """Where blocks[lo:hi] lie in x: after the word, or (the root)
        rotated back to rank order."""
        if word is None:
            return [(WORD_BYTES + lo, WORD_BYTES + hi)] if hi > lo else []
        lo, hi = lo + split, hi + split         # past total: wrapped round to 0
        spans = [(lo, min(hi, total)), (max(lo, total) - total, hi - total)]
        return [(a, b) for a, b in spans if b > a]

    head = ("word", 0, WORD_BYTES) if word is not None else ("x", 0, WORD_BYTES)
    steps, at = [], 0
    for child, lo, hi in kids:
        steps.append(_step("copy", send=head, recv=("work", at, at + WORD_BYTES)))
        end = at + WORD_BYTES
        for a, b in pieces(lo, hi):
            steps.append(_step("copy", send=("x", a, b), recv=("work", end, end + b - a)))
            end += b - a
        steps.append(_step("send", send=("work", at, end), dest=child))
        at = end
    end = 0
    for a, b in pieces(0, own):
        steps.append(_step("copy", send=("x", a, b), recv=("out", end, end + b - a)))
        end += b - a
    if len(steps) > _resources.MAX_LANE_STEPS:
        return None
    xbytes = total if word is not None else WORD_BYTES + sub
    return _lane_move.StepLane(c, c.transport, steps, plan.args.shape, dtype, xbytes, own, at,
                               True, b"" if word is None else word.tobytes(), collective="scatter",
                               algorithm=plan.algorithm)


def _scatter_step_lane(c, plan, dtype):
    lane = _RootedLane(c, plan, plan.args.shape)
    steps = lane.scatter_steps()
    if len(steps) > _resources.MAX_LANE_STEPS:
        return None
    root = lane.up is None
    work = lane.total if (lane.rotate if root else lane.children) else 0
    return _lane_move.StepLane(c, c.transport, steps, plan.args.shape, dtype,
                               lane.total if root else 0, lane.own[1] - lane.own[0], work, True,
                               collective="scatter", algorithm=plan.algorithm)


def make_scatter_root(c, x, root, algorithm, rest, sizes=None):
    """The root's lane (pycoll._lane_move.ScatterRoot) of x in blocks of
    *sizes* (None or a tuple of ints): the header word to its children in
    the header's tree, then the data lane; None when the call must take
    the general path (which also reports whatever is wrong). Where the
    data lane declines the caller's out, rest(c, root, algorithm, dtype,
    shape, message, out, deadline, sizes) runs the general data phase."""
    checked = _root_lane_args(c, "scatter", x, root, algorithm)
    if checked is None or not 1 <= x.ndim <= SHORT_DIMS:
        return None
    r, alg, dtype = checked
    if x.dtype != dtype.numpy:
        return None
    try:
        plan = _scatter_plan(c, dtype, x.shape, r, alg, sizes)     # sizes checked here
    except (TypeError, ValueError):
        return None
    children = binomial_edges(r, c.rank, c.size)[1]
    word = _header.make_word(dtype, x.shape)
    if c.size == 1:
        return _lane_move.ScatterRoot(c, c.transport, word.view(np.uint8), children,
                                      _solo_lane(c, "scatter", plan, x), None, True)
    if _header.inline_scatter(c, plan):
        word[0] = HEADER_INLINE
        data = _inline_scatter_lane(c, plan, x.dtype, word)
        return None if data is None else _lane_move.ScatterRoot(
            c, c.transport, word.view(np.uint8), children, data, None, True)
    data = _scatter_step_lane(c, plan, x.dtype) if _RootedLane.fits(c, plan) else None
    if data is None:
        return None

    def declined(x, out, deadline):         # the data lane declined out: the general path's data phase
        msg = _message.message(x)
        return rest(c, r, alg, msg.dtype, msg.shape, msg, out, deadline or None, sizes)
    return _lane_move.ScatterRoot(c, c.transport, word.view(np.uint8), children, data, declined)


# ---------------------------------------------------------------------------
# The alltoall and barrier lanes.


def make_alltoall(c, x, algorithm, sizes=None):
    """The lane (pycoll._lane_move.StepLane) of a pairwise alltoall, of even
    blocks or of *sizes* (a matrix as _resources.matrix_key keys it), whose
    every block is one message (or none, when empty: Note [Empty lanes]),
    or None (the general path takes the call, and reports whatever is
    wrong with it)."""
    try:
        key = ("alltoall", x.dtype, x.shape, algorithm)
        given = None if sizes is None else _check_matrix(sizes, c.size)
        plan = _plan(c, key if given is None else key + (given,),
                     lambda: _alltoall_args(c, x, algorithm, given))
    except (TypeError, ValueError):
        return None
    counts = plan.args.counts
    received = plan.args.recv_counts or (counts[c.rank],) * c.size
    if plan.algorithm != "pairwise" or c.size > _resources.MAX_LANE_STEPS \
            or x.dtype != plan.args.dtype.numpy:
        return None
    if c.size == 1:
        return _solo_lane(c, "alltoall", plan, x)
    largest = max(*counts, *received)
    if largest == 0:                        # Note [Empty lanes]
        return _lane_move.StepLane(c, c.transport, [], plan.args.shape, x.dtype, 0, 0, 0, True,
                                   collective="alltoall", algorithm=plan.algorithm)
    if largest > min(plan.channel.segment, LANE_MAX_BYTES):
        return None
    return _lane_move.StepLane(c, c.transport,
                               _alltoall_program(c.size, c.rank, counts, received),
                               plan.args.shape, x.dtype, sum(counts), sum(received), 0,
                               True, collective="alltoall", algorithm=plan.algorithm)


def _alltoall_program(p: int, r: int, counts, received) -> list:
    """Rank r's steps of alltoall_pairwise.run: its own block copied into
    place, then at step k block r + k sent while r - k's arrives (*counts*:
    the bytes r sends each rank; *received*: the bytes each sends r)."""
    send = [(lo, lo + n) for lo, n in blocks_from_counts(counts)]
    into = [(lo, lo + n) for lo, n in blocks_from_counts(received)]
    steps = [_step("copy", send=("x", *send[r]), recv=("out", *into[r]))]
    for k in range(1, p):
        dest, source = (r + k) % p, (r - k) % p
        steps.append(_step("sendrecv", send=("x", *send[dest]), dest=dest,
                           recv=("out", *into[source]), source=source))
    return _without_empty(steps)


def make_barrier(c):
    """The dissemination barrier as a StepLane (no rounds at p = 1)."""
    steps = _barrier_program(c.size, c.rank)
    if len(steps) > _resources.MAX_LANE_STEPS:
        return None
    return _lane_move.StepLane(c, c.transport, steps, (0,), np.dtype(np.uint8), 0, 0, 0, False,
                               collective="barrier", algorithm="dissemination")


def _barrier_program(p: int, r: int) -> list:
    """Rank r's rounds of barrier_dissemination.run: in round k a message
    of 0 bytes to rank r + 2^k and one from r - 2^k, on the call's tag."""
    steps, d = [], 1
    while d < p:
        steps.append(_step("sendrecv", send=("word", 0, 0), dest=(r + d) % p,
                           recv=("word", 0, 0), source=(r - d) % p))
        d <<= 1
    return steps
