# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
# cython: embedsignature=True
"""What a communicator's calls share in C: tags, scratch, the stage.

``CallResources`` is a communicator's tag counter and scratch buffers,
which the lanes (pycoll/_lane_reduce.pyx, pycoll/_lane_move.pyx) take
without a Python call and the general path through ``next_tag()`` and
``scratch()``. A send of 256 KiB to 8 MiB out of small pages may leave from
a copy on huge pages, the communicator's "stage" (Note [Staging sends]),
a way each lane, and each general-path plan (``WayChooser``), chooses by
timing itself (Note [Choosing the way]); ``set_staging()`` fixes one.
``take_operands`` holds a lane call's caller buffers, or declines them for
the Python path (``NOT_TAKEN``).
"""

from libc.stdint cimport uintptr_t
from libc.string cimport memcpy, memset
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE, PyBUF_WRITABLE

import numpy as np

from pycoll._memory import empty
from pycoll._mpicall cimport monotonic

cdef extern from "kernels.h" nogil:
    int pycoll_pages_ready()
    long long pycoll_huge_bytes(const void *buf, size_t n)
    void pycoll_stream_copy(void *dst, const void *src, size_t n)
    void pycoll_stream_fence()

cdef object ndarray = np.ndarray

# What a lane answers for a call the Python path must take.
NOT_TAKEN = object()
# The most steps a lane runs (a schedule's, or a ring's p - 1).
MAX_LANE_STEPS = MAX_STEPS


def sizes_key(sizes):
    """sizes= (a gather's, allgather's, scatter's or reduce_scatter's) as
    its lane's key ends: () for None, (a tuple of ints,) for a list or
    tuple of Python ints (not bools) or a 1-d integer ndarray; None for
    anything else, which the general path checks (_plan._check_sizes). A
    float equals its int as a key, so it must not find an int's lane
    (Note [Equal keys], api.py)."""
    cdef object kind = type(sizes)
    if sizes is None:
        return ()
    if kind is list or kind is tuple:
        for s in sizes:
            if type(s) is not int:
                return None
        return (tuple(sizes),)
    if kind is ndarray and sizes.ndim == 1 and sizes.dtype.kind in "iu":
        return (tuple(sizes.tolist()),)
    return None


def matrix_key(sizes):
    """alltoall's sizes= as its lane's key ends: () for None, (a tuple of
    tuples of ints,) for a list or tuple of rows that sizes_key takes or a
    2-d integer ndarray; None for anything else, which the general path
    checks (_plan._check_matrix)."""
    cdef list rows
    if sizes is None:
        return ()
    if type(sizes) is ndarray:
        if sizes.ndim == 2 and sizes.dtype.kind in "iu":
            return (tuple(map(tuple, sizes.tolist())),)
        return None
    if type(sizes) is not list and type(sizes) is not tuple:
        return None
    rows = []
    for line in sizes:
        row = sizes_key(line)
        if not row:
            return None                     # None: a row the check must see; (): a row of None
        rows.append(row[0])
    return (tuple(rows),)


cdef object lane_output(out, shape, dtype):
    """A lane's result array: out, or a new one where out is None;
    NOT_TAKEN for an out the Python path must check or write back."""
    if out is None:
        return np.empty(shape, dtype)
    if type(out) is ndarray and out.dtype == dtype and out.shape == shape:
        return out
    return NOT_TAKEN


cdef int take_operands(Operands *o, x, bint with_x, Py_ssize_t xbytes, data,
                       Py_ssize_t align, Py_ssize_t same_at) except -1:
    """Hold x (if *with_x*: a scatter's receiver ignores it) and *data*,
    the buffer the lane writes (unless None): 1, or 0 with nothing held
    where the Python path must take the call, which then sends nothing.
    x must have *xbytes* bytes; both must be C-contiguous and
    *align*-aligned, and data writable and clear of x, or (*same_at* >= 0)
    x must be data's bytes from that offset on: an allreduce in place
    (0), an allgather's or gather's x in its own block of out (Note [Own
    blocks]). Release with release_operands."""
    o.xp = o.outp = NULL
    o.have_x = o.have_out = False
    try:
        if with_x:
            try:
                PyObject_GetBuffer(x, &o.x, PyBUF_SIMPLE)
            except (BufferError, ValueError, TypeError):
                return 0                # not C-contiguous: the Python path packs it
            o.have_x = True
            o.xp = <char *>o.x.buf
            if o.x.len != xbytes or <uintptr_t>o.xp % align:
                release_operands(o)
                return 0
        if data is not None:
            try:
                PyObject_GetBuffer(data, &o.out, PyBUF_SIMPLE | PyBUF_WRITABLE)
            except (BufferError, ValueError, TypeError):
                release_operands(o)
                return 0                # read-only or strided out: checked by Python
            o.have_out = True
            o.outp = <char *>o.out.buf
            if <uintptr_t>o.outp % align or (
                    o.have_x and o.outp < o.xp + xbytes and o.xp < o.outp + o.out.len
                    and not (same_at >= 0 and o.xp == o.outp + same_at)):
                release_operands(o)
                return 0                # out overlaps x: the Python path copies
    except BaseException:
        release_operands(o)
        raise
    return 1


cdef void release_operands(Operands *o) noexcept:
    if o.have_out:
        PyBuffer_Release(&o.out)
        o.have_out = False
    if o.have_x:
        PyBuffer_Release(&o.x)
        o.have_x = False
    o.xp = o.outp = NULL


# The scratch slots' names (their numbers: SLOT_* in _resources.pxd).
SLOT_NAMES = ("lane", "output", "work", "stage")

# Note [Staging sends]
# ~~~~~~~~~~~~~~~~~~~~
# Between two ranks of this node, both MPI libraries move a large message
# with one copy that the receiver makes out of the sender's pages, and it
# costs several times more per byte when those are 4 KiB pages (Note [Huge
# pages] in pycoll/_memory.py); the receiver's own pages hardly matter.
# One MPI_Sendrecv each way at p = 2 between buffers on 4 KiB pages, as it
# is -> with the send first copied into a buffer on huge pages (the copy
# included), and pycoll's float32 allreduce of a numpy array with staging
# off -> on (`mpiexec -n 2 python bench/staging.py`, one launch each, us):
#
#              MPICH                                Open MPI
#              sendrecv     ring        rec. dbl.   sendrecv     ring        rec. dbl.
#     128 KiB    12 -> 15     24 -> 24    13 -> 14    10 -> 13     21 -> 21    12 -> 12
#     256 KiB    19 -> 13     33 -> 34    25 -> 17    18 -> 13     31 -> 33    23 -> 17
#     1 MiB      72 -> 47     98 -> 72    98 -> 76    72 -> 45     93 -> 65    97 -> 68
#     4 MiB     424 -> 236   278 -> 223  258 -> 264  375 -> 217   245 -> 192  155 -> 167
#     8 MiB    1151 -> 1014  530 -> 529  620 -> 613 1186 -> 880   511 -> 518  634 -> 610
#     16 MiB   2494 -> 2701 1293 -> 1252 2176 -> 2108 2473 -> 2531 1190 -> 1206 2027 -> 2220
#
# (The ring sends half the vector per step, so its 256 KiB call sends
# 128 KiB messages; recursive doubling's 4 MiB numpy input is half on huge
# pages and goes as it is.)
#
# So a send of STAGE_FROM to STAGE_UP_TO bytes from a buffer mostly on
# small pages (a numpy array under 4 MiB, usually) may be copied into the
# communicator's "stage" scratch, on huge pages, and sent from there; how
# (as it is, memcpy, non-temporal copy) each lane chooses by timing itself
# (Note [Choosing the way]). The kernel tells which pages are huge: one
# PAGEMAP_SCAN ioctl on /proc/self/pagemap (Linux 6.7 and later; a few us
# for a range of this size). Where it cannot tell, nothing is staged.
# Below STAGE_FROM the page size makes no difference (MPI's eager copies)
# and the copy is pure cost; from 16 MiB the transfer is as slow as memory
# either way. A 4 or 8 MiB numpy array is already half or more on huge
# pages (numpy advises them) and goes as it is. The bytes sent are the
# same, so results do not change.
# Every lane stages its sends, one at a time (a broadcast's data once for
# all its children); the general path stages its blocking sends only, as
# its concurrent ones (Channel.isend) may leave from several buffers at
# once and there is one stage. For the data-movement lanes at p = 2, a
# 1 MiB numpy array (allgather, gather: 512 KiB from each rank), as is ->
# memcpy into the stage, us (bench/staging.py; MPICH, then Open MPI):
#
#     broadcast 73 -> 48, 73 -> 48    allgather 49 -> 36, 48 -> 35
#     gather    47 -> 25, 46 -> 23    scatter   45 -> 31, 42 -> 31
#     alltoall  49 -> 37, 49 -> 38
#
# The stage costs memory: up to STAGE_UP_TO bytes (whole 2 MiB pages) per
# communicator that has staged a send.
cdef enum:
    STAGE_FROM = 256 << 10
    STAGE_UP_TO = 8 << 20


# The ways (WAY_* in _resources.pxd) by the names set_staging takes.
WAYS = {"off": WAY_AS_IS, "copy": WAY_COPY, "stream": WAY_STREAM, "auto": WAY_AUTO}
EXPLORE = EXPLORE_EVERY
FULL_ROUND = FULL_ROUND_EVERY
SETTLE = SETTLE_CALLS           # a lane's first calls, which try each way twice
cdef double EWMA = 0.25        # the weight of a call in its way's mean
cdef double STALL = 2.0        # a call counts at most this many times its way's mean
cdef double FAR_BEHIND = 1.5   # a way's mean past this many times the best's: far behind

# Note [Choosing the way]
# ~~~~~~~~~~~~~~~~~~~~~~~
# This host has two modes, each lasting minutes, and the way of sending
# that wins in one loses in the other. A 1 MiB MPI_Sendrecv at p = 2
# between numpy buffers on Open MPI, us, launches 45 s apart:
#
#                         as is   memcpy + send   non-temporal copy + send
#     fast mode (4)         76-83        47-57          102-108
#     slow mode (3)         85-89      165-169           68-69
#
# and the one-way send of a broadcast 71-75 / 40-44 / 63-68 against
# 80-82 / 156-158 / 63-66. In the slow mode a send out of a buffer just
# written with ordinary stores is slow, while one out of a buffer written
# long ago is not (24-26 us in both modes); non-temporal stores leave
# nothing in the writer's caches. That matches the two ranks sharing a
# last-level cache in the fast mode and not in the slow one, which this
# guest cannot see. The modes also depend on size: in one launch a 1 MiB
# memcpy + send was fast (49 us) and a 4 MiB one slow (667 us, against
# 414 as is and 244 streamed). The first p = 2 report with staging
# (always memcpy, on 1e0cb8c) met the slow mode in three of its six
# broadcast launches: 162-180 us at 1 MiB against native's 107-116.
#
# So no way is right everywhere, and each lane chooses by timing itself:
# its first six calls take each of the three ways twice in a row, keeping
# each way's time; from then on every call takes the way with the lowest
# mean time (an exponential average of its calls), and every
# EXPLORE_EVERY-th call and the one after it take the next of the three
# in turn, whose time replaces that way's mean (or, for the way already
# chosen, moves it): so the choice follows the host from one mode to the
# other within a few explorations. A way far behind (its mean more than
# FAR_BEHIND times the chosen way's) is tried only in every
# FULL_ROUND_EVERY-th round of trials: where one way wins throughout, the
# trials of the two others cost more than anything else "auto" does. A
# way that falls behind is left at once (its mean rises past the others'
# stale ones); one that pulls ahead while far behind waits for its turn,
# up to FULL_ROUND_EVERY * 3 * EXPLORE_EVERY calls (384). Four things
# keep those times honest:
#
# - The first call after a change of way is not counted. It pays for the
#   change: on MPICH, recursive doubling's 256 KiB allreduce at p = 2 took
#   68 us as is right after copied calls, 36 us the call after, and 65 us
#   every copied call, so an exploration timed by its one call kept the
#   copy at twice the time.
# - Every rank explores the same way at the same call (the k-th
#   exploration takes way k mod 3), as every rank takes the same ways in
#   the first six calls. The messages are the same bytes whichever way
#   they leave, so ranks need not agree for the result; but an exchange
#   lasts as long as its slower side, and when each rank explored "the
#   other two" of its own choice, two ranks that had settled on different
#   ways only ever timed mixed pairs and stayed apart (the same allreduce,
#   one rank as is and the other copying: 54-66 us a call in all 20 rounds
#   of one launch, where in another both went as is from the third round
#   on, at 29-41). A rank skips the trials of ways it has timed far
#   behind, but in every FULL_ROUND_EVERY-th round every rank tries every
#   way, so such ranks still time the same ways together.
# - A lane keeps the ways of its in-place calls apart from the others':
#   in place a call sends what the call before it wrote, which goes at
#   another speed (there, as is 74 us against the copy's 61-68 in place,
#   33 against 62 out of place).
# - A call of the chosen way moves its mean as a call of at most STALL
#   times that mean would. This host stops a process for milliseconds now
#   and then: one such call among 1 MiB broadcasts of 110 us put the mean
#   of "as is" at 2.4 ms, and the copy (about 180 us) ran every call
#   until "as is" was next tried, 36 calls later. A change of mode still moves the
#   mean past the other ways' within a few calls (a quarter of the way to
#   twice the mean per call).
#
# The first three took that allreduce out of place from 0.71-0.74x native
# MPICH's time to 0.39-0.41x, and from 0.81-0.93x native Open MPI's to
# 0.50-0.51x (bench/NOTES.md, "Staging: the first call after a change");
# the fourth, and skipping the ways far behind, took "auto" at 256 KiB-
# 1 MiB from 1.06-1.16x the time of "as is" to 1.01-1.08x (medians over
# launches, both MPIs) in a phase where "as is" won throughout
# (bench/NOTES.md, "Staging: a stall is not a mode").
# The general path times each staged blocking send the same way, one
# WayChooser per plan (its sends out of place and in place alike).
# set_staging() fixes one way for the process (A/B measurements, tests).
# In the fast mode "auto" costs what its explorations cost: in two Open
# MPI launches of bench/staging.py (16 calls between explorations then)
# and one MPICH launch (32), 1 MiB, us, as is / memcpy / stream / auto:
#
#                       Open MPI                                   MPICH
#     allreduce ring    103 / 74 / 125 / 77   105 / 75 / 124 / 76   104 / 75 / 132 / 77
#     broadcast          74 / 48 /  67 / 51    76 / 50 /  66 / 52    75 / 49 /  71 / 50
#     gather             49 / 25 /  37 / 26    48 / 25 /  36 / 26    49 / 27 /  39 / 26
#
cdef int staging_mode = WAY_AUTO


def set_staging(str mode) -> str:
    """Fix how sends worth staging go, in this process: "off" (as they
    are), "copy", "stream" (non-temporal copy), or "auto" (each lane times
    the three, Note [Choosing the way]). The messages are the same bytes
    either way. Returns the previous mode."""
    global staging_mode
    if mode not in WAYS:
        raise ValueError(f"staging mode {mode!r}: expected one of {', '.join(WAYS)}")
    was = next(name for name, way in WAYS.items() if way == staging_mode)
    staging_mode = WAYS[mode]
    return was


cdef inline int best_way(Ways *w) noexcept nogil:
    """The way with the lowest mean time so far."""
    cdef int i, best = WAY_COPY
    for i in range(NWAYS):
        if w.mean[i] < w.mean[best]:
            best = i
    return best


cdef inline int pick_way(Ways *w) noexcept nogil:
    """The way of a lane's next call (Note [Choosing the way])."""
    cdef int way, best
    if staging_mode != WAY_AUTO:
        return staging_mode
    if w.calls < SETTLE_CALLS:          # each way tried in turn
        return w.calls // TRIAL_CALLS
    best = best_way(w)
    if w.calls % EXPLORE_EVERY < TRIAL_CALLS:   # the same way on every rank
        way = (w.calls // EXPLORE_EVERY) % NWAYS
        if w.calls % EXPLORE_EVERY:             # a trial's later calls follow its first
            return way if w.last == way + 1 else best
        if w.calls // (EXPLORE_EVERY * NWAYS) % FULL_ROUND_EVERY == 0 \
                or w.mean[way] <= FAR_BEHIND * w.mean[best]:
            return way
    return best


cdef inline void note_time(Ways *w, int way, double t) noexcept nogil:
    """A call of *way* took *t* seconds. A call that took another way than
    the one before it is not counted: the first call after a change pays
    for the change. In the first calls each way keeps its fastest; then
    the chosen way's mean moves toward each call's time (a stalled call
    counting as STALL times the mean), and a way tried in passing takes
    that call's time as it is (its old mean is stale: the host may have
    changed mode since)."""
    cdef bint settling = w.calls < SETTLE_CALLS, changed = w.last != way + 1
    w.calls += 1
    w.last = way + 1
    if changed:
        return
    if w.mean[way] == 0.0 or settling and t < w.mean[way]:
        w.mean[way] = t
    elif not settling:
        if way == best_way(w):
            w.mean[way] += EWMA * (min(t, STALL * w.mean[way]) - w.mean[way])
        else:
            w.mean[way] = t


cdef void settle(Ways *w, Stage *st, int rc) noexcept nogil:
    """Time a lane's call when it took a way of its choosing."""
    if st.way >= 0 and rc == 0:
        note_time(w, st.way, monotonic() - st.started)


def _ways_chosen(seconds, int calls, int ranks=1) -> list:
    """The ways (names) a lane takes in *calls* calls in "auto" mode when
    each call of way i takes seconds(i, k) at call k (for tests). With
    *ranks* > 1, that many lanes call together, one per rank: seconds(ways,
    k) gets the tuple of their ways and gives each rank's time (a sequence)
    or one time for all, and each entry is the tuple of their ways."""
    cdef Ways[8] w
    cdef int k, i
    if not 1 <= ranks <= 8:
        raise ValueError(f"ranks={ranks}: expected 1 to 8")
    was = set_staging("auto")
    try:
        memset(w, 0, sizeof(w))
        chosen = []
        for k in range(calls):
            ways = tuple(pick_way(&w[i]) for i in range(ranks))
            t = seconds(ways, k) if ranks > 1 else seconds(ways[0], k)
            times = list(t) if hasattr(t, "__len__") else [t] * ranks
            for i in range(ranks):
                note_time(&w[i], ways[i], times[i])
            names = tuple(("off", "copy", "stream")[way] for way in ways)
            chosen.append(names if ranks > 1 else names[0])
        return chosen
    finally:
        set_staging(was)


cdef class StagedSends:
    """What a lane, or a general-path plan's WayChooser, keeps of its
    staged sends: the ways it has timed (Note [Choosing the way])."""

    cdef Ways *ways_for(self, Operands *o) noexcept:
        """The ways of calls like this one: an in-place call sends what the
        call before it wrote, which goes another speed each way."""
        return &self.ways[o.xp != NULL and o.xp == o.outp]

    @property
    def stage_ways(self) -> dict:
        """For tests and benchmarks: the calls timed so far and each way's
        mean time (s; 0: not timed yet), out of place and (under
        "in_place") in place."""
        return {**ways_dict(&self.ways[0]), "in_place": ways_dict(&self.ways[1])}


cdef dict ways_dict(Ways *w):
    return {"calls": w.calls, "off": w.mean[WAY_AS_IS], "copy": w.mean[WAY_COPY],
            "stream": w.mean[WAY_STREAM]}


cdef inline bint may_stage(buf):
    """Whether the general path's send of *buf* is one worth staging: a
    numpy array of STAGE_FROM to STAGE_UP_TO bytes, where the kernel can
    tell its pages (Note [Staging sends])."""
    return type(buf) is ndarray and STAGE_FROM <= buf.nbytes <= STAGE_UP_TO \
        and pycoll_pages_ready()


cdef const char *staged(const char *buf, Py_ssize_t n, Stage *st) noexcept nogil:
    """*buf*, or its copy in the stage (st.ptr: room for STAGE_UP_TO
    bytes, or NULL: stage nothing) when it is a send worth staging (Note
    [Staging sends])."""
    cdef long long huge
    if st.ptr == NULL or n < STAGE_FROM or n > STAGE_UP_TO:
        return buf
    huge = pycoll_huge_bytes(buf, n)
    if huge < 0 or 2 * huge >= n:
        return buf
    if st.stream:
        pycoll_stream_copy(st.ptr, buf, n)
        pycoll_stream_fence()
    else:
        memcpy(st.ptr, buf, n)
    return st.ptr


def huge_page_bytes(buf):
    """How many bytes of *buf* (a contiguous buffer) lie on huge pages, or
    None where the kernel cannot tell (Note [Staging sends])."""
    cdef Py_buffer b
    cdef long long huge
    PyObject_GetBuffer(buf, &b, PyBUF_SIMPLE)
    try:
        if not pycoll_pages_ready():
            return None
        huge = pycoll_huge_bytes(b.buf, b.len)
    finally:
        PyBuffer_Release(&b)
    return None if huge < 0 else huge


cdef class CallResources:
    """A communicator's tag counter and scratch buffers (Note [Tag
    discipline] in pycoll/_comm.py), kept in C so that a lane call takes
    its tag and buffers without a Python call (about 0.2 us of an 8-byte
    allreduce's 0.8 at p = 1). The general path takes them through
    next_tag() and scratch(), from the same counter and the same buffers.

    Scratch is one uint8 buffer per slot name, grown as needed (never
    shrunk). The same slot is never used by two live transfers of one
    call; its contents do not survive the call.
    """

    def __cinit__(self, int tag_ub):
        self.tag, self.tag_ub = 0, tag_ub
        self.buffers, self.views = {}, {}
        self.held = [None] * C_SLOTS

    @property
    def tags_taken(self) -> int:
        """The tags taken so far (mod tag_ub + 1): the next tag."""
        return self.tag

    cpdef int next_tag(self):
        """The tag of the next collective call (Note [Tag discipline])."""
        cdef int tag = self.tag
        self.tag = tag + 1 if tag < self.tag_ub else 0
        return tag

    def scratch(self, str slot, Py_ssize_t nbytes):
        """A uint8 view of *nbytes* of *slot*'s buffer."""
        view = self.views.get((slot, nbytes))
        if view is not None:
            return view
        buf = self.buffers.get(slot)
        if buf is None or buf.size < nbytes:
            buf = self.grow(slot, nbytes)
        if len(self.views) > 256:
            self.views.clear()
        view = self.views[(slot, nbytes)] = buf[:nbytes]
        return view

    cdef object grow(self, str slot, Py_ssize_t nbytes):
        cdef Py_buffer b
        buf = empty(max(nbytes, 64), np.uint8)    # Note [Huge pages] in pycoll/_memory.py
        self.buffers[slot] = buf
        self.views = {k: v for k, v in self.views.items() if k[0] != slot}
        if slot in SLOT_NAMES:
            i = SLOT_NAMES.index(slot)
            PyObject_GetBuffer(buf, &b, PyBUF_SIMPLE | PyBUF_WRITABLE)
            self.ptr[i], self.room[i] = <char *>b.buf, b.len
            PyBuffer_Release(&b)            # buf owns its memory; held keeps it
            self.held[i] = buf
        return buf

    cdef object borrow(self, int slot, Py_ssize_t nbytes, char **data):
        """*slot*'s buffer, at least *nbytes*, through *data*. The caller
        keeps the returned array while it uses *data*: it stays valid if
        the slot grows meanwhile."""
        if self.ptr[slot] == NULL or self.room[slot] < nbytes:
            self.grow(SLOT_NAMES[slot], nbytes)
        data[0] = self.ptr[slot]
        return self.held[slot]

    cdef object stage(self, Ways *ways, Py_ssize_t largest, Stage *st):
        """Set *st* for a lane's call whose sends are of up to *largest*
        bytes: the way it takes (pick_way; Note [Choosing the way]) and, for
        a copy, the "stage" slot (Note [Staging sends]). Returns the slot's
        buffer, which the caller keeps while it uses st.ptr, or None. Where
        no send of the call could be staged, or the way is fixed
        (set_staging), st.way is -1: nothing to time."""
        cdef int way
        st.ptr, st.stream, st.way = NULL, False, -1
        if staging_mode == WAY_AS_IS or largest < STAGE_FROM or not pycoll_pages_ready():
            return None
        way = pick_way(ways)
        if staging_mode == WAY_AUTO:        # a fixed way is not timed
            st.way, st.started = way, monotonic()
        if way == WAY_AS_IS:
            return None
        st.stream = way == WAY_STREAM
        return self.borrow(SLOT_STAGE, min(largest, <Py_ssize_t>STAGE_UP_TO), &st.ptr)

    def staged(self, buf, int way=WAY_COPY):
        """*buf*, or a copy of it in the "stage" scratch made *way* (the
        mode's way when set_staging fixed one) when it is a send worth
        staging (Note [Staging sends]). The copy is valid until the next
        staged send. The general path stages through a WayChooser."""
        cdef Py_buffer b
        cdef const char *source
        cdef Stage st
        if staging_mode != WAY_AUTO:
            way = staging_mode
        if way == WAY_AS_IS or not may_stage(buf):
            return buf
        try:
            PyObject_GetBuffer(buf, &b, PyBUF_SIMPLE)
        except (BufferError, ValueError, TypeError):
            return buf
        try:
            held = self.borrow(SLOT_STAGE, b.len, &st.ptr)
            st.stream = way == WAY_STREAM
            with nogil:
                source = staged(<const char *>b.buf, b.len, &st)
        finally:
            PyBuffer_Release(&b)
        return buf if source != st.ptr else self.scratch("stage", b.len)

    def clear(self) -> None:
        """Release every buffer (Communicator.free)."""
        self.buffers.clear()
        self.views.clear()
        self.held = [None] * C_SLOTS
        for i in range(C_SLOTS):
            self.ptr[i], self.room[i] = NULL, 0

cdef class WayChooser(StagedSends):
    """The ways of one general-path plan's staged sends (pycoll/_p2p.py's
    Channel), chosen as a lane chooses them (Note [Choosing the way]),
    each send timed on its own: staged(buf) before the send, done() once
    it has completed.

        sendbuf = ways.staged(sendbuf)      # buf, or its copy in the stage
        ...                                 # the blocking send of sendbuf
        ways.done()                         # times it, if a way was chosen
    """

    cdef CallResources calls
    cdef Stage st

    def __cinit__(self, CallResources calls):
        self.calls = calls
        self.st.way = -1

    def staged(self, buf):
        """*buf*, or its copy in the stage, the way this send takes."""
        cdef int way
        self.st.way = -1
        if staging_mode != WAY_AUTO:
            return self.calls.staged(buf)
        if not may_stage(buf):
            return buf
        way = pick_way(&self.ways[0])
        self.st.way, self.st.started = way, monotonic()
        return buf if way == WAY_AS_IS else self.calls.staged(buf, way)

    def done(self) -> None:
        """The send of the last staged() has completed: time its way."""
        settle(&self.ways[0], &self.st, 0)
        self.st.way = -1


