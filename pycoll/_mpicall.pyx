# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
# cython: embedsignature=True
"""Point-to-point MPI calls from C, with no mpi.h at build time.

At small sizes the Python around an MPI call is most of its cost: mpi4py's
``Sendrecv`` spends about 0.6 us parsing its arguments, as long as the
message itself takes with Open MPI. This module calls ``MPI_Send``,
``MPI_Recv`` and ``MPI_Sendrecv`` directly, ``MPI_Isend``,
``MPI_Irecv`` and ``MPI_Wait`` for a sendrecv that copies meanwhile,
``MPI_Test`` and ``MPI_Cancel`` for a lane call with a deadline (Note [Lane
deadlines]), ``MPI_Get_count`` for the length of what a receive brought,
and ``MPI_Error_class`` to tell a message longer than its receive (Note
[Message lengths] in pycoll/_p2p.py) from other errors.

pycoll is not built against any one MPI: mpi4py chooses MPICH or Open MPI at
run time, and so must pycoll. So the functions are looked up by name in the
library mpi4py has already loaded (``ctypes`` reopens it by soname with
RTLD_NOLOAD), and called with handles taken from mpi4py objects:

- An MPI handle is an ``int`` in MPICH and its derivatives and a pointer in
  Open MPI. Both are passed as ``intptr_t``: the LP64 calling conventions
  (x86-64 System V, AArch64) pass either in a full register, and a callee
  that declares ``int`` reads the low 32 bits.
- ``MPI_STATUS_IGNORE`` differs between the libraries, so statuses are
  written into a 64-byte scratch area, larger than either ``MPI_Status``.

``Transport(comm)`` checks all of this before it is used: the rank
``MPI_Comm_rank`` reports, the size of ``MPI_BYTE``, and one byte sent to
itself must agree with mpi4py, or construction raises and pycoll keeps
mpi4py's calls (Channel, pycoll/_p2p.py). ``PYCOLL_TRANSPORT=mpi4py``
forces the latter.

The lanes, which run a repeated call's messages and kernels in C, cimport
what _mpicall.pxd declares: ``exchange`` (a send, a receive or both, by a
deadline or not), ``exchange_copying``, ``send_by``, ``recv_by`` and
``received_bytes``; ``arrived`` (inline in the .pxd) for the length a
receive brought; ``lane_deadline`` for a call with a timeout, and
``check_lane`` (inline too) for the error a call ends with. They
are pycoll/_lane_reduce.pyx (allreduce, reduce, scan, reduce_scatter) and
pycoll/_lane_move.pyx (broadcast, gather, scatter, allgather, alltoall,
barrier); what they share of a communicator (tags, scratch, the stage of a
send) is pycoll/_resources.pyx.
"""

from libc.stdint cimport intptr_t, uintptr_t
from posix.time cimport nanosleep, timespec
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE, PyBUF_WRITABLE

import logging

from pycoll.errors import CollectiveTimeout, MismatchError

ctypedef int (*send_fn)(const void *buf, int count, handle_t dtype, int dest, int tag,
                        handle_t comm) noexcept nogil
ctypedef int (*recv_fn)(void *buf, int count, handle_t dtype, int source, int tag,
                        handle_t comm, void *status) noexcept nogil
ctypedef int (*sendrecv_fn)(const void *sbuf, int scount, handle_t stype, int dest, int stag,
                            void *rbuf, int rcount, handle_t rtype, int source, int rtag,
                            handle_t comm, void *status) noexcept nogil
# Nonblocking calls write an MPI_Request (an int in MPICH, a pointer in Open
# MPI) through *request*: pycoll passes an intptr_t that starts at 0, which
# holds either (little-endian, as LP64 x86-64 and AArch64 Linux are).
ctypedef int (*isend_fn)(const void *buf, int count, handle_t dtype, int dest, int tag,
                         handle_t comm, void *request) noexcept nogil
ctypedef int (*irecv_fn)(void *buf, int count, handle_t dtype, int source, int tag,
                         handle_t comm, void *request) noexcept nogil
ctypedef int (*wait_fn)(void *request, void *status) noexcept nogil
ctypedef int (*test_fn)(void *request, int *flag, void *status) noexcept nogil
ctypedef int (*cancel_fn)(void *request) noexcept nogil
ctypedef int (*comm_rank_fn)(handle_t comm, int *rank) noexcept nogil
ctypedef int (*type_size_fn)(handle_t dtype, int *size) noexcept nogil
ctypedef int (*get_count_fn)(const void *status, handle_t dtype, int *count) noexcept nogil
ctypedef int (*error_class_fn)(int code, int *error_class) noexcept nogil

cdef send_fn c_send = NULL
cdef recv_fn c_recv = NULL
cdef sendrecv_fn c_sendrecv = NULL
cdef isend_fn c_isend = NULL
cdef irecv_fn c_irecv = NULL
cdef wait_fn c_wait = NULL
cdef test_fn c_test = NULL
cdef cancel_fn c_cancel = NULL
cdef comm_rank_fn c_comm_rank = NULL
cdef type_size_fn c_type_size = NULL
cdef get_count_fn c_get_count = NULL
cdef error_class_fn c_error_class = NULL
cdef handle_t BYTE = 0
cdef int ERR_TRUNCATE = -1              # the library's MPI_ERR_TRUNCATE (a class)
cdef bint LOADED = False

class TransportError(RuntimeError):
    """The C calls cannot be used with this MPI library (Transport), or an
    MPI call from C returned an error (check, check_lane)."""


def _handle(obj) -> int:
    """An mpi4py object's handle as a signed intptr_t value (mpi4py reports
    an MPICH int handle sign-extended and read as unsigned)."""
    h = obj.handle
    return h - (1 << 64) if h >= (1 << 63) else h


def LOADED_FLAG() -> bool:
    """Whether load() has run."""
    return LOADED


def load(functions: dict, byte_handle, int truncate_class) -> None:
    """Install the addresses of the MPI functions (name -> address), the
    handle of MPI_BYTE and the value of MPI_ERR_TRUNCATE."""
    global c_send, c_recv, c_sendrecv, c_isend, c_irecv, c_wait, c_comm_rank, c_type_size
    global c_get_count, c_test, c_cancel, c_error_class
    global BYTE, ERR_TRUNCATE, LOADED
    c_send = <send_fn><uintptr_t>functions["MPI_Send"]
    c_recv = <recv_fn><uintptr_t>functions["MPI_Recv"]
    c_sendrecv = <sendrecv_fn><uintptr_t>functions["MPI_Sendrecv"]
    c_isend = <isend_fn><uintptr_t>functions["MPI_Isend"]
    c_irecv = <irecv_fn><uintptr_t>functions["MPI_Irecv"]
    c_wait = <wait_fn><uintptr_t>functions["MPI_Wait"]
    c_test = <test_fn><uintptr_t>functions["MPI_Test"]
    c_cancel = <cancel_fn><uintptr_t>functions["MPI_Cancel"]
    c_comm_rank = <comm_rank_fn><uintptr_t>functions["MPI_Comm_rank"]
    c_type_size = <type_size_fn><uintptr_t>functions["MPI_Type_size"]
    c_get_count = <get_count_fn><uintptr_t>functions["MPI_Get_count"]
    c_error_class = <error_class_fn><uintptr_t>functions["MPI_Error_class"]
    BYTE = byte_handle
    ERR_TRUNCATE = truncate_class
    LOADED = True


cdef int check(int rc, str what) except -1:
    if rc != 0:
        raise TransportError(f"{what} returned MPI error {rc} ({error_string(rc)})")
    return 0


def error_string(int rc) -> str:
    """MPI's own words for error code *rc* (its first line), through mpi4py,
    which the transport has loaded already."""
    try:
        from mpi4py import MPI
        text = MPI.Get_error_string(rc).strip()
    except Exception:                   # (an error inside MPI's error reporting)
        return "no description from MPI"
    first = text.splitlines()[0].split(", error stack")[0].rstrip(",:; ") if text else ""
    return first or "no description from MPI"


cdef class Transport:
    """Blocking sends and receives of byte buffers on one communicator
    (its handle and status area are declared in _mpicall.pxd)."""

    def __cinit__(self, comm):
        if not LOADED:
            raise TransportError("the MPI functions are not loaded")
        self.comm = _handle(comm)
        cdef int rank = -1, size = -1
        check(c_comm_rank(self.comm, &rank), "MPI_Comm_rank")
        if rank != comm.Get_rank():
            raise TransportError(f"MPI_Comm_rank says {rank}, mpi4py says {comm.Get_rank()}")
        check(c_type_size(BYTE, &size), "MPI_Type_size")
        if size != 1:
            raise TransportError(f"MPI_BYTE has size {size}")
        cdef char out = 42
        cdef char back[2]
        cdef int count = -1
        back[0] = 0
        check(c_sendrecv(&out, 1, BYTE, rank, 0, back, 2, BYTE, rank, 0, self.comm,
                         self.status), "MPI_Sendrecv")
        if back[0] != 42:
            raise TransportError("a byte sent to this rank came back changed")
        check(c_get_count(self.status, BYTE, &count), "MPI_Get_count")
        if count != 1:
            raise TransportError(f"MPI_Get_count says {count} bytes arrived, not 1")

    def send(self, buf, int dest, int tag):
        cdef Py_buffer b
        cdef int rc
        PyObject_GetBuffer(buf, &b, PyBUF_SIMPLE)
        try:
            with nogil:
                rc = c_send(b.buf, <int>b.len, BYTE, dest, tag, self.comm)
        finally:
            PyBuffer_Release(&b)
        check(rc, "MPI_Send")

    def recv(self, buf, int source, int tag) -> int:
        """Receive into *buf*; the bytes that arrived, -1 for a message
        longer than *buf* by an unknown length (arrived_bytes)."""
        cdef Py_buffer b
        cdef int rc
        PyObject_GetBuffer(buf, &b, PyBUF_SIMPLE | PyBUF_WRITABLE)
        try:
            with nogil:
                rc = c_recv(b.buf, <int>b.len, BYTE, source, tag, self.comm, self.status)
        finally:
            PyBuffer_Release(&b)
        return arrived_bytes(truncated(rc), self.status, <int>b.len, "MPI_Recv")

    def sendrecv(self, sendbuf, int dest, recvbuf, int source, int tag) -> int:
        """Send *sendbuf* while receiving into *recvbuf*; the bytes that
        arrived, as recv's."""
        cdef Py_buffer s, r
        cdef int rc, n = 0
        PyObject_GetBuffer(sendbuf, &s, PyBUF_SIMPLE)
        try:
            PyObject_GetBuffer(recvbuf, &r, PyBUF_SIMPLE | PyBUF_WRITABLE)
            try:
                n = <int>r.len
                with nogil:
                    rc = c_sendrecv(s.buf, <int>s.len, BYTE, dest, tag, r.buf, n, BYTE,
                                    source, tag, self.comm, self.status)
            finally:
                PyBuffer_Release(&r)
        finally:
            PyBuffer_Release(&s)
        return arrived_bytes(truncated(rc), self.status, n, "MPI_Sendrecv")

    def sendrecv_copy(self, sendbuf, int dest, recvbuf, int source, int tag, copy):
        """sendrecv, and memcpy *sendbuf* into *copy* (as long, apart from
        both) while the two messages are in flight: an allgather's first
        step in one C call (Channel.sendrecv_copying). The bytes that
        arrived, as recv's."""
        cdef Py_buffer s, r, c
        cdef int rc = 0, stuck, n = 0
        PyObject_GetBuffer(sendbuf, &s, PyBUF_SIMPLE)
        try:
            PyObject_GetBuffer(recvbuf, &r, PyBUF_SIMPLE | PyBUF_WRITABLE)
            try:
                PyObject_GetBuffer(copy, &c, PyBUF_SIMPLE | PyBUF_WRITABLE)
                try:
                    if c.len != s.len:
                        raise ValueError(f"copy has {c.len} bytes, sendbuf {s.len}")
                    n = <int>r.len
                    with nogil:
                        rc = exchange_copying(<const char *>s.buf, <int>s.len, dest, <char *>r.buf,
                                              n, source, tag, self.comm, self.status,
                                              <char *>c.buf, <const char *>s.buf, 0.0, &stuck)
                finally:
                    PyBuffer_Release(&c)
            finally:
                PyBuffer_Release(&r)
        finally:
            PyBuffer_Release(&s)
        return arrived_bytes(rc, self.status, n, "MPI_Isend/MPI_Irecv/MPI_Wait")


# Note [Lane deadlines]
# ~~~~~~~~~~~~~~~~~~~~~
# A call with timeout= (or PYCOLL_TIMEOUT) takes its lane too: frameworks
# pass a timeout on every call, and the general path costs 6-15 us of
# Python more at 8 B. The call then has a deadline, a time.monotonic()
# value (CLOCK_MONOTONIC, the clock Python's monotonic reads on Linux):
# each step posts MPI_Irecv and MPI_Isend and tests them, as
# Channel.wait (pycoll/_p2p.py) does, sleeping NAP between tests after
# SPIN of them. When the deadline passes, the pending receive is
# cancelled and the call raises CollectiveTimeout naming the peer and the
# step, after breaking the communicator: what the general path does. The
# messages and tags are the same either way, so a rank on the general
# path, or without a deadline, still meets it. A lane that hands its call
# to the general path part-way (a broadcast's or scatter's receiver
# meeting a header it did not expect, a scatter's out its data lane
# declines) hands the deadline on with it.

cdef enum:
    SPIN = 2000             # as pycoll/_p2p.py
    NAP_NS = 50000


cdef int transfer_by(const char *sbuf, int sn, int dest, char *rbuf, int rn, int source,
                     int tag, handle_t comm, void *status, double deadline,
                     int *stuck) noexcept nogil:
    """Send sn bytes of sbuf to dest, receive rn bytes from source into
    rbuf (either buffer NULL: that half is not done), by *deadline* (Note
    [Lane deadlines]): 0, TRUNCATED, an MPI error code, or TIMED_OUT with
    the receive cancelled if it was still pending and *stuck* the peer of
    the first pending message. *status* ends as the receive's; the send's
    goes to scratch."""
    cdef intptr_t requests[2]
    cdef int done[2]
    cdef char send_status[64]
    cdef int count = 0, i, rc, flag, pending, tries = 0, cut = 0
    cdef timespec nap
    nap.tv_sec, nap.tv_nsec = 0, NAP_NS
    requests[0] = requests[1] = 0
    done[0] = done[1] = 0
    if rbuf != NULL:
        rc = c_irecv(rbuf, rn, BYTE, source, tag, comm, &requests[0])
        if rc != 0:
            return rc
        count = 1
    if sbuf != NULL:
        rc = c_isend(sbuf, sn, BYTE, dest, tag, comm, &requests[count])
        if rc != 0:
            return rc
        count += 1
    while True:
        pending = 0
        for i in range(count):
            if not done[i]:
                flag = 0
                if i == 0 and rbuf != NULL:
                    rc = truncated(c_test(&requests[i], &flag, status))
                    if rc == TRUNCATED:     # complete, too long: the send goes on
                        rc, flag, cut = 0, 1, 1
                else:
                    rc = c_test(&requests[i], &flag, send_status)
                if rc != 0:
                    return rc
                done[i] = flag
                pending += not flag
        if pending == 0:
            return TRUNCATED if cut else 0
        if monotonic() > deadline:
            if rbuf != NULL and not done[0]:
                stuck[0] = source
                c_cancel(&requests[0])      # the communicator is broken from here on
            else:
                stuck[0] = dest
            return TIMED_OUT
        tries += 1
        if tries > SPIN:
            nanosleep(&nap, NULL)


cdef int exchange(const char *sbuf, int sn, int dest, char *rbuf, int rn, int source, int tag,
                  handle_t comm, void *status, double deadline, int *stuck) noexcept nogil:
    """Send sn bytes of sbuf to dest and receive rn bytes from source into
    rbuf, either buffer NULL for a step that only receives or only sends:
    one MPI_Send, MPI_Recv or MPI_Sendrecv, or by *deadline* when it is
    not 0 (transfer_by). 0, TRUNCATED (the receive's message was longer
    than rn; the send is done), an MPI error code, or TIMED_OUT; *status*
    is then the receive's (arrived in _mpicall.pxd reads its length)."""
    if deadline > 0.0:
        return transfer_by(sbuf, sn, dest, rbuf, rn, source, tag, comm, status, deadline, stuck)
    if rbuf == NULL:
        return c_send(sbuf, sn, BYTE, dest, tag, comm)
    if sbuf == NULL:
        return truncated(c_recv(rbuf, rn, BYTE, source, tag, comm, status))
    return truncated(c_sendrecv(sbuf, sn, BYTE, dest, tag, rbuf, rn, BYTE, source, tag, comm,
                                status))


cdef int exchange_copying(const char *sbuf, int sn, int dest, char *rbuf, int rn, int source,
                          int tag, handle_t comm, void *status, char *copy, const char *original,
                          double deadline, int *stuck) noexcept nogil:
    """exchange() of both halves, and copy sn bytes of *original* (what
    sbuf holds, or sbuf itself) into *copy* while the two messages are in
    flight: MPI_Irecv, MPI_Isend, the copy, MPI_Wait on both. By a
    *deadline* the copy comes first, then transfer_by. *status* is then
    the receive's."""
    cdef intptr_t rreq = 0, sreq = 0
    cdef int rc, rc2
    if deadline > 0.0:
        copy_apart(copy, original, sn)
        return transfer_by(sbuf, sn, dest, rbuf, rn, source, tag, comm, status, deadline, stuck)
    rc = c_irecv(rbuf, rn, BYTE, source, tag, comm, &rreq)
    if rc != 0:
        return rc
    rc = c_isend(sbuf, sn, BYTE, dest, tag, comm, &sreq)
    copy_apart(copy, original, sn)
    if rc == 0:
        rc = c_wait(&sreq, status)
    rc2 = truncated(c_wait(&rreq, status))
    return rc if rc != 0 else rc2


cdef int send_copying(const char *sbuf, int sn, int dest, int tag, handle_t comm, void *status,
                      char *copy, const char *original, Py_ssize_t n, double deadline,
                      int *stuck) noexcept nogil:
    """send_by() of sbuf, and copy n bytes of *original* into *copy* while
    the message is in flight: MPI_Isend, the copy, MPI_Wait (a scatter's
    own block, Note [Own block in flight] in pycoll/_lanes.py). By a
    *deadline* the copy comes first, then send_by."""
    cdef intptr_t sreq = 0
    cdef int rc
    if deadline > 0.0:
        copy_apart(copy, original, n)
        return send_by(sbuf, sn, dest, tag, comm, status, deadline, stuck)
    rc = c_isend(sbuf, sn, BYTE, dest, tag, comm, &sreq)
    copy_apart(copy, original, n)
    if rc == 0:
        rc = c_wait(&sreq, status)
    return rc


cdef int send_by(const char *buf, int n, int dest, int tag, handle_t comm, void *status,
                 double deadline, int *stuck) noexcept nogil:
    """One message to dest: MPI_Send, or by *deadline* when it is not 0."""
    return exchange(buf, n, dest, NULL, 0, 0, tag, comm, status, deadline, stuck)


cdef int recv_by(char *buf, int n, int source, int tag, handle_t comm, void *status,
                 double deadline, int *stuck) noexcept nogil:
    """One message from source into *status*: MPI_Recv, or by *deadline*
    when it is not 0."""
    return exchange(NULL, 0, 0, buf, n, source, tag, comm, status, deadline, stuck)


cdef int received_bytes(void *status, int *count) noexcept nogil:
    """The length of the message *status* describes (MPI_Get_count of
    MPI_BYTE)."""
    return c_get_count(status, BYTE, count)


cdef int truncated(int rc) noexcept nogil:
    """TRUNCATED for an MPI error code of class MPI_ERR_TRUNCATE (a message
    longer than its receive: Note [Message lengths] in pycoll/_p2p.py),
    else *rc*. Both libraries complete the receive, and MPI_Sendrecv its
    send, before they return it."""
    cdef int error_class = -1
    if rc > 0 and c_error_class(rc, &error_class) == 0 and error_class == ERR_TRUNCATE:
        return TRUNCATED
    return rc


cdef int longer_than(void *status, int expected) noexcept nogil:
    """The length of a message that was longer than its receive of
    *expected* bytes, as its *status* tells it (Open MPI does), or -1 for
    unknown (MPICH's status holds the receive's length)."""
    cdef int count = -1
    if received_bytes(status, &count) != 0 or count <= expected:
        return -1
    return count


cdef int arrived_bytes(int rc, void *status, int expected, str what) except? -2:
    """The bytes a receive of *expected* brought, which ended with *rc* and
    *status*: a TRUNCATED one's as longer_than's; other errors raise
    TransportError naming *what*."""
    cdef int count = -1
    if rc == TRUNCATED:
        return longer_than(status, expected)
    check(rc, what)
    check(received_bytes(status, &count), "MPI_Get_count")
    return count


cdef int arrival_failed(Arrival *a, base, collective, algorithm, int steps) except -1:
    """Raise the MismatchError of a lane call whose receive brought another
    length than it expected (check_lane; Note [Message lengths] in
    pycoll/_p2p.py)."""
    raise MismatchError.wrong_length(base.rank, a.peer, collective, algorithm, a.step, steps,
                                     a.got, a.expected)


cdef int lane_failed(int rc, str what, base, int peer, collective, algorithm, int step,
                     int steps, double started) except -1:
    """Raise for a lane call that ended with *rc*, not 0 (check_lane):
    TIMED_OUT raises the CollectiveTimeout naming *peer* and *step* of
    *steps*, after breaking the communicator *base* (as Channel._expire in
    pycoll/_p2p.py); TRUNCATED, where a lane does not note it (a header's
    room is the longest header), and an MPI error code raise
    TransportError (check)."""
    if rc == TRUNCATED:
        raise TransportError(f"{what} received a message longer than its receive "
                             "(MPI: message truncated)")
    if rc == TIMED_OUT:
        error = CollectiveTimeout(base.rank, peer, collective, algorithm, step, steps,
                                  monotonic() - started)
        base._break(error)
        logging.getLogger("pycoll").warning("%s; the communicator is broken", error)
        raise error
    return check(rc, what)


cdef object api_lane_deadline = None      # pycoll.api._lane_deadline, once imported


cdef double lane_deadline(comm, timeout) except? -1.0:
    """The deadline of a lane call (Note [Lane deadlines]): 0 when neither
    timeout= nor PYCOLL_TIMEOUT sets one, without a Python call; else
    pycoll.api._lane_deadline's, which checks the timeout first (a bad one
    raises before any message)."""
    global api_lane_deadline
    if timeout is None and comm.settings.timeout is None:
        return 0.0
    if api_lane_deadline is None:
        from pycoll.api import _lane_deadline   # pycoll.api imports the lanes
        api_lane_deadline = _lane_deadline
    return api_lane_deadline(comm, timeout)


