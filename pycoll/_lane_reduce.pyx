# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
# cython: embedsignature=True
"""The reduction lanes: a repeated, plain allreduce, reduce, scan or
reduce_scatter run in C when its vector is one segment.

``Lane`` is the lane of an allreduce or reduce plan: the algorithm's
schedule (pycoll/algorithms/_schedule.py) interpreted in C, with the MPI
calls of pycoll/_mpicall.pyx and the reduction kernels; ``ScanLane`` a
scan's, likewise; ``ReduceScatterLane`` the ring's or recursive halving's
reduce-scatter steps (and the ring allreduce's), when every block is one
message. pycoll/_plan.py makes them. ``allreduce``, ``reduce``, ``scan`` and
``reduce_scatter`` are the entries every such call tries first; they answer
None (``allreduce``, ``reduce_scatter``) or NOT_TAKEN (the others, whose
result may be None) whenever the call is not the plain case (no plan yet,
non-contiguous input, an out the Python path must check or write back), and
the Python path takes the call. Either path sends the same messages with
the same tags, so ranks taking different paths in one call still meet.
"""

from libc.string cimport memcpy

import numpy as np

from pycoll._kernels.reduce cimport (convert_buffer, pycoll_binary_loop, itemsize_of, loop_for,
                                     scale_buffer)
from pycoll._mpicall cimport (Arrival, Transport, arrived, check_lane, exchange, handle_t,
                              lane_deadline, monotonic)
from pycoll._resources cimport (MAX_STEPS, SLOT_LANE, SLOT_OUTPUT, SLOT_WORK, CallResources,
                                Operands, Stage, StagedSends, Ways, in_turn, lane_output,
                                release_operands, settle, staged, take_operands)

from pycoll._dtypes import Op, key_op
from pycoll._resources import NOT_TAKEN, sizes_key

cdef object ndarray = np.ndarray
cdef object OpType = Op


cdef inline object plain_op(op):
    """*op* as the plans key it: a pycoll Op or name as given, an mpi4py
    op (unhashable) as its pycoll Op (key_op)."""
    if type(op) is OpType or type(op) is str:
        return op
    return key_op(op)

cdef enum:
    SEND = 0            # the step kinds of pycoll/algorithms/_schedule.py
    RECV = 1
    RECV_REDUCE = 2
    EXCHANGE = 3
    SEED = 4            # a scan's (ScanLane)

cdef enum:
    RS_SEND_PARTIAL = 1 # the flags of a reduce_scatter step (_schedule.py)
    RS_MINE_PARTIAL = 2
    RS_INTO_RESULT = 4
    RS_NO_REDUCE = 8
    RS_LEFT = 16
    RS_COPY = 32


cdef inline bint reduces_in_place(int flags) noexcept nogil:
    """A reduce_scatter step that reduces the partial sums' range into
    itself: what arrives must land in the "lane" scratch first."""
    return flags & RS_MINE_PARTIAL and not flags & (RS_INTO_RESULT | RS_NO_REDUCE)


# Note [Widened lanes]
# ~~~~~~~~~~~~~~~~~~~~
# accumulate="float32" runs a float16 or bfloat16 reduction in float32:
# the general path widens x into scratch, runs the schedule on float32
# bytes, divides (AVG) and narrows the result once (_plan._send_bytes,
# _finish). A Lane made with a result_code does the same in C, with the
# same conversion kernels: x and the result are of result_code, the
# schedule, its messages and its kernel of code (float32), and the widened
# input and partial live in the "lane" scratch after the schedule's own
# room. ReduceScatterLane (reduce_scatter, the ring's allreduce) does the
# same in its "work" scratch. Before, such a call took the general path at
# every size: an 8 B bfloat16 allreduce with accumulate took 15.7 us at
# p = 2 against 3.7 without.

cdef class Lane(StagedSends):
    """One allreduce or reduce plan, run in C: its schedule, kernel and buffers.

    Made by _plan.Plan when the plan's algorithm has a schedule, the vector is
    one segment, and the communicator has a Transport. *gets_result*: this
    rank ends with the result (every rank of an allreduce, the root of a
    reduce); elsewhere the partial lives in scratch and the call returns
    None. *collective* and *algorithm* name the call in a CollectiveTimeout
    (Note [Lane deadlines] in _mpicall.pyx). *result_code*: x's and the result's dtype when
    the schedule runs in *code*, wider (Note [Widened lanes]); *shape* and
    *dtype* are the result's.
    """

    cdef Transport transport
    cdef CallResources calls
    cdef object base, shape, dtype, collective
    cdef readonly object algorithm     # _plan.py, Note [One plan per algorithm]
    cdef pycoll_binary_loop loop
    cdef int code, result_code, nsteps, divisor, stuck_peer, stuck_step
    cdef Arrival arrival
    cdef bint gets_result, sends
    cdef double deadline
    cdef Py_ssize_t nbytes, xbytes, count, align, room
    cdef int kinds[MAX_STEPS]
    cdef int peers[MAX_STEPS]
    cdef int lefts[MAX_STEPS]

    def __cinit__(self, base, Transport transport, steps, int op, int code, shape, dtype,
                  Py_ssize_t nbytes, int divisor, bint gets_result=True,
                  collective="allreduce", algorithm="?", int result_code=-1):
        if len(steps) > MAX_STEPS:
            raise ValueError(f"a schedule of {len(steps)} steps is too long for the lane")
        self.loop = loop_for(op, code)
        if self.loop is NULL:
            raise ValueError(f"no kernel for op {op}, dtype {code}")
        self.base, self.transport = base, transport
        self.code, self.shape, self.dtype = code, shape, dtype
        self.nbytes = self.room = nbytes    # room: the "lane" scratch a call borrows
        self.count = nbytes // itemsize_of(code)
        # Note [Widened lanes]: x and the result in result_code, the
        # schedule in code (float32)
        self.result_code = result_code if result_code >= 0 else code
        self.xbytes = self.count * itemsize_of(self.result_code)
        self.align = 8 if itemsize_of(self.result_code) == 16 else itemsize_of(self.result_code)
        self.divisor = divisor              # AVG: divide by p; 0: no division
        self.gets_result = gets_result
        self.collective, self.algorithm = collective, algorithm
        self.deadline = 0.0
        self.nsteps = len(steps)
        self.sends = False
        for i, step in enumerate(steps):
            self.kinds[i], self.peers[i] = step[0], step[1]
            self.lefts[i] = step[2] if len(step) > 2 else 0
            self.sends |= step[0] in (SEND, EXCHANGE)
        # The received partial lands in the communicator's scratch, borrowed
        # per call: plans are many, one buffer per plan would add up.
        self.calls = base._calls

    cdef int transfer(self, const char *sbuf, char *rbuf, int peer, int n, int tag,
                      handle_t comm, int step) noexcept nogil:
        """Step *step*'s messages with *peer*: a send (rbuf NULL), a receive
        (sbuf NULL) or both; by the call's deadline when it has one. A
        receive notes its length (Note [Message lengths] in _p2p.py)."""
        cdef int rc = exchange(sbuf, n, peer, rbuf, n, peer, tag, comm, self.transport.status,
                               self.deadline, &self.stuck_peer)
        if rbuf != NULL:
            rc = arrived(&self.arrival, rc, self.transport.status, n, peer, step)
        if rc != 0:
            self.stuck_step = step
        return rc

    cdef int execute(self, char *send, char *data, char *theirs, Stage *stage,
                     int tag) noexcept nogil:
        """The schedule: the partial starts in send and lives in data from
        its first receipt or reduction (as _schedule.execute). What it
        sends goes through *stage* when that pays (Note [Staging sends] in _resources.pyx)."""
        cdef char *mine = send
        cdef char *into
        cdef handle_t comm = self.transport.comm
        cdef int n = <int>self.nbytes
        cdef int i, rc = 0, peer
        for i in range(self.nsteps):
            peer = self.peers[i]
            if self.kinds[i] == SEND:
                rc = self.transfer(staged(mine, n, stage), NULL, peer, n, tag, comm, i + 1)
            elif self.kinds[i] == RECV:
                rc = self.transfer(NULL, data, peer, n, tag, comm, i + 1)
                mine = data
            else:
                # Straight into data while the partial is still the input
                # (they are apart: run() refuses partial overlaps), as in
                # Note [Reduce in place] of pycoll/_p2p.py.
                into = data if mine != data else theirs
                if self.kinds[i] == RECV_REDUCE:
                    rc = self.transfer(NULL, into, peer, n, tag, comm, i + 1)
                else:
                    rc = self.transfer(staged(mine, n, stage), into, peer, n, tag, comm, i + 1)
                if rc == 0:
                    if self.lefts[i]:
                        self.loop(data, into, mine, self.count)
                    else:
                        self.loop(data, mine, into, self.count)
                mine = data
            if rc != 0:
                return rc
        # As _schedule.execute: a rank whose last step sent keeps no result.
        if mine != data and not (self.nsteps and self.kinds[self.nsteps - 1] == SEND):
            memcpy(data, mine, self.nbytes)
        return 0

    def run(self, x, out, double deadline=0.0):
        """allreduce(x, out=out) in C, or None if the Python path must take it."""
        result = self.call(x, out, deadline)
        return None if result is NOT_TAKEN else result

    cdef object call(self, x, out, double deadline=0.0):
        """The call in C: the result (None off a reduce's root), or
        NOT_TAKEN, with nothing sent, if the Python path must take it.
        *deadline*: 0, or the time.monotonic() by which it must be done
        (Note [Lane deadlines])."""
        cdef Operands o
        cdef char *theirs
        cdef char *send
        cdef char *data
        cdef Stage st
        cdef Ways *ways
        cdef int rc, tag
        cdef bint wide = self.result_code != self.code
        cdef double started = 0.0
        if not self.gets_result:
            result = None                   # out is ignored here; the partial lives in scratch
            output = None if wide else self.calls.scratch("lane-data", self.nbytes)
        else:
            result = output = lane_output(out, self.shape, self.dtype)
            if result is NOT_TAKEN:
                return NOT_TAKEN
        if not take_operands(&o, x, True, self.xbytes, output, self.align, 0):
            return NOT_TAKEN
        try:
            tag = self.calls.next_tag()
            held = self.calls.borrow(SLOT_LANE, self.room + (2 * self.nbytes if wide else 0),
                                     &theirs)
            send, data = o.xp, o.outp
            if wide:
                send = theirs + self.room
                data = send + self.nbytes
            ways = self.ways_for(&o)
            stage_held = self.calls.stage(ways, self.nbytes if self.sends else 0, &st)
            self.deadline = deadline
            self.arrival.step = 0
            with nogil:
                started = monotonic()
                if wide:
                    convert_buffer(self.result_code, self.code, send, o.xp, self.count)
                rc = self.execute(send, data, theirs, &st, tag)
                settle(ways, &st, rc)
                if rc == 0 and self.gets_result:
                    if self.divisor:
                        scale_buffer(self.code, data, data, self.divisor, self.count)
                    if wide:
                        convert_buffer(self.code, self.result_code, o.outp, data, self.count)
        finally:
            release_operands(&o)
        check_lane(rc, "the lane", self.base, self.stuck_peer, self.collective, self.algorithm,
                   self.stuck_step, self.nsteps, started, &self.arrival)
        return result


cdef class ScanLane(Lane):
    """One scan plan, run in C: Lane's call with a scan's schedule
    (SEED, EXCHANGE, RECV_REDUCE and SEND steps, as
    pycoll/algorithms/_schedule.execute_scan reads them). The partial
    lives in the second half of the "lane" scratch, after what arrives;
    the result in out. Made with Lane's arguments: *gets_result* is False
    on rank 0 of an exclusive scan, which gets None, and *divisor* is AVG's
    count of contributions to this rank's result."""

    def __cinit__(self, *args, **kwargs):
        self.room = 2 * self.nbytes

    cdef int execute(self, char *send, char *data, char *theirs, Stage *stage,
                     int tag) noexcept nogil:
        cdef char *mine = send
        cdef char *partial = theirs + self.nbytes
        cdef handle_t comm = self.transport.comm
        cdef int n = <int>self.nbytes
        cdef int i, rc = 0, peer
        cdef bint have_result = False
        for i in range(self.nsteps):
            peer = self.peers[i]
            if self.kinds[i] == SEED:
                if data != send:
                    memcpy(data, send, self.nbytes)
                have_result = True
            elif self.kinds[i] == SEND:
                rc = self.transfer(staged(mine, n, stage), NULL, peer, n, tag, comm, i + 1)
            else:
                if self.kinds[i] == EXCHANGE:
                    rc = self.transfer(staged(mine, n, stage), theirs, peer, n, tag, comm, i + 1)
                else:
                    rc = self.transfer(NULL, theirs, peer, n, tag, comm, i + 1)
                if rc == 0:
                    if self.lefts[i]:
                        # the partial first: in place, the result is the input
                        self.loop(partial, theirs, mine, self.count)
                        if have_result:
                            self.loop(data, theirs, data, self.count)
                        else:
                            memcpy(data, theirs, self.nbytes)
                            have_result = True
                    else:
                        self.loop(partial, mine, theirs, self.count)
                    mine = partial
            if rc != 0:
                return rc
        return 0

    def take(self, x, out, double deadline=0.0):
        """scan(x, out=out) in C: the result (None on rank 0 of an
        exclusive scan), or NOT_TAKEN if the Python path must take it."""
        return self.call(x, out, deadline)


cdef class ReduceScatterLane(StagedSends):
    """One reduce_scatter plan of the ring or of recursive halving, or
    (*whole*) one allreduce plan of the ring, run in C when every message
    is one segment. The messages, tags, operands and their order are those
    of reduce_scatter_ring.run, reduce_scatter_recursive_halving.run and
    allreduce_ring.run, so ranks taking either path meet and agree bitwise.

    Before and after, at rank r of p (blocks of np.array_split)::

        x:      this rank's whole vector      ->  unchanged
        result: -                             ->  block r of x_0 op ... op x_(p-1)
                                                  (whole: all of it)

    The steps are the algorithm's schedule() (the form and its flags are
    in pycoll/algorithms/_schedule.py). A step sends a range of x or of
    the partial sums (the communicator's "output" scratch) while it
    receives a range and reduces it with this rank's operand of that range,
    into the partial sums or the result. The ring's operand is always x's
    block; recursive halving's is the partial sums' after its first
    exchange, and a step that reduces them into themselves receives into
    the "lane" scratch first. An allreduce's partial sums are its result
    (allreduce_ring.chunk_schedule), which may be x itself (in place):
    then what arrives lands in the "lane" scratch too.
    """

    cdef Transport transport
    cdef CallResources calls
    cdef object base, shape, dtype, collective
    cdef readonly object algorithm
    cdef pycoll_binary_loop loop
    cdef int code, result_code, nsteps, divisor, stuck_peer, stuck_step
    cdef Arrival arrival
    cdef double deadline
    cdef Py_ssize_t nbytes, total, align, tempbytes, largest_send
    cdef bint uses_partial, whole
    cdef int dest[MAX_STEPS]
    cdef int source[MAX_STEPS]
    cdef int flags[MAX_STEPS]
    cdef Py_ssize_t send_lo[MAX_STEPS]
    cdef Py_ssize_t send_n[MAX_STEPS]
    cdef Py_ssize_t recv_lo[MAX_STEPS]
    cdef Py_ssize_t recv_n[MAX_STEPS]

    def __cinit__(self, base, Transport transport, steps, int op, int code, shape, dtype,
                  Py_ssize_t total, int divisor, algorithm="ring", bint whole=False,
                  int result_code=-1):
        """*steps*: the algorithm's schedule(p, r, counts), or (*whole*)
        allreduce_ring.chunk_schedule; *total*: the bytes of x in *code*;
        *result_code*: x's and the result's dtype when the steps run in
        *code*, wider (Note [Widened lanes]); *shape* and *dtype*: the
        result's."""
        if len(steps) > MAX_STEPS:
            raise ValueError(f"a reduce_scatter of {len(steps)} steps does not fit the lane")
        self.loop = loop_for(op, code)
        if self.loop is NULL:
            raise ValueError(f"no kernel for op {op}, dtype {code}")
        self.base, self.calls, self.transport = base, base._calls, transport
        self.code, self.shape, self.dtype = code, shape, dtype
        self.algorithm, self.deadline, self.whole = algorithm, 0.0, whole
        self.collective = "allreduce" if whole else "reduce_scatter"
        self.divisor = divisor              # AVG: divide by p; 0: no division
        self.result_code = result_code if result_code >= 0 else code
        self.align = 8 if itemsize_of(self.result_code) == 16 else itemsize_of(self.result_code)
        self.nsteps = len(steps)
        self.tempbytes, self.uses_partial, self.largest_send = 0, False, 0
        for i, (dest, source, (slo, sn), (rlo, rn), flags) in enumerate(steps):
            self.dest[i], self.source[i], self.flags[i] = dest, source, flags
            self.send_lo[i], self.send_n[i], self.recv_lo[i], self.recv_n[i] = slo, sn, rlo, rn
            if flags & (RS_SEND_PARTIAL | RS_MINE_PARTIAL | RS_COPY) or not flags & RS_INTO_RESULT:
                self.uses_partial = True
            if reduces_in_place(flags) or whole and source >= 0 and not flags & RS_NO_REDUCE:
                self.tempbytes = max(self.tempbytes, rn)
            if dest >= 0:
                self.largest_send = max(self.largest_send, sn)
        self.total = total
        if whole:
            self.uses_partial = False       # the partial sums are the result
            self.nbytes = total
        else:
            # This rank's block; no steps: every block is empty (_lanes.py, Note [Empty lanes]).
            self.nbytes = self.recv_n[self.nsteps - 1] if self.nsteps else 0

    cdef int execute(self, char *send, char *partial, char *result, char *temp, Stage *stage,
                     int tag) noexcept nogil:
        cdef handle_t comm = self.transport.comm
        cdef const char *sbuf
        cdef char *rbuf
        cdef char *into
        cdef char *mine
        cdef int i, f, rc
        cdef size_t count
        for i in range(self.nsteps):
            f = self.flags[i]
            if f & RS_COPY:
                memcpy(result, partial + self.recv_lo[i], self.recv_n[i])
                continue
            if self.dest[i] < 0 and self.source[i] < 0:
                continue                    # both halves empty (_plan._schedule_without_empty)
            sbuf = NULL
            if self.dest[i] >= 0:
                sbuf = staged((partial if f & RS_SEND_PARTIAL else send) + self.send_lo[i],
                              self.send_n[i], stage)
            into = result if f & RS_INTO_RESULT else partial + self.recv_lo[i]
            mine = (partial if f & RS_MINE_PARTIAL else send) + self.recv_lo[i]
            rbuf = NULL
            if self.source[i] >= 0:
                # Apart from this rank's operand, what arrives lands in place.
                rbuf = temp if into == mine and not f & RS_NO_REDUCE else into
            rc = exchange(sbuf, <int>self.send_n[i], self.dest[i], rbuf, <int>self.recv_n[i],
                          self.source[i], tag, comm, self.transport.status, self.deadline,
                          &self.stuck_peer)
            if rbuf != NULL:
                rc = arrived(&self.arrival, rc, self.transport.status, <int>self.recv_n[i],
                             self.source[i], i + 1)
            if rc != 0:
                self.stuck_step = i + 1
                return rc
            if rbuf == NULL or f & RS_NO_REDUCE:
                continue
            count = <size_t>self.recv_n[i] // itemsize_of(self.code)
            if f & RS_LEFT:
                self.loop(into, rbuf, mine, count)
            else:
                self.loop(into, mine, rbuf, count)
        return 0

    def run(self, x, out, double deadline=0.0):
        """reduce_scatter(x, out=out) in C, or None (nothing sent) if the
        Python path must take it. *deadline*: as Lane.call's."""
        cdef Operands o
        cdef int rc = 0, tag
        cdef double started = 0.0
        cdef char *pp = NULL
        cdef char *tp = NULL
        cdef char *send
        cdef char *res
        cdef Stage st
        cdef Ways *ways
        cdef bint wide = self.result_code != self.code
        cdef size_t item = itemsize_of(self.code)
        cdef size_t narrow = itemsize_of(self.result_code)
        result = lane_output(out, self.shape, self.dtype)
        if result is NOT_TAKEN or not take_operands(&o, x, True, self.total // item * narrow,
                                                    result, self.align, 0 if self.whole else -1):
            return None
        try:
            tag = self.calls.next_tag()
            partial = self.calls.borrow(SLOT_OUTPUT, self.total, &pp) if self.uses_partial else None
            send, res = o.xp, o.outp
            if wide:                        # x widened, then the result (Note [Widened lanes])
                work = self.calls.borrow(SLOT_WORK, self.total + self.nbytes, &send)
                res = send + self.total
            if self.whole:
                pp = res
            temp = self.calls.borrow(SLOT_LANE, self.tempbytes, &tp) if self.tempbytes else None
            ways = self.ways_for(&o)
            stage_held = self.calls.stage(ways, self.largest_send, &st)
            self.deadline = deadline
            self.arrival.step = 0
            with nogil:
                started = monotonic()
                if wide:
                    convert_buffer(self.result_code, self.code, send, o.xp, self.total // item)
                rc = self.execute(send, pp, res, tp, &st, tag)
                settle(ways, &st, rc)
                if rc == 0 and self.divisor:
                    scale_buffer(self.code, res, res, self.divisor, self.nbytes // item)
                if rc == 0 and wide:
                    convert_buffer(self.code, self.result_code, o.outp, res, self.nbytes // item)
        finally:
            release_operands(&o)
        check_lane(rc, f"the {self.collective} lane", self.base, self.stuck_peer, self.collective,
                   self.algorithm, self.stuck_step, self.nsteps, started, &self.arrival)
        return result



def allreduce(comm, x, op, algorithm, out, accumulate, timeout=None):
    """The lane of a repeated, plain allreduce: the result; None for any
    other call."""
    if type(x) is not ndarray or not in_turn(comm):
        return None                         # queued calls first (Note [Issue order])
    try:
        plan = comm._plans.get(("allreduce", x.dtype, x.shape, plain_op(op), algorithm,
                                accumulate))
    except TypeError:
        return None
    if plan is None:
        return None
    lane = plan.lane
    if lane is None:
        return None
    if type(lane) is ReduceScatterLane:     # the ring (allreduce_ring.chunk_schedule)
        return (<ReduceScatterLane>lane).run(x, out, lane_deadline(comm, timeout))
    result = (<Lane>lane).call(x, out, lane_deadline(comm, timeout))
    return None if result is NOT_TAKEN else result


def reduce(comm, x, op, root, algorithm, out, accumulate, timeout=None):
    """The lane of a repeated, plain reduce: the result on the root, None
    elsewhere."""
    if type(x) is not ndarray or type(root) is not int or not in_turn(comm):
        return NOT_TAKEN                    # queued calls first (Note [Issue order])
    return plan_lane_call(comm, ("reduce", x.dtype, x.shape, plain_op(op), root, algorithm,
                                 accumulate),
                          x, out, timeout)


def scan(comm, x, op, exclusive, algorithm, out, accumulate, timeout=None):
    """The lane of a repeated, plain scan: the result (None on rank 0 of
    an exclusive scan)."""
    if type(x) is not ndarray or type(exclusive) is not bool or not in_turn(comm):
        return NOT_TAKEN                    # queued calls first (Note [Issue order])
    return plan_lane_call(comm, ("scan", x.dtype, x.shape, plain_op(op), exclusive, algorithm,
                                 accumulate),
                          x, out, timeout)


cdef object plan_lane_call(comm, tuple key, x, out, timeout):
    """The call on the Lane (or ScanLane) of the plan kept under *key*;
    NOT_TAKEN, with nothing sent, when there is none or it declines."""
    try:
        plan = comm._plans.get(key)
    except TypeError:
        return NOT_TAKEN
    if plan is None or plan.lane is None:
        return NOT_TAKEN
    return (<Lane>plan.lane).call(x, out, lane_deadline(comm, timeout))


def reduce_scatter(comm, x, op, algorithm, out, accumulate, timeout=None, sizes=None):
    """The lane of a repeated, plain reduce_scatter: this rank's block;
    None for any other call. Its plan is keyed by *sizes* as the lane keys
    them (sizes_key): made by the general path, which checked them."""
    if type(x) is not ndarray or not in_turn(comm):
        return None                         # queued calls first (Note [Issue order])
    tail = () if sizes is None else sizes_key(sizes)
    if tail is None:
        return None
    try:
        plan = comm._plans.get(("reduce_scatter", x.dtype, x.shape, plain_op(op), algorithm,
                                accumulate) + tail)
    except TypeError:
        return None
    if plan is None or plan.lane is None:
        return None
    if type(plan.lane) is Lane:             # p = 1 (_lanes.py, Note [Solo lanes])
        return (<Lane>plan.lane).run(x, out, lane_deadline(comm, timeout))
    return (<ReduceScatterLane>plan.lane).run(x, out, lane_deadline(comm, timeout))
