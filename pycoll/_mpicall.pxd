# The C calls into MPI (pycoll/_mpicall.pyx), for the lanes that cimport
# them: a Transport's handle and status area; one message or a pair of
# them, by a deadline or not (Note [Lane deadlines]); the error a lane call
# raises (check_lane). The MPI functions themselves stay private to
# _mpicall: every call goes through these.

from libc.stdint cimport intptr_t
from libc.string cimport memcpy
from posix.time cimport CLOCK_MONOTONIC, clock_gettime, timespec

ctypedef intptr_t handle_t

cdef enum:
    TIMED_OUT = -1          # not MPI error codes (those are >= 0)
    TRUNCATED = -2          # a receive's message was longer than its buffer


cdef struct Arrival:
    # A lane call's first receive that brought another length than it
    # expected (Note [Message lengths] in pycoll/_p2p.py); step 0: none yet.
    # got: -1 for longer by an unknown length.
    int step
    int peer
    int got
    int expected


cdef class Transport:
    cdef handle_t comm
    cdef char status[64]    # larger than either library's MPI_Status


cdef int exchange(const char *sbuf, int sn, int dest, char *rbuf, int rn, int source, int tag,
                  handle_t comm, void *status, double deadline, int *stuck) noexcept nogil
cdef int exchange_copying(const char *sbuf, int sn, int dest, char *rbuf, int rn, int source,
                          int tag, handle_t comm, void *status, char *copy, const char *original,
                          double deadline, int *stuck) noexcept nogil
cdef int send_copying(const char *sbuf, int sn, int dest, int tag, handle_t comm, void *status,
                      char *copy, const char *original, Py_ssize_t n, double deadline,
                      int *stuck) noexcept nogil
cdef int send_by(const char *buf, int n, int dest, int tag, handle_t comm, void *status,
                 double deadline, int *stuck) noexcept nogil
cdef int recv_by(char *buf, int n, int source, int tag, handle_t comm, void *status,
                 double deadline, int *stuck) noexcept nogil
cdef int received_bytes(void *status, int *count) noexcept nogil
cdef int longer_than(void *status, int expected) noexcept nogil
cdef int arrival_failed(Arrival *a, base, collective, algorithm, int steps) except -1

cdef int lane_failed(int rc, str what, base, int peer, collective, algorithm, int step,
                     int steps, double started) except -1
cdef double lane_deadline(comm, timeout) except? -1.0


cdef inline double monotonic() noexcept nogil:
    """CLOCK_MONOTONIC in seconds, the clock of Python's time.monotonic on Linux."""
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return <double>ts.tv_sec + <double>ts.tv_nsec * 1e-9


cdef inline int check_lane(int rc, str what, base, int peer, collective, algorithm, int step,
                           int steps, double started, Arrival *arrival) except -1:
    """Raise unless a lane call's *rc* is 0: *what* names the call in a
    TransportError; *base*, *peer*, *collective*, *algorithm*, *step* of
    *steps* and the call's *started* time in a CollectiveTimeout (Note
    [Lane deadlines]). Then, unless *arrival* is NULL, raise MismatchError
    if a receive of the call brought another length than it expected (Note
    [Message lengths] in pycoll/_p2p.py)."""
    if rc != 0:
        lane_failed(rc, what, base, peer, collective, algorithm, step, steps, started)
    if arrival != NULL and arrival.step != 0:
        arrival_failed(arrival, base, collective, algorithm, steps)
    return 0


cdef inline int arrived(Arrival *a, int rc, void *status, int expected, int peer,
                        int step) noexcept nogil:
    """A receive of *expected* bytes from *peer*, at *step*, has ended with
    *rc* (exchange's) and *status*: keep it in *a* if it is the call's
    first of another length, a TRUNCATED one included, which goes on as
    done. The rc the step goes on with."""
    cdef int got = expected
    if rc == TRUNCATED:
        rc, got = 0, longer_than(status, expected)
    elif rc != 0 or received_bytes(status, &got) != 0:
        return rc
    if a.step == 0 and got != expected:
        a.step, a.peer, a.got, a.expected = step, peer, got, expected
    return rc


cdef inline void copy_apart(char *dst, const char *src, Py_ssize_t n) noexcept nogil:
    """memcpy, but for a span onto itself (x in its own block of out)."""
    if dst != src:
        memcpy(dst, src, n)

