"""Step primitives: the vocabulary the algorithms are written in.

A ``Channel`` serves one collective call on one rank: it sends and receives
byte views (``MPI.BYTE``) on the communicator's private context under the
call's tag (Note [Tag discipline] in _comm.py) and reduces with pycoll's
kernels, never with MPI's reduction ops.

Every transfer of n bytes is cut into segments of at most ``segment``
bytes (the plan's, from the tuner); sender and receiver cut the same n the
same way, so segment k matches segment k. Receiving and reducing is
double-buffered: the receive of segment k+1 is posted before segment k is
reduced, so it arrives meanwhile wherever the MPI library moves data
without being called (Note [Reduction segments] in tuning.py: here it
does not). A transfer of 0 bytes sends no message at all, on both sides.

A call with a deadline (``timeout=``) waits by testing its requests until
they complete or the deadline passes; then it cancels what MPI lets it
cancel (pending receives), marks the communicator broken and raises
CollectiveTimeout naming the peer it was waiting for and the step it was
at. Without a deadline, a message that fits in one segment is one blocking
call, through C where the communicator has the C calls (_mpicall.pyx).

Note [Bitwise-identical results]: every rank must end with the same bits,
NaN payloads and signed zeros included, whatever the timing. The algorithms
keep this in one of two ways: an element of the result is computed on one
rank and copied to the others, or every rank that computes it combines the
same operands in the same order (``received_left`` fixes the order of each
reduction: the partial covering lower (relative) ranks goes on the left).
The kernels' results depend only on the operand values (Note [Operand
order] in _kernels/src/kernels.h), never on timing or addresses.

Note [Reduce in place]: a reduction whose result goes to a buffer of its
own (``out`` apart from ``acc``, as in the first step of any reduction
that is not in place) receives the incoming operand straight into ``out``
and reduces there, out = out op acc: the kernel then streams two buffers
instead of three, which here made a 1 MiB float32 sum 1.4x and a 16 MiB
one 2.2x faster (33 vs 23 us, 2.1 vs 0.93 ms), and the scratch buffer is
not needed. Where ``out`` is ``acc`` or overlaps it (in-place calls,
later steps), or overlaps the buffer being sent meanwhile, the operand
lands in scratch as before. Either way the kernel sees the same values
in the same order, so the bits do not change.

Note [Message lengths]: ranks that disagree about a call (a shape, or
sizes= lists that differ) send messages of other lengths than their
receivers expect. A shorter one MPI accepts, leaving the rest of the
receive buffer as it was: garbage in the result, with no error. A longer
one is MPI's error of class MPI_ERR_TRUNCATE on its receiver, and the
receive completes all the same (its buffer full, the rest dropped); MPI
completes the send of a Sendrecv too, and the other requests of a
Waitall, or reports them pending (MPICH), to be waited for again. Had
that error ended the receiver's call, the ranks waiting on its later
messages would wait forever. So every receive of a collective's steps
notes how many bytes arrived (its status's count), or that more did; a
call whose receive brought another length than it expected runs its
remaining steps as planned, so that no rank waits for it, and then
raises MismatchError naming the peer, the step and both lengths
(MismatchError.wrong_length; a longer message's is known with Open MPI,
whose status tells it, not with MPICH). Only a rank that receives a
wrong length can tell: a rank that forwards such a block sends its own
length, so ranks further on may still end with garbage. An exception on
one rank ends most jobs; checks mode names every rank's values before
any message. The C lanes note the same (Arrival and arrived in
_mpicall.pxd). Receives whose length varies by design (a header's room)
happen outside Plan.run, which is where a wrong length raises. What this
does not catch: where the two sides' lengths make different numbers of
messages (a block of 0 bytes is none; a transfer of more than a segment,
several), a receive can wait for a message never sent, or a message stay
unreceived and, past MPI's eager size, its sender wait (a timeout names
either).
"""
from __future__ import annotations

import functools
import logging
import time

import numpy as np

from pycoll._comm import MAX_SEGMENT_BYTES
from pycoll._kernels.reduce import reduce as _reduce
from pycoll._mpi import mpi
from pycoll._resources import WayChooser
from pycoll._pieces import Pieces
from pycoll._pieces import segments as _segments
from pycoll.errors import CollectiveTimeout, MismatchError

# sendrecv_copying overlaps its copy with the messages from this many bytes.
COPY_OVERLAP = 64 << 10
SPIN = 2000            # deadline waits test this many times before sleeping between tests
NAP = 50e-6
TEST_WINDOW = 64       # ... and this many requests at a time (Note [Testing in windows])
# Channel._complete's, when no receive was truncated: no set per wait
NONE_CUT: frozenset = frozenset()


def lands_in(out, acc, sending=None) -> bool:
    """Whether a reduction into *out* can receive its operand straight
    into *out* and reduce there in place (Note [Reduce in place]): out is
    a numpy view apart from *acc* and from the buffer being sent."""
    return (out is not acc and type(out) is np.ndarray and type(acc) is np.ndarray
            and not np.may_share_memory(out, acc)
            and (sending is None or type(sending) is np.ndarray
                 and not np.may_share_memory(out, sending)))


def in_turns(cuts: list) -> list:
    """(i, lo, hi) for each segment (lo, hi) of each list cuts[i]: the
    first segment of every list, then the second of every list that has
    one, and so on (Note [Posting in turns])."""
    return [(i, *segments[k]) for k in range(max(map(len, cuts), default=0))
            for i, segments in enumerate(cuts) if k < len(segments)]


class Channel:
    """Point-to-point steps of one collective call on one rank."""

    __slots__ = ("comm", "tag", "segment", "op", "dtype", "reduce", "scratch", "deadline", "step",
                 "collective", "algorithm", "steps", "start", "short", "_base", "_mpi", "_byte",
                 "_c", "_peers", "_expect", "_status", "_statuses", "_stage")

    def __init__(self, base, tag: int, op: int = -1, dtype: int = -1,
                 segment: int = MAX_SEGMENT_BYTES):
        self._base = base
        self.comm = base._live()
        self.tag = tag
        self.segment = segment
        self.op = op                        # kernel codes of the call's reduction
        self.dtype = dtype
        # reduce(out, a, b): out = a op b with the call's kernel.
        self.reduce = functools.partial(_reduce, op, dtype)
        # scratch(slot, nbytes): the communicator's reusable buffers.
        self.scratch = base.scratch
        # stage.staged(buf): buf, or its copy on huge pages where sending
        # that is faster; stage.done() after the send, which times the way
        # it went (Notes [Staging sends] and [Choosing the way] in
        # pycoll/_resources.pyx). One per plan: the plan's sends are alike.
        self._stage = WayChooser(base._calls)
        self._mpi = mpi()
        self._byte = self._mpi.BYTE
        # Single messages go through C calls when the communicator has them
        # (pycoll/_mpicall.pyx); segmented transfers always through mpi4py.
        self._c = base.transport
        self._peers: dict = {}              # id(request) -> (the rank it involves, its step)
        self._expect: dict = {}             # id(receive request) -> (source, bytes expected, step)
        self._status = self._mpi.Status()   # a blocking mpi4py receive's
        self._statuses: list = []           # wait()'s, one per request
        self.begin(None, "collective", "?", 0)

    def begin(self, deadline, collective: str, algorithm: str, steps: int) -> None:
        """Start a call: its deadline (time.monotonic() value, or None) and
        what a timeout message names."""
        self.deadline, self.collective, self.algorithm, self.steps = deadline, collective, algorithm, steps
        self.step = 0
        self.start = time.monotonic()
        self.short: tuple | None = None     # (step, source, got, expected): Note [Message lengths]
        if self._expect:                    # a call that raised left receives unwaited: their
            self._expect.clear()            # ids may come back as another request's
            self._peers.clear()

    def arrived(self, got: int, expected: int, source: int, step: int = 0) -> None:
        """A receive of *expected* bytes from *source*, at *step* (0: the
        current one), brought *got* (-1: more, by an unknown length): keep
        the call's first of another length (Note [Message lengths])."""
        if got != expected and self.short is None:
            self.short = (step or self.step, source, got, expected)

    def check_arrivals(self) -> None:
        """Raise MismatchError if a receive of the call brought another
        length than it expected."""
        if self.short is not None:
            step, source, got, expected = self.short
            raise MismatchError.wrong_length(self.comm.Get_rank(), source, self.collective,
                                             self.algorithm, step, self.steps, got, expected)

    def _longer(self, exc, status, expected: int) -> int:
        """What a receive of *expected* bytes brought when MPI raised *exc*
        for it: a message longer than *expected* (its length from *status*
        where MPI tells it, else -1); any other error raises *exc*."""
        mpi = self._mpi
        if mpi.Get_error_class(exc.Get_error_code()) != mpi.ERR_TRUNCATE:
            raise exc
        return self._longer_count(status, expected)

    def _longer_count(self, status, expected: int) -> int:
        """A truncated receive's length: its *status*'s count where MPI
        tells it (Open MPI), else -1 (MPICH counts the receive's room)."""
        got = status.Get_count(self._byte)
        return got if got > expected else -1

    def _complete(self, requests: list, statuses,
                  everything: list | None = None) -> set | frozenset:
        """Waitall, or Testall until done or the deadline passes (then
        *everything* the wait was for, requests by default, is given up);
        the indexes of receives whose messages were longer than their
        buffers (Note [Message lengths]). Other MPI errors raise."""
        mpi = self._mpi
        if self.deadline is not None and len(requests) > TEST_WINDOW:
            cut: set = set()
            for lo in range(0, len(requests), TEST_WINDOW):
                hi = lo + TEST_WINDOW
                part = None if statuses is None else statuses[lo:hi]
                window = self._complete(requests[lo:hi], part, everything or requests)
                cut.update(lo + i for i in window)
            return cut or NONE_CUT
        try:
            if self.deadline is None:
                mpi.Request.Waitall(requests, statuses)
            else:
                testall = mpi.Request.Testall
                tries = 0
                while not testall(requests, statuses):
                    tries += 1
                    if time.monotonic() > self.deadline:
                        self._expire(everything or requests)
                    if tries > SPIN:
                        time.sleep(NAP)
            return NONE_CUT
        except mpi.Exception as exc:
            if statuses is None or mpi.Get_error_class(exc.Get_error_code()) != mpi.ERR_IN_STATUS:
                raise
            cut, pending = set(), []
            for i, status in enumerate(statuses):
                error = mpi.Get_error_class(status.Get_error())
                if error == mpi.ERR_PENDING:
                    pending.append(i)
                elif error == mpi.ERR_TRUNCATE:
                    cut.add(i)
                elif error != mpi.SUCCESS:
                    raise
        if pending:
            more = self._complete([requests[i] for i in pending], [statuses[i] for i in pending],
                                  everything)
            cut.update(pending[j] for j in more)
        return cut

    # -- building blocks ------------------------------------------------

    def segments(self, buf):
        """(lo, hi) byte ranges of one transfer of *buf*: segment-sized, and
        cut at the piece boundaries of a Pieces (pycoll/_pieces.py)."""
        return _segments(buf, self.segment)

    def _post(self, start, buf, peer: int) -> list:
        byte, tag, peers, entry = self._byte, self.tag, self._peers, (peer, self.step)
        requests = []
        for lo, hi in self.segments(buf):
            request = start([buf[lo:hi], byte], peer, tag)
            peers[id(request)] = entry
            requests.append(request)
        return requests

    def _post_recv(self, into, source: int, step: int = 0):
        """An Irecv of *into* (one segment) whose length wait() checks;
        *step* 0: the current one."""
        request = self.comm.Irecv([into, self._byte], source, self.tag)
        step = step or self.step
        self._peers[id(request)] = (source, step)
        self._expect[id(request)] = (source, len(into), step)
        return request

    def isend(self, buf, dest: int) -> list:
        """Start sending *buf* (segmented), the next step; returns the
        requests, for wait(): an algorithm's messages posted together
        (a root's to every rank, say), each its own step."""
        self.step += 1
        return self._isend(buf, dest)

    def irecv(self, buf, source: int) -> list:
        """Start receiving into *buf* (segmented), the next step; returns
        the requests, as isend."""
        self.step += 1
        return self._irecv(buf, source)

    # Note [Posting in turns]
    # ~~~~~~~~~~~~~~~~~~~~~~~~
    # A root that receives from many ranks at once (gather) posts all
    # their segments before any arrives. MPI matches an arriving message
    # by walking its queue of posted receives from the front, so with
    # each source's segments posted in one run, a message of the last
    # source walks past every segment of the others: quadratic. A gather
    # of 4.5 MB a rank at p = 7 in 256-byte segments (the tests' size;
    # 105,000 receives at the root) did not finish in 200 s on MPICH. In
    # turns (segment k of every source before segment k + 1 of any) a
    # message walks about one entry a source: 4.5-5.3 s.

    def irecv_each(self, transfers: list) -> list:
        """Start receiving into each (buf, source) of *transfers*, one
        step each, as irecv; segment k of every buffer is posted before
        segment k + 1 of any (Note [Posting in turns]). Returns the
        requests, for wait()."""
        first = self.step + 1
        self.step += len(transfers)
        return [self._post_recv(transfers[i][0][lo:hi], transfers[i][1], first + i)
                for i, lo, hi in in_turns([self.segments(buf) for buf, _ in transfers])]

    def _isend(self, buf, dest: int) -> list:
        """isend within the current step."""
        return self._post(self.comm.Isend, buf, dest)

    def _irecv(self, buf, source: int) -> list:
        """irecv within the current step."""
        return [self._post_recv(buf[lo:hi], source) for lo, hi in self.segments(buf)]

    def wait(self, requests: list) -> None:
        """Complete *requests*, by the deadline if the call has one, and
        note what each receive brought (Note [Message lengths])."""
        if not requests:
            return
        expect = self._expect
        statuses = None
        if expect and any(id(r) in expect for r in requests):
            pool = self._statuses           # made once per Channel, reused by every wait
            while len(pool) < len(requests):
                pool.append(self._mpi.Status())
            statuses = pool[:len(requests)]
        cut = self._complete(requests, statuses)
        for i, r in enumerate(requests):
            self._peers.pop(id(r), None)
            if statuses is not None and id(r) in expect:
                source, nbytes, step = expect.pop(id(r))
                got = self._longer_count(statuses[i], nbytes) if i in cut \
                    else statuses[i].Get_count(self._byte)
                self.arrived(got, nbytes, source, step)

    # Note [Testing in windows]
    # ~~~~~~~~~~~~~~~~~~~~~~~~~
    # A wait by a deadline tests its requests, and MPI_Testall looks at
    # every one each time until all are done: a gather of 105,000 segments
    # (Note [Posting in turns]) took 17.0-19.6 s with a deadline against
    # 4.5 s without. Testing the first TEST_WINDOW requests until they are
    # done, then the next, looks at a few each time: 6.0-6.9 s (MPICH,
    # p = 7, two launches each). Every request still makes progress
    # meanwhile, as MPI moves all of them whichever are tested. At the
    # deadline all of them are given up (_expire), not the window's.

    def _expire(self, requests: list):
        """The deadline has passed: cancel the pending receives, break the
        communicator, raise CollectiveTimeout naming the first pending peer
        and its step."""
        pending = [r for r in requests if not r.Test()]
        peer, step = None, self.step
        if pending:
            peer, step = self._peers.get(id(pending[0]), (peer, step))
        for r in pending:
            if id(r) not in self._expect:   # Note [Pending sends]
                continue
            try:
                r.Cancel()
            except Exception:               # an MPI that refuses: the communicator is broken anyway
                pass
        self._peers.clear()
        self._expect.clear()
        error = CollectiveTimeout(self.comm.Get_rank(), peer, self.collective, self.algorithm,
                                  step, self.steps, time.monotonic() - self.start)
        self._base._break(error)
        logging.getLogger("pycoll").warning("%s; the communicator is broken", error)
        raise error

    # Note [Pending sends]
    # ~~~~~~~~~~~~~~~~~~~~
    # A call past its deadline cancels its pending receives only. MPI 4
    # deprecates cancelling a send, and MPICH 5 crashed (SIGSEGV) cancelling
    # the pending segments of a gather to a root that never came
    # (test_a_rank_timing_out_with_sends_pending). A send left pending
    # belongs to a broken communicator, which sends nothing again.

    # -- the vocabulary -------------------------------------------------
    # A transfer that fits in one segment is one blocking MPI call when the
    # call has no deadline: at small sizes the Python around the call is
    # most of the cost.

    def send(self, buf, dest: int) -> None:
        self.step += 1
        buf = self._stage.staged(buf)
        n = len(buf)
        if 0 < n <= self.segment and self.deadline is None and type(buf) is not Pieces:
            if self._c is not None:
                self._c.send(buf, dest, self.tag)
            else:
                self.comm.Send([buf, self._byte], dest, self.tag)
        else:
            self.wait(self._isend(buf, dest))
        self._stage.done()

    def recv(self, buf, source: int) -> None:
        self.step += 1
        n = len(buf)
        if 0 < n <= self.segment and self.deadline is None and type(buf) is not Pieces:
            if self._c is not None:
                got = self._c.recv(buf, source, self.tag)
            else:
                try:
                    self.comm.Recv([buf, self._byte], source, self.tag, self._status)
                    got = self._status.Get_count(self._byte)
                except self._mpi.Exception as exc:
                    got = self._longer(exc, self._status, n)
            self.arrived(got, n, source)
        else:
            self.wait(self._irecv(buf, source))

    def sendrecv(self, sendbuf, dest: int, recvbuf, source: int) -> None:
        """Send to *dest* while receiving from *source* (either may be None)."""
        self.step += 1
        if sendbuf is not None:
            sendbuf = self._stage.staged(sendbuf)
        ns = 0 if sendbuf is None else len(sendbuf)
        nr = 0 if recvbuf is None else len(recvbuf)
        if 0 < ns <= self.segment and 0 < nr <= self.segment and self.deadline is None \
                and type(sendbuf) is not Pieces and type(recvbuf) is not Pieces:
            self._sendrecv1(sendbuf, dest, recvbuf, source)
        else:
            requests = self._irecv(recvbuf, source) if nr else []
            if ns:
                requests += self._isend(sendbuf, dest)
            self.wait(requests)
        self._stage.done()

    def sendrecv_copying(self, sendbuf, dest: int, recvbuf, source: int, copy) -> None:
        """sendrecv, and copy *sendbuf* into *copy* (a view of the same
        length, or None) while the messages are in flight: an allgather's
        first step, which sends this rank's block from the input as it is
        put in place. Sending the input rather than the freshly written
        copy also spares it MPICH's single-copy path at its slowest: a
        2 MiB block read from pages just written took 1.2 ms instead of
        0.2 ms in some launches here (native MPI_Allgather included).
        Below COPY_OVERLAP bytes the copy comes first and the exchange is
        one C call; above, without a deadline, the whole step is one C
        call where both messages fit in a segment."""
        if copy is None:
            self.sendrecv(sendbuf, dest, recvbuf, source)
            return
        if len(sendbuf) < COPY_OVERLAP:
            copy[:] = sendbuf
            self.sendrecv(sendbuf, dest, recvbuf, source)
            return
        self.step += 1
        if self._c is not None and self.deadline is None and 0 < len(recvbuf) \
                and len(sendbuf) <= self.segment and len(recvbuf) <= self.segment \
                and type(sendbuf) is not Pieces and type(recvbuf) is not Pieces:
            self.arrived(self._c.sendrecv_copy(sendbuf, dest, recvbuf, source, self.tag, copy),
                         len(recvbuf), source)
            return
        requests = self._irecv(recvbuf, source) if len(recvbuf) else []
        requests += self._isend(sendbuf, dest)
        copy[:] = sendbuf
        self.wait(requests)

    def _sendrecv1(self, sendbuf, dest: int, recvbuf, source: int) -> None:
        """One message each way (both fit in a segment; no deadline)."""
        if self._c is not None:
            got = self._c.sendrecv(sendbuf, dest, recvbuf, source, self.tag)
        else:
            byte, tag = self._byte, self.tag
            try:
                self.comm.Sendrecv([sendbuf, byte], dest, tag, [recvbuf, byte], source, tag,
                                   self._status)
                got = self._status.Get_count(byte)
            except self._mpi.Exception as exc:
                got = self._longer(exc, self._status, len(recvbuf))
        self.arrived(got, len(recvbuf), source)

    def sync(self, dest: int, source: int) -> None:
        """A zero-byte message to *dest* and one from *source* (barriers)."""
        self.step += 1
        byte, tag, comm = self._byte, self.tag, self.comm
        empty = self.scratch("sync", 0)
        requests = [comm.Irecv([empty, byte], source, tag), comm.Isend([empty, byte], dest, tag)]
        self._peers[id(requests[0])] = (source, self.step)
        self._peers[id(requests[1])] = (dest, self.step)
        self.wait(requests)

    def recv_reduce(self, acc, source: int, received_left: bool, out=None, keep=None) -> None:
        """out = received op acc (or acc op received), segment by segment.

        *out* defaults to *acc*. *keep*, if given, receives the incoming
        bytes (they stay there); otherwise they land in *out* itself where
        it is apart from *acc* (Note [Reduce in place]), else in scratch.
        """
        self.recv_reduce_send(acc, source, None, received_left, out=out, keep=keep)

    def recv_reduce_send(self, acc, source: int, dest, received_left: bool,
                         out=None, keep=None) -> None:
        """Receive from *source*, reduce each segment with *acc* into *out*
        and, if *dest* is not None, send that reduced segment on to *dest*
        (a chain: the reduction of segment k overlaps the transfer of k+1)."""
        out = acc if out is None else out
        n = len(acc)
        if n == 0:
            return
        if keep is None and lands_in(out, acc):
            keep = out
        step = self.segment
        layout = acc if type(acc) is Pieces else out
        if n <= step and dest is None and type(layout) is not Pieces:
            received = keep if keep is not None else self.scratch("recv", n)
            self.recv(received, source)
            if received_left:
                self.reduce(out, received, acc)
            else:
                self.reduce(out, acc, received)
            return
        self.step += 1
        segs = self.segments(layout)
        if keep is None:
            # No segment is longer than the transfer: a chain (dest given)
            # of a small vector needs no segment-sized slots.
            slot = min(step, n)
            pair = self.scratch("recv", 2 * slot)
            slots = (pair[:slot], pair[slot:])
        byte, tag, comm, reduce = self._byte, self.tag, self.comm, self.reduce
        pending: list = [None, None]
        sends = []

        def post(k):
            lo, hi = segs[k]
            into = keep[lo:hi] if keep is not None else slots[k % 2][:hi - lo]
            pending[k % 2] = (self._post_recv(into, source), into)

        post(0)
        if len(segs) > 1:
            post(1)
        for k, (lo, hi) in enumerate(segs):
            request, received = pending[k % 2]
            self.wait([request])
            if received_left:
                reduce(out[lo:hi], received, acc[lo:hi])
            else:
                reduce(out[lo:hi], acc[lo:hi], received)
            if k + 2 < len(segs):
                post(k + 2)              # the slot of segment k is free again
            if dest is not None:
                request = comm.Isend([out[lo:hi], byte], dest, tag)
                self._peers[id(request)] = (dest, self.step)
                sends.append(request)
        self.wait(sends)

    def sendrecv_reduce(self, sendbuf, dest: int, acc, source: int, received_left: bool,
                        out=None) -> None:
        """Send *sendbuf* to *dest* while receiving from *source* and reducing
        with *acc* into *out* (default *acc*): one step of a ring reduce-scatter."""
        sendbuf = self._stage.staged(sendbuf)
        n = len(acc)
        if 0 < n <= self.segment and 0 < len(sendbuf) <= self.segment and self.deadline is None \
                and type(acc) is not Pieces and type(sendbuf) is not Pieces:
            self.step += 1
            out = acc if out is None else out
            received = out if lands_in(out, acc, sendbuf) else self.scratch("recv", n)
            self._sendrecv1(sendbuf, dest, received, source)
            self._stage.done()              # the way is timed on the messages alone
            if received_left:
                self.reduce(out, received, acc)
            else:
                self.reduce(out, acc, received)
            return
        sends = self._isend(sendbuf, dest)
        out = acc if out is None else out
        keep = out if lands_in(out, acc, sendbuf) else None
        self.recv_reduce(acc, source, received_left, out=out, keep=keep)
        self.wait(sends)
        self._stage.done()

    def recv_copy_send(self, buf, source: int, dest) -> None:
        """Receive *buf* from *source*, forwarding each segment to *dest* as
        soon as it has arrived (a pipelined chain)."""
        self.step += 1
        recvs = self._irecv(buf, source)
        sends = []
        for request, (lo, hi) in zip(recvs, self.segments(buf)):
            self.wait([request])
            if dest is not None:
                sends += self._post(self.comm.Isend, buf[lo:hi], dest)
        self.wait(sends)
