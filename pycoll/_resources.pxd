# What a communicator's calls share in C (pycoll/_resources.pyx), for the
# lanes that cimport it: the tag counter and scratch buffers
# (CallResources), the way a send worth staging goes (Stage, Ways,
# StagedSends; Note [Staging sends], Note [Choosing the way]), and a lane
# call's hold on its caller's buffers (Operands).

from cpython.pythread cimport PyThread_get_thread_ident

cdef enum:
    MAX_STEPS = 128             # the most steps a lane runs (a schedule's, or a ring's p - 1)

# The scratch slots the lanes take from C (CallResources.borrow).
cdef enum:
    SLOT_LANE = 0               # what arrives before it is reduced in place
    SLOT_OUTPUT = 1             # a reduce_scatter's partial sums
    SLOT_WORK = 2               # a StepLane's work buffer; a widened ReduceScatterLane's
                                # float32 x and result (Note [Widened lanes] in _lane_reduce.pyx)
    SLOT_STAGE = 3              # a send's copy on huge pages (Note [Staging sends])
    C_SLOTS = 4

# The ways a send worth staging may go (Note [Choosing the way]).
cdef enum:
    WAY_AS_IS = 0               # from the caller's buffer
    WAY_COPY = 1                # from a memcpy into the stage
    WAY_STREAM = 2              # from a copy with non-temporal stores
    NWAYS = 3
    WAY_AUTO = -1               # the mode: each lane times the ways and keeps the fastest
    TRIAL_CALLS = 2             # calls in a row that try one way (the first is not counted)
    SETTLE_CALLS = TRIAL_CALLS * NWAYS  # a lane's first calls: each way tried once
    EXPLORE_EVERY = 32          # then from every 32nd call, one of the three tried, in turn
    FULL_ROUND_EVERY = 4        # a way far behind tried only in every 4th round of trials


cdef struct Ways:
    double mean[NWAYS]          # each way's mean call time (s); 0: not timed yet
    long calls
    int last                    # 1 + the way of the call before; 0: none yet


cdef struct Stage:
    char *ptr                   # the stage; NULL: every send goes as it is
    bint stream                 # fill it with non-temporal stores
    int way                     # the way this call takes; -1: nothing to time
    double started


cdef struct Operands:
    # A lane's two caller buffers, held for one call (take_operands).
    Py_buffer x
    Py_buffer out
    char *xp                    # NULL when x is not held
    char *outp                  # NULL when out is not held
    bint have_x
    bint have_out


cdef class StagedSends:
    cdef Ways ways[2]           # [0]: out of place; [1]: in place (Note [Choosing the way])
    cdef Ways *ways_for(self, Operands *o) noexcept


cdef class CallResources:
    cdef int tag, tag_ub
    cdef dict buffers, views
    cdef list held              # the C slots' buffers, or None
    cdef char *ptr[C_SLOTS]
    cdef Py_ssize_t room[C_SLOTS]

    cpdef int next_tag(self)
    cdef object grow(self, str slot, Py_ssize_t nbytes)
    cdef object borrow(self, int slot, Py_ssize_t nbytes, char **data)
    cdef object stage(self, Ways *ways, Py_ssize_t largest, Stage *st)


cdef const char *staged(const char *buf, Py_ssize_t n, Stage *st) noexcept nogil
cdef void settle(Ways *w, Stage *st, int rc) noexcept nogil

cdef object lane_output(out, shape, dtype)
cdef int take_operands(Operands *o, x, bint with_x, Py_ssize_t xbytes, data,
                       Py_ssize_t align, Py_ssize_t same_at) except -1
cdef void release_operands(Operands *o) noexcept


cdef inline bint in_turn(object comm) except -1:
    """Whether a call may run now (Note [Issue order] in _async.py): no
    call is queued or running on the communicator, or this thread is the
    one running its queued calls, this call among them (Note [Async
    lanes] in api.py)."""
    progress = comm._progress
    return not progress._pending or progress._runner == PyThread_get_thread_ident()
