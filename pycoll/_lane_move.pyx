# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
# cython: embedsignature=True
"""The data-movement lanes: a repeated, plain broadcast, gather, scatter,
allgather, alltoall or barrier run in C.

``StepLane`` runs the messages and copies of a gather, allgather, alltoall,
scatter (its data) or barrier as a program that pycoll/_lanes.py makes from
the algorithm's messages; ``ScatterRoot`` and ``ScatterReceiver`` add
scatter's header; ``BroadcastLane`` runs a broadcast's tree edges, header
and data. The MPI calls are pycoll/_mpicall.pyx's. ``broadcast``,
``gather``, ``scatter``, ``allgather``, ``alltoall`` and ``barrier`` are the
entries every such call tries first; they answer NOT_TAKEN, with nothing
sent, whenever the call is not the plain case (no lane yet, non-contiguous
input, an out the Python path must check or write back), and the Python
path takes the call. Either path sends the same messages with the same
tags, so ranks taking different paths in one call still meet.
"""

from libc.stdint cimport int64_t, uintptr_t
from libc.string cimport memcmp, memcpy
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE, PyBUF_WRITABLE

import numpy as np

from pycoll._mpicall cimport (Arrival, Transport, arrived, check_lane, copy_apart,
                              exchange, exchange_copying, handle_t, lane_deadline, monotonic,
                              received_bytes, recv_by, send_by, send_copying)
from pycoll._resources cimport (MAX_STEPS, SLOT_WORK, CallResources, Operands, Stage,
                                StagedSends, Ways, in_turn, lane_output, release_operands,
                                settle, staged, take_operands)

from pycoll._resources import NOT_TAKEN, matrix_key, sizes_key

cdef object ndarray = np.ndarray

cdef enum:
    WORD_BYTES = 64     # the header word of broadcast and scatter (_header.py)
    MAX_CHILDREN = 64   # a rank's children in a binomial tree: up to log2(p)


cdef enum:
    STEP_SEND = 0               # the step kinds of a StepLane
    STEP_RECV = 1
    STEP_COPY = 2
    STEP_SENDRECV = 3
    STEP_SENDRECV_COPY = 4
    STEP_SEND_COPY = 5
    BUF_X = 0                   # the buffers its steps name
    BUF_OUT = 1
    BUF_WORK = 2
    BUF_WORD = 3                # a constant of the lane's own (an inline scatter's header word)



cdef class StepLane(StagedSends):
    """One repeated, plain gather, allgather, alltoall or scatter (its data,
    after the header), run in C: this rank's part
    of its algorithm as a program of steps over three byte buffers, x (this
    rank's input), out (the result) and work (the communicator's scratch),
    made once per signature by pycoll/_lanes.py (_RootedLane.gather_steps and
    scatter_steps, _allgather_ring_program, _allgather_rd_program,
    _alltoall_program) with the messages, tags and order of the general
    path, so ranks taking either path meet.

    A step is 11 ints (kind, dest, send buffer, offset, bytes, source,
    receive buffer, offset, bytes, copy buffer, offset):

        STEP_SEND            send a span to dest
        STEP_RECV            receive a span from source
        STEP_COPY            copy the send span to the receive span
        STEP_SENDRECV        both messages at once
        STEP_SENDRECV_COPY   both, and copy the send span to the copy
                             span while they are in flight
        STEP_SEND_COPY       send, and copy the receive span (only read:
                             no message arrives) to the copy span while
                             it is in flight (a scatter's own block)

    With a deadline (Note [Lane deadlines] in _mpicall.pyx) every message
    is posted and tested against it, and a STEP_SENDRECV_COPY or
    STEP_SEND_COPY copies before posting. *collective* and *algorithm*
    name the call in a CollectiveTimeout.

    *has_result*: this rank returns out (every rank of an allgather, an
    alltoall or a scatter, a gather's root); elsewhere out is ignored and
    the call returns None. Without x bytes (a scatter off its root) x is
    ignored. *own_at* >= 0: x may be out's bytes from there, its own block
    (an allgather or a gather's root in place, Note [Own blocks] in
    _lanes.py); a copy onto itself is skipped.
    """

    cdef Transport transport
    cdef CallResources calls
    cdef object base, shape, dtype, word, collective
    cdef readonly object algorithm
    cdef Py_ssize_t xbytes, outbytes, workbytes, align, largest_send, own_at
    cdef bint has_result
    cdef int nsteps, stuck_peer, stuck_step
    cdef Arrival arrival
    cdef int kind[MAX_STEPS]
    cdef int dest[MAX_STEPS]
    cdef int source[MAX_STEPS]
    cdef int sbuf[MAX_STEPS]
    cdef int rbuf[MAX_STEPS]
    cdef int cbuf[MAX_STEPS]
    cdef Py_ssize_t slo[MAX_STEPS]
    cdef Py_ssize_t sn[MAX_STEPS]
    cdef Py_ssize_t rlo[MAX_STEPS]
    cdef Py_ssize_t rn[MAX_STEPS]
    cdef Py_ssize_t clo[MAX_STEPS]

    def __cinit__(self, base, Transport transport, steps, shape, dtype, Py_ssize_t xbytes,
                  Py_ssize_t outbytes, Py_ssize_t workbytes, bint has_result, word=b"",
                  collective="", algorithm="", Py_ssize_t own_at=-1):
        if len(steps) > MAX_STEPS:
            raise ValueError(f"{len(steps)} steps are too many for the lane")
        if own_at >= 0 and not (has_result and own_at + xbytes <= outbytes):
            raise ValueError(f"x's {xbytes} bytes at {own_at} are not within out's {outbytes}")
        self.own_at = own_at
        self.base, self.calls, self.transport = base, base._calls, transport
        self.shape, self.dtype = shape, dtype
        self.xbytes, self.outbytes, self.workbytes = xbytes, outbytes, workbytes
        self.align = dtype.alignment
        self.has_result = has_result
        self.word = bytes(word)
        self.collective, self.algorithm = collective, algorithm
        self.nsteps = len(steps)
        self.largest_send = 0
        sizes = {BUF_X: xbytes, BUF_OUT: outbytes if has_result else 0, BUF_WORK: workbytes,
                 BUF_WORD: len(self.word)}
        for i, step in enumerate(steps):
            (self.kind[i], self.dest[i], self.sbuf[i], self.slo[i], self.sn[i], self.source[i],
             self.rbuf[i], self.rlo[i], self.rn[i], self.cbuf[i], self.clo[i]) = step
            if self.kind[i] in (STEP_SEND, STEP_SENDRECV, STEP_SENDRECV_COPY, STEP_SEND_COPY):
                self.largest_send = max(self.largest_send, self.sn[i])
            # Every span within its buffer, checked once here.
            spans = {STEP_SEND: [(self.sbuf[i], self.slo[i], self.sn[i])],
                     STEP_RECV: [(self.rbuf[i], self.rlo[i], self.rn[i])],
                     STEP_COPY: [(self.sbuf[i], self.slo[i], self.sn[i]),
                                 (self.rbuf[i], self.rlo[i], self.sn[i])],
                     STEP_SENDRECV: [(self.sbuf[i], self.slo[i], self.sn[i]),
                                     (self.rbuf[i], self.rlo[i], self.rn[i])],
                     STEP_SENDRECV_COPY: [(self.sbuf[i], self.slo[i], self.sn[i]),
                                          (self.rbuf[i], self.rlo[i], self.rn[i]),
                                          (self.cbuf[i], self.clo[i], self.sn[i])],
                     STEP_SEND_COPY: [(self.sbuf[i], self.slo[i], self.sn[i]),
                                      (self.rbuf[i], self.rlo[i], self.rn[i]),
                                      (self.cbuf[i], self.clo[i], self.rn[i])]}[self.kind[i]]
            for buf, lo, n in spans:
                # no empty message of data; a barrier's are the word's, of 0 bytes
                if not (0 <= lo and (0 < n or buf == BUF_WORD) and lo + n <= sizes.get(buf, 0)):
                    raise ValueError(f"step {i} {step}: span [{lo}, {lo + n}) outside "
                                     f"buffer {buf} of {sizes.get(buf, 0)} bytes")

    cdef int execute(self, char **bufs, int tag, double deadline, Stage *stage) noexcept nogil:
        """The program. A send goes out of *stage* when that pays (Note
        [Staging sends] in _resources.pyx); a copy step and the copy beside a
        send read the caller's spans themselves."""
        cdef handle_t comm = self.transport.comm
        cdef void *status = self.transport.status
        cdef const char *sb
        cdef char *rb
        cdef int i, k, rc = 0
        for i in range(self.nsteps):
            k = self.kind[i]
            if k == STEP_COPY:
                copy_apart(bufs[self.rbuf[i]] + self.rlo[i], bufs[self.sbuf[i]] + self.slo[i],
                           self.sn[i])
                continue
            sb = rb = NULL
            if k != STEP_RECV:
                sb = staged(bufs[self.sbuf[i]] + self.slo[i], self.sn[i], stage)
            if k == STEP_SEND_COPY:
                rc = send_copying(sb, <int>self.sn[i], self.dest[i], tag, comm, status,
                                  bufs[self.cbuf[i]] + self.clo[i],
                                  bufs[self.rbuf[i]] + self.rlo[i], self.rn[i], deadline,
                                  &self.stuck_peer)
            elif k == STEP_SENDRECV_COPY:
                rb = bufs[self.rbuf[i]] + self.rlo[i]
                rc = exchange_copying(sb, <int>self.sn[i], self.dest[i], rb, <int>self.rn[i],
                                      self.source[i], tag, comm, status,
                                      bufs[self.cbuf[i]] + self.clo[i],
                                      bufs[self.sbuf[i]] + self.slo[i], deadline,
                                      &self.stuck_peer)
            else:
                if k != STEP_SEND:
                    rb = bufs[self.rbuf[i]] + self.rlo[i]
                rc = exchange(sb, <int>self.sn[i], self.dest[i], rb, <int>self.rn[i],
                              self.source[i], tag, comm, status, deadline, &self.stuck_peer)
            if rb != NULL:
                rc = arrived(&self.arrival, rc, status, <int>self.rn[i], self.source[i], i + 1)
            if rc != 0:
                self.stuck_step = i + 1      # 1-based, as the other lanes and Channel.step
                return rc
        return 0

    cdef object call(self, x, out, int tag=-1, double deadline=0.0):
        """The result (None where this rank has none), or NOT_TAKEN, with
        nothing sent, if the Python path must take the call. The call takes
        the next tag, or runs on *tag* (>= 0: one its caller took).
        *deadline*: 0, or the time.monotonic() by which it must be done
        (Note [Lane deadlines])."""
        cdef Operands o
        cdef char *bufs[4]
        cdef Stage st
        cdef Ways *ways
        cdef int rc
        cdef double started = 0.0
        result = None
        if self.has_result:
            result = lane_output(out, self.shape, self.dtype)
            if result is NOT_TAKEN:
                return NOT_TAKEN
        # Without xbytes (a scatter's receiver) x is ignored.
        if not take_operands(&o, x, self.xbytes != 0, self.xbytes, result, self.align,
                             self.own_at):
            return NOT_TAKEN
        try:
            bufs[BUF_X], bufs[BUF_OUT] = o.xp, o.outp
            bufs[BUF_WORK] = NULL
            bufs[BUF_WORD] = <char *>self.word
            work = self.calls.borrow(SLOT_WORK, self.workbytes, &bufs[BUF_WORK]) \
                if self.workbytes else None
            ways = self.ways_for(&o)
            stage_held = self.calls.stage(ways, self.largest_send, &st)
            if tag < 0:
                tag = self.calls.next_tag()
            self.arrival.step = 0
            with nogil:
                if deadline > 0.0:
                    started = monotonic()
                rc = self.execute(bufs, tag, deadline, &st)
                settle(ways, &st, rc)
        finally:
            release_operands(&o)
        check_lane(rc, "the lane", self.base, self.stuck_peer, self.collective, self.algorithm,
                   self.stuck_step, self.nsteps, started, &self.arrival)
        return result

    def run(self, x, out, double deadline=0.0):
        """call() from Python: the result, None, or NOT_TAKEN."""
        return self.call(x, out, -1, deadline)


cdef class ScatterRoot:
    """The root's part of one repeated, plain scatter of an array of one
    (dtype, shape, algorithm) whose header is the short word: the word down
    the header's binomial tree, then the data lane (a StepLane); or, when
    *inline*, the data lane alone, whose program sends each child the word
    and its subtree's blocks in one message (_header.py, Note [Inline
    scatter]). x is checked before anything leaves; an out the data lane
    declines goes to *rest(x, out, deadline)*, the general path's data
    phase (never when inline: the lane then takes any out the general path
    would). With a deadline every message is posted and tested against it
    (Note [Lane deadlines])."""

    cdef Transport transport
    cdef CallResources calls
    cdef object base, word, rest
    cdef StepLane data
    cdef bint inline
    cdef int nchildren, stuck_peer
    cdef int children[MAX_CHILDREN]

    def __cinit__(self, base, Transport transport, word, children, StepLane data, rest,
                  bint inline=False):
        if len(children) > MAX_CHILDREN or len(word) != WORD_BYTES:
            raise ValueError(f"{len(children)} children, a word of {len(word)} bytes")
        self.base, self.calls, self.transport = base, base._calls, transport
        self.data, self.rest = data, rest
        self.inline = inline
        self.word = np.array(word, np.uint8)
        self.nchildren = len(children)
        for i, child in enumerate(children):
            self.children[i] = child

    cdef object call(self, x, out, double deadline=0.0):
        cdef Py_buffer b
        cdef int i, rc = 0, tag
        cdef bint fits
        cdef double started = monotonic() if deadline > 0.0 else 0.0
        try:
            PyObject_GetBuffer(x, &b, PyBUF_SIMPLE)
        except (BufferError, ValueError, TypeError):
            return NOT_TAKEN                # not C-contiguous: the Python path packs it
        fits = b.len == self.data.xbytes and <uintptr_t>b.buf % self.data.align == 0
        PyBuffer_Release(&b)
        if not fits:
            return NOT_TAKEN
        if self.inline:                     # NOT_TAKEN: nothing sent, the general path's turn
            return self.data.call(x, out, -1, deadline)
        PyObject_GetBuffer(self.word, &b, PyBUF_SIMPLE)
        try:
            tag = self.calls.next_tag()
            with nogil:
                for i in range(self.nchildren):
                    rc = send_by(<char *>b.buf, WORD_BYTES, self.children[i], tag,
                                 self.transport.comm, self.transport.status, deadline,
                                 &self.stuck_peer)
                    if rc != 0:
                        break
        finally:
            PyBuffer_Release(&b)
        check_lane(rc, "the scatter header", self.base, self.stuck_peer, "scatter", "header",
                   i + 1, self.nchildren, started, NULL)           # steps from 1, as everywhere
        result = self.data.call(x, out, -1, deadline)
        return self.rest(x, out, deadline) if result is NOT_TAKEN else result


cdef class ScatterReceiver:
    """A non-root's part of repeated scatters from one (root, algorithm):
    the header message from its parent in the header's binomial tree, room
    bytes at most. A short word is passed on to its children, then the
    data lane of the last signature seen (*expect*) runs when the word
    names it again. An inline word (*inline_code*; _header.py, Note [Inline
    scatter]) brings this rank's subtree's blocks along: the data lane of
    its signature passes them on and keeps its own block, on the same tag.
    Any other word, or an out the lane declines, goes to *rest(message,
    out, tag, deadline)*, which finds or makes the lane of the new word or
    takes the general path from there. With a deadline every message is
    posted and tested against it (Note [Lane deadlines])."""

    cdef Transport transport
    cdef CallResources calls
    cdef object base, message, expected, lane, lane_x, rest
    cdef int parent, nchildren, room, stuck_peer, done
    cdef int64_t inline_code
    cdef int children[MAX_CHILDREN]

    def __cinit__(self, base, Transport transport, int parent, children, rest, int room,
                  int64_t inline_code):
        if len(children) > MAX_CHILDREN or room < WORD_BYTES:
            raise ValueError(f"{len(children)} children, room for {room} bytes")
        self.base, self.calls, self.transport, self.rest = base, base._calls, transport, rest
        self.parent, self.nchildren = parent, len(children)
        for i, child in enumerate(children):
            self.children[i] = child
        self.room, self.inline_code = room, inline_code
        self.message = np.zeros(room, np.uint8)
        self.expected, self.lane, self.lane_x = None, None, None

    def expect(self, bytes word, lane) -> None:
        """The data lane (a StepLane, or None) of the signature *word* names;
        for an inline word the lane reads the received message as its x."""
        self.expected, self.lane, self.lane_x = word, lane, None
        if lane is not None and np.frombuffer(word[:8], np.int64)[0] == self.inline_code:
            self.lane_x = self.message[:(<StepLane>lane).xbytes]

    cdef object call(self, out, double deadline=0.0):
        cdef Py_buffer b
        cdef int i, rc, tag
        cdef bint same, inline
        cdef double started = monotonic() if deadline > 0.0 else 0.0
        PyObject_GetBuffer(self.message, &b, PyBUF_SIMPLE | PyBUF_WRITABLE)
        try:
            tag = self.calls.next_tag()
            with nogil:
                self.done = 0
                rc = recv_by(<char *>b.buf, self.room, self.parent, tag, self.transport.comm,
                             self.transport.status, deadline, &self.stuck_peer)
                inline = rc == 0 and (<int64_t *>b.buf)[0] == self.inline_code
                for i in range(self.nchildren):
                    if rc != 0 or inline:
                        break
                    self.done += 1
                    rc = send_by(<char *>b.buf, WORD_BYTES, self.children[i], tag,
                                 self.transport.comm, self.transport.status, deadline,
                                 &self.stuck_peer)
            same = self.lane is not None and \
                memcmp(b.buf, <char *>self.expected, WORD_BYTES) == 0
        finally:
            PyBuffer_Release(&b)
        check_lane(rc, "the scatter header", self.base, self.stuck_peer, "scatter", "header",
                   self.done + 1, 1 + self.nchildren, started, NULL)   # the message it was on
        if same:
            if inline:
                result = (<StepLane>self.lane).call(self.lane_x, out, tag, deadline)
            else:
                result = (<StepLane>self.lane).call(None, out, -1, deadline)
            if result is not NOT_TAKEN:
                return result
        return self.rest(self.message.copy(), out, tag, deadline)


# The names pycoll/_lanes.py builds StepLane programs with.
STEP = {"send": STEP_SEND, "recv": STEP_RECV, "copy": STEP_COPY, "sendrecv": STEP_SENDRECV,
        "sendrecv_copy": STEP_SENDRECV_COPY, "send_copy": STEP_SEND_COPY}
BUFFER = {"x": BUF_X, "out": BUF_OUT, "work": BUF_WORK, "word": BUF_WORD}


def _step_lane_call(comm, kind, x, rest, out, timeout):
    """The call on the StepLane made for (kind, x's dtype and shape, *rest),
    with *timeout* (Note [Lane deadlines]), if one was; NOT_TAKEN (nothing
    sent) otherwise."""
    if type(x) is not ndarray or not in_turn(comm):
        return NOT_TAKEN                    # queued calls first (Note [Issue order])
    try:
        lane = comm._plans.get((kind, x.dtype, x.shape) + rest)
    except TypeError:
        return NOT_TAKEN
    if lane is None:
        return NOT_TAKEN
    return (<StepLane>lane).call(x, out, -1, lane_deadline(comm, timeout))


# The entries of the lanes: each call's arguments as the collective got
# them (timeout= included), the result or, for any call its lane does not
# take, NOT_TAKEN (allreduce, reduce_scatter: None) with nothing sent.

def gather(comm, x, root, algorithm, out, timeout=None, sizes=None):
    """The lane of a repeated, plain gather: the root's result, None
    elsewhere."""
    if type(root) is not int:
        return NOT_TAKEN                    # the general path checks it (Note [Equal keys], api.py)
    key = () if sizes is None else sizes_key(sizes)
    if key is None:
        return NOT_TAKEN
    return _step_lane_call(comm, "gather-lane", x, (root, algorithm) + key, out, timeout)


def alltoall(comm, x, algorithm, out, timeout=None, sizes=None):
    """The lane of a repeated, plain alltoall: the result."""
    key = () if sizes is None else matrix_key(sizes)
    if key is None:
        return NOT_TAKEN
    return _step_lane_call(comm, "alltoall-lane", x, (algorithm,) + key, out, timeout)


def scatter(comm, x, root, algorithm, out, timeout=None, sizes=None):
    """The lane of a repeated, plain scatter: this rank's block. With
    *sizes*, the root's lane and the receivers' header lane are keyed by
    them too (a receiver's data lanes hang off its header lane)."""
    if type(root) is not int or not in_turn(comm):
        return NOT_TAKEN                    # queued calls first (Note [Issue order])
    tail = () if sizes is None else sizes_key(sizes)
    if tail is None:
        return NOT_TAKEN
    if comm.rank == root:
        if type(x) is not ndarray:
            return NOT_TAKEN
        try:
            lane = comm._plans.get(("scatter-lane-root", x.dtype, x.shape, root, algorithm)
                                   + tail)
        except TypeError:
            return NOT_TAKEN
        return NOT_TAKEN if lane is None else (<ScatterRoot>lane).call(
            x, out, lane_deadline(comm, timeout))
    try:
        lane = comm._plans.get(("scatter-header", root, algorithm) + tail)
    except TypeError:
        return NOT_TAKEN
    return NOT_TAKEN if lane is None else (<ScatterReceiver>lane).call(
        out, lane_deadline(comm, timeout))


def allgather(comm, x, algorithm, out, timeout=None, sizes=None):
    """The lane of a repeated, plain allgather: the result."""
    key = () if sizes is None else sizes_key(sizes)
    if key is None:
        return NOT_TAKEN
    return _step_lane_call(comm, "allgather-lane", x, (algorithm,) + key, out, timeout)


def barrier(comm, timeout=None):
    """The lane of a barrier: None once every rank has entered it."""
    if not in_turn(comm):
        return NOT_TAKEN                    # queued calls first (Note [Issue order])
    lane = comm._plans.get(("barrier-lane",))
    if lane is None:
        return NOT_TAKEN
    return (<StepLane>lane).call(None, None, -1, lane_deadline(comm, timeout))


cdef class BroadcastLane(StagedSends):
    """One repeated, plain broadcast of an array of one (dtype, shape, root,
    algorithm) on the binomial tree (or, at p = 2, the pipeline: the same
    single message), run in C. Per tree edge, as _header.exchange and the
    general path send them: the header word and the data in one message
    when the data fits (*inline*), else the word, then the data on the next
    tag.

    Before and after (every rank passes an array of the root's shape)::

        root:   x = the data      ->  x unchanged
        others: x = anything      ->  x = the root's data

    A receiver forwards the header it got, whatever it holds, before
    comparing it with the one it expects; when they differ (the root sent
    another signature, or an error) *rest(x, message, deadline, algorithm)*
    takes the call on from there, the general path, with the algorithm the
    caller named: the lane serves "auto" and the name it resolves to at
    this size alike (Note [One plan per algorithm] in _plan.py), and at the
    root's size "auto" may resolve to another. With a deadline every message
    is posted and tested against it (Note [Lane deadlines]); *algorithm*
    names the call in a CollectiveTimeout.
    """

    cdef Transport transport
    cdef CallResources calls
    cdef object base, message, expected, rest
    cdef readonly object algorithm
    cdef Py_ssize_t nbytes, align, capacity
    cdef int parent, nchildren, nmessages, done, stuck_peer
    cdef int children[MAX_CHILDREN]
    cdef bint inline

    def __cinit__(self, base, Transport transport, word, int parent, children,
                  Py_ssize_t nbytes, Py_ssize_t align, bint inline, Py_ssize_t capacity, rest,
                  algorithm=""):
        if len(children) > MAX_CHILDREN:
            raise ValueError(f"{len(children)} children: more than the lane holds")
        if len(word) != WORD_BYTES or capacity < WORD_BYTES + (nbytes if inline else 0):
            raise ValueError(f"a header of {len(word)} bytes in {capacity}")
        self.base, self.calls, self.transport, self.rest = base, base._calls, transport, rest
        self.parent, self.nchildren = parent, len(children)
        for i, child in enumerate(children):
            self.children[i] = child
        self.nbytes, self.align, self.inline, self.capacity = nbytes, align, inline, capacity
        self.algorithm = algorithm
        self.nmessages = (self.nchildren + (parent >= 0)) * (1 if inline else 2)
        self.expected = bytes(word)
        # The root's message (the word, then the data when inline); a
        # receiver's room for whatever header the root may send.
        self.message = np.zeros(capacity, np.uint8)
        self.message[:WORD_BYTES] = np.frombuffer(self.expected, np.uint8)

    cdef int forward(self, const char *buf, int n, int tag, double deadline) noexcept nogil:
        cdef int i, rc = 0
        for i in range(self.nchildren):
            rc = send_by(buf, n, self.children[i], tag, self.transport.comm,
                         self.transport.status, deadline, &self.stuck_peer)
            if rc != 0:
                break
            self.done += 1
        return rc

    cdef int receive(self, char *buf, int n, int tag, double deadline) noexcept nogil:
        cdef int rc = recv_by(buf, n, self.parent, tag, self.transport.comm,
                              self.transport.status, deadline, &self.stuck_peer)
        self.done += rc == 0
        return rc

    cdef object call(self, x, algorithm, double deadline=0.0, bint guessed=False):
        """x after the broadcast, or NOT_TAKEN (nothing sent) for an x the
        general path must take. *algorithm*: the caller's. *deadline*: 0,
        or the time.monotonic() by which it must be done (Note [Lane
        deadlines]). *guessed*: x is this lane's guess for a caller's None
        (Note [Broadcasts into None] in pycoll/_lanes.py), which rest() then
        gets back as None."""
        cdef Py_buffer xb, mb
        cdef int rc = 0, tag, count = 0
        cdef char *xp
        cdef char *mp
        cdef Stage st
        cdef bint matched = True
        cdef double started = monotonic() if deadline > 0.0 else 0.0
        st.way = -1                         # nothing to time until stage() says otherwise
        self.done = 0
        try:
            PyObject_GetBuffer(x, &xb, PyBUF_SIMPLE | PyBUF_WRITABLE)
        except (BufferError, ValueError, TypeError):
            return NOT_TAKEN                # read-only or not C-contiguous
        try:
            xp = <char *>xb.buf
            if xb.len != self.nbytes or <uintptr_t>xp % self.align:
                return NOT_TAKEN
            PyObject_GetBuffer(self.message, &mb, PyBUF_SIMPLE | PyBUF_WRITABLE)
            try:
                mp = <char *>mb.buf
                # The data goes to each child out of one copy on huge pages,
                # when that pays (Note [Staging sends]).
                stage_held = self.calls.stage(&self.ways[0], 0 if self.inline or not self.nchildren
                                              else self.nbytes, &st)
                tag = self.calls.next_tag()
                if self.parent < 0:
                    with nogil:
                        if self.inline:
                            memcpy(mp + WORD_BYTES, xp, self.nbytes)
                            rc = self.forward(mp, <int>(WORD_BYTES + self.nbytes), tag, deadline)
                        else:
                            rc = self.forward(mp, WORD_BYTES, tag, deadline)
                    if rc == 0 and not self.inline:
                        tag = self.calls.next_tag()
                        with nogil:
                            rc = self.forward(staged(xp, self.nbytes, &st), <int>self.nbytes,
                                              tag, deadline)
                else:
                    with nogil:
                        rc = self.receive(mp, <int>self.capacity, tag, deadline)
                        if rc == 0:
                            rc = received_bytes(self.transport.status, &count)
                        if rc == 0:
                            rc = self.forward(mp, count, tag, deadline)
                    matched = count == WORD_BYTES + (self.nbytes if self.inline else 0) \
                        and memcmp(mp, <char *>self.expected, WORD_BYTES) == 0
                    if rc == 0 and matched:
                        if self.inline:
                            memcpy(xp, mp + WORD_BYTES, self.nbytes)
                        else:
                            tag = self.calls.next_tag()
                            with nogil:
                                rc = self.receive(xp, <int>self.nbytes, tag, deadline)
                                if rc == 0 and self.nchildren:
                                    rc = self.forward(staged(xp, self.nbytes, &st),
                                                      <int>self.nbytes, tag, deadline)
            finally:
                PyBuffer_Release(&mb)
        finally:
            PyBuffer_Release(&xb)
        if matched:
            settle(&self.ways[0], &st, rc)
        check_lane(rc, "the broadcast lane", self.base, self.stuck_peer, "broadcast",
                   self.algorithm, self.done + 1, self.nmessages, started, NULL)  # the one on
        if not matched:
            return self.rest(None if guessed else x, self.message[:count], deadline, algorithm)
        return x


def broadcast(comm, x, root, algorithm, timeout=None):
    """The lane of a repeated, plain broadcast: x, filled; off the root,
    for x None, a new array (Note [Broadcasts into None] in
    pycoll/_lanes.py)."""
    if type(root) is not int or not in_turn(comm):
        return NOT_TAKEN                    # queued calls first (Note [Issue order])
    guessed = x is None
    try:
        if guessed:
            last = comm._plans.get(("broadcast-none", root, algorithm))
            if last is None:
                return NOT_TAKEN
            dtype, shape = last
        elif type(x) is ndarray:
            dtype, shape = x.dtype, x.shape
        else:
            return NOT_TAKEN
        lane = comm._plans.get(("broadcast-lane", dtype, shape, root, algorithm))
    except TypeError:
        return NOT_TAKEN
    if lane is None:
        return NOT_TAKEN
    if guessed:
        x = np.empty(shape, dtype)
    return (<BroadcastLane>lane).call(x, algorithm, lane_deadline(comm, timeout), guessed)

