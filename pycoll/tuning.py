"""Algorithm selection for algorithm="auto": an alpha-beta-gamma cost model.

Every algorithm module states its cost terms: ``steps(p)`` rounds on the
critical path, ``bytes_on_wire(n, p)`` bytes the busiest rank sends and
``reduce_bytes(n, p)`` bytes it pushes through the reduction kernel. Its
modelled time is

    T(n, p) = steps(p) * alpha + bytes_on_wire(n, p) * beta + reduce_bytes(n, p) * gamma

(a pipelined chain's terms count its segments: Note [Pipelined chains])

with (alpha, beta) per algorithm and per size regime (REGIMES):
implementations differ in what a step costs and in how they use the memory
system, and so does one algorithm at different sizes. Up to TINY the
time is mostly latency: MPI's eager messages, and for the algorithms with a
C lane one C call per step ("tiny"; fitted together with the larger sizes,
a line put 5-30% errors at 8 B and 16 KiB and swapped the order of
algorithms 5% apart). Up to SPLIT (1 MiB, a core's L2 cache here) a
vector reduces in cache ("small"); above it, from the last-level cache
("large");
above HUGE the buffers (input, output, received) of the ranks sharing a
node outgrow its last-level cache and every byte comes from memory
("huge": recursive doubling, which moves and reduces the whole vector,
costs nearly twice as much per byte there as at 4 MiB). One pair for all of
that mispredicts. gamma is the reduction kernel's time per byte, measured,
not fitted: for float32, times the dtype's ``kernel_cost`` (a bfloat16 byte
costs about 1.2-1.3 float32 bytes here, a float16 byte 1.4-1.6; in some
phases of this shared host, lasting whole launches, 1.5-1.8 and 2.3-3.0,
and a calibration made then keeps those). At p = 2 the
bytes sent and the bytes reduced are proportional, so a fit could not tell
beta from gamma; the kernel benchmark can.

Note [Reduction segments]: a reduction's transfers are cut into segments of
``reduce_segment`` bytes, and each segment is received and reduced in turn.
Segments were meant to overlap the reduction of one piece with the arrival
of the next, but on this machine both MPI libraries move a large message
with a single copy that the receiver makes inside its MPI calls, so nothing
arrives while it reduces: segmenting only adds one rendezvous and one
Python step per piece. With float32 at p = 2, whole messages beat 1 MiB
segments by 5-25% from 2 MiB to 64 MiB, on both libraries, for the ring,
recursive doubling and Rabenseifner alike. An MPI
whose transfers progress on their own (a NIC, a progress thread) would
show the opposite, so the size is calibrated: ``python -m pycoll.tune``
times the reductions with each of REDUCE_SEGMENTS and keeps the fastest,
the smallest among those within SEGMENT_TIE of it (a segment is also the
scratch a reduction in place holds), before it fits anything else.

``python -m pycoll.tune`` times the kernel per dtype and every algorithm at
a range of sizes on this machine, fits each (alpha, beta) (non-negative
least squares on relative error) and caches the result per (machine, MPI
library, p). Without a calibration the defaults below apply: the fit made on
this project's machine (2 cores, MPICH 5.0.2, p = 2).

"auto" runs the algorithm with the smallest modelled time.

Note [Same choice everywhere]: the choice depends only on what every rank
of the call shares (collective, message size, process count) and on the
settings agreed when the Communicator was created (rank 0's calibration and
PYCOLL_* variables, broadcast once), so every rank picks the same algorithm
and segment size. ``PYCOLL_ALGORITHM_<COLLECTIVE>=name`` overrides the
model, ``PYCOLL_SEGMENT_BYTES`` the segment size. Under autotune (Note
[Tuning online] in _trials.py) "auto" may leave the model's pick for a
candidate the ranks have timed faster: the times are agreed by an
allreduce, so the choice is still the same everywhere.
"""
from __future__ import annotations

import json
import logging
import math
import os
import socket
from pathlib import Path
from typing import Any

from pycoll.algorithms import ALGORITHMS, REGISTRY

log = logging.getLogger(__name__)

# Segment sizes (bytes): a reduction cuts its transfers into calibrated
# pieces (Note [Reduction segments]); a pipelined chain cuts for overlap;
# anything else moves each transfer as one message (as native MPI does),
# capped so that a count stays an int.
REDUCE_SEGMENTS = (1 << 20, 4 << 20, 16 << 20, 64 << 20)
REDUCE_SEGMENT = 4 << 20                # without a calibration (MPICH, p = 2 here)
SEGMENT_TIE = 0.03
# What a calibration made before reduce_segment was measured with.
LEGACY_REDUCE_SEGMENT = 1 << 20
# Up to this many bytes the "small" regime (a core's L2 cache here).
SPLIT = 1 << 20
# Up to this many bytes the "tiny" regime: MPICH and Open MPI send eagerly.
TINY = 16 << 10
# Above this many bytes of vector (block, for block collectives) the
# "huge" regime: the ranks of a node share its last-level cache, and two
# ranks' input, output and received buffers (6 x 4 MiB) fit this
# machine's 32 MiB L3 but not at 8 MiB. Both calibrations at p = 2 show the
# step there: recursive doubling allreduce 109 -> 187 us/MiB from 4 to
# 8 MiB on MPICH, 80 -> 224 on Open MPI.
HUGE = 4 << 20
REGIMES = ("tiny", "small", "large", "huge")
MIN_PIPELINE_SEGMENT, MAX_PIPELINE_SEGMENT = 64 << 10, 4 << 20
WHOLE = 1 << 30
PIPELINED = {("broadcast", "pipeline"), ("scan", "linear")}

# Online tuning (Note [Tuning online] in _trials.py): the algorithms tried
# are those modelled within TUNE_MARGIN of the best (the mispicks of
# 3303f73's p = 2 report were modelled 1.0-1.37x the pick), TUNE_MAX of
# them, for inputs of TUNE_MIN_BYTES and more: below, the model picked
# the fastest algorithm in that report, and the tuner's own cost (0.5-0.8
# us a call at p = 2) is 6% of a 64 KiB call.
TUNE_MARGIN, TUNE_MAX, TUNE_MIN_BYTES = 0.5, 3, 1 << 20

# Fusion (pycoll/fusion/manager.py), beside the algorithms' own terms. PACK_BETA: seconds per byte of one
# copy into or out of a bucket buffer of more than HUGE bytes (packing and
# unpacking ResNet-50's 161 gradients, 97.5 MiB, took 14 ms here);
# PACK_BETA_CACHED: of a smaller one, whose arrays and buffer stay in the
# caches (Note [Copies in the caches]). PIECE_ALPHA: seconds per
# array of a bucket reduced unpacked (each array boundary cuts messages in
# both passes; 161 views of one buffer took 3.5 ms more than the buffer).
PACK_BETA = 7e-11
PACK_BETA_CACHED = 2.2e-11
PIECE_ALPHA = 2e-5
# SMALL_PAGE_BETA: seconds more per byte a "pieces" bucket sends out of
# members on 4 KiB pages (Note [Pieces on small pages]).
SMALL_PAGE_BETA = 7e-11
# Seconds of one collective call outside its messages (argument checks,
# plan lookup, issue order): what a bucket saves over one call per array.
CALL_ALPHA = 5e-6

# The fit of `python -m pycoll.tune` on the project's machine (2 cores,
# MPICH 5.0.2, p = 2, 2026-11-23, with reduce_segment and the huge regime
# from 4 MiB): gamma (s per reduced float32 byte), each dtype's kernel cost
# relative to float32, the reduction segment it chose and (alpha s,
# beta s/B) per algorithm and regime. scan and barrier have no target and
# are not calibrated (Note [Scan's terms]).
DEFAULT_PARAMS: dict[str, Any] = {
    "gamma": 1.8e-11,
    "reduce_segment": REDUCE_SEGMENT,
    "kernel_cost": {'float32': 1.0, 'float64': 1.025, 'float16': 1.589, 'bfloat16': 1.226, 'int32': 1.015, 'complex64': 1.039},
    "algorithms": {
        "allreduce": {
            "ring": {"tiny": (5.39e-06, 5.18e-10), "small": (6.84e-06, 1.29e-10), "large": (1.11e-06, 1.28e-10), "huge": (2.17e-04, 1.03e-10)},
            "recursive_doubling": {"tiny": (2.49e-06, 2.50e-10), "small": (9.01e-07, 9.28e-11), "large": (0.00e+00, 9.48e-11), "huge": (2.86e-05, 1.51e-10)},
            "rabenseifner": {"tiny": (5.81e-06, 5.24e-10), "small": (7.34e-06, 1.19e-10), "large": (5.93e-05, 7.19e-11), "huge": (1.62e-04, 1.03e-10)},
            "tree": {"tiny": (1.74e-06, 4.63e-10), "small": (1.03e-06, 1.91e-10), "large": (1.19e-04, 1.22e-10), "huge": (4.53e-04, 1.71e-10)},
        },
        "broadcast": {
            "binomial": {"tiny": (3.53e-06, 2.40e-10), "small": (4.04e-06, 3.34e-11), "large": (0.00e+00, 4.13e-11), "huge": (2.20e-04, 4.56e-11)},
            "scatter_allgather": {"tiny": (8.19e-06, 4.92e-10), "small": (9.38e-06, 6.15e-11), "large": (0.00e+00, 5.42e-11), "huge": (1.19e-05, 7.29e-11)},
            "pipeline": {"tiny": (3.55e-06, 2.37e-10), "small": (3.98e-06, 3.34e-11), "large": (0.00e+00, 4.15e-11), "huge": (2.31e-04, 4.68e-11)},
        },
        "reduce": {
            "binomial": {"tiny": (1.60e-06, 1.78e-10), "small": (1.76e-06, 2.98e-11), "large": (8.97e-05, 2.69e-11), "huge": (0.00e+00, 1.10e-10)},
            "rabenseifner": {"tiny": (5.00e-06, 3.62e-10), "small": (6.58e-06, 5.16e-11), "large": (0.00e+00, 8.17e-11), "huge": (0.00e+00, 1.33e-10)},
        },
        "allgather": {
            "ring": {"tiny": (3.66e-06, 3.85e-10), "small": (4.88e-06, 5.11e-11), "large": (0.00e+00, 1.13e-10), "huge": (0.00e+00, 2.90e-10)},
            "recursive_doubling": {"tiny": (3.67e-06, 3.81e-10), "small": (5.01e-06, 4.95e-11), "large": (0.00e+00, 1.10e-10), "huge": (0.00e+00, 2.72e-10)},
            "bruck": {"tiny": (9.47e-06, 4.66e-10), "small": (1.12e-05, 1.02e-10), "large": (0.00e+00, 2.61e-10), "huge": (4.97e-04, 5.62e-10)},
        },
        "reduce_scatter": {
            "ring": {"tiny": (1.92e-06, 2.76e-10), "small": (2.77e-06, 4.02e-11), "large": (0.00e+00, 9.23e-11), "huge": (0.00e+00, 1.93e-10)},
            "recursive_halving": {"tiny": (1.96e-06, 2.72e-10), "small": (2.63e-06, 4.14e-11), "large": (0.00e+00, 9.13e-11), "huge": (0.00e+00, 3.19e-10)},
        },
        "gather": {
            "binomial": {"tiny": (3.45e-06, 2.52e-10), "small": (4.68e-06, 5.23e-11), "large": (0.00e+00, 9.91e-11), "huge": (0.00e+00, 1.30e-10)},
            "linear": {"tiny": (3.44e-06, 2.52e-10), "small": (4.64e-06, 5.19e-11), "large": (0.00e+00, 9.71e-11), "huge": (0.00e+00, 1.36e-10)},
        },
        "scatter": {
            "binomial": {"tiny": (3.61e-06, 4.28e-10), "small": (8.34e-06, 4.75e-11), "large": (4.46e-05, 7.40e-11), "huge": (0.00e+00, 9.96e-11)},
            "linear": {"tiny": (3.62e-06, 4.31e-10), "small": (8.40e-06, 4.73e-11), "large": (4.30e-05, 7.16e-11), "huge": (0.00e+00, 9.99e-11)},
        },
        "alltoall": {
            "pairwise": {"tiny": (5.54e-06, 3.77e-10), "small": (7.44e-06, 8.98e-11), "large": (0.00e+00, 1.10e-10), "huge": (0.00e+00, 1.82e-10)},
        },
        # Note [Scan's terms]
        "scan": {"recursive_doubling": {"tiny": (3.5e-06, 1.0e-10), "small": (3.0e-06, 1.0e-10),
                                        "large": (1.0e-05, 2.0e-10), "huge": (1.0e-05, 2.0e-10)},
                 "linear": {"tiny": (2.7e-06, 1.0e-10), "small": (3.0e-06, 1.0e-10),
                            "large": (1.0e-05, 1.2e-10), "huge": (1.0e-05, 1.2e-10)}},
        "barrier": {"dissemination": {"small": (4.0e-06, 0.0), "large": (4.0e-06, 0.0),
                                      "huge": (4.0e-06, 0.0)}},
    },
}


for _algorithms in DEFAULT_PARAMS["algorithms"].values():
    for _pieces in _algorithms.values():
        _pieces.setdefault("tiny", _pieces["small"])         # barrier

# Note [Scan's terms]
# ~~~~~~~~~~~~~~~~~~~
# scan has no performance target and no calibration: its terms are set
# here by hand. Since its lane (ScanLane in _lane_reduce.pyx), a repeated 8 B
# scan at p = 2 took 2.7 us on the linear chain (one message) and 3.5 us
# by recursive doubling (an exchange) on MPICH, 2.8 and 3.2 us on Open
# MPI; at 16 KiB-1 MiB the chain was 1.05-1.13x faster, as it sends and
# reduces half as much (a probe timing repeated calls, nine rounds). So
# "tiny" holds those alphas, and both algorithms pay the same per byte on
# the wire until "large": the chain wins on 2 and 3 ranks, and from 4 on
# recursive doubling's log2(p) steps win up to 128 KiB at p = 4 (below
# MIN_PIPELINE_SEGMENT the chain is one message passed on p - 1 times,
# Note [Pipelined chains]; counted as its limit, it won from 7 KiB). (On
# this 2-core machine the chain's repeated calls also won at 4-8 ranks,
# oversubscribed: a rank of a chain runs ahead into its next call, where
# an exchange waits for its partner's turn on the core. That is the
# machine, not the algorithms.) The "small" alpha also sizes the chain's
# pipeline segments (segment()).


def gamma(params, dtype: str | None = None) -> float:
    """Seconds per reduced byte of *dtype* (float32 when None)."""
    return params["gamma"] * params["kernel_cost"].get(dtype or "float32", 1.0)


def pack_beta(params, nbytes: int) -> float:
    """Seconds per byte of one copy into or out of a bucket buffer of
    *nbytes* (Note [Copies in the caches])."""
    if nbytes > HUGE:
        return params.get("pack_beta", PACK_BETA)
    return params.get("pack_beta_cached", PACK_BETA_CACHED)


# Note [Pieces on small pages]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# A "pieces" bucket sends out of its members where they lie, and between
# two ranks of this node a message costs more per byte when the sender's
# pages are 4 KiB ones (Note [Huge pages] in pycoll/_memory.py): 4 x 1 MiB
# each way took 500-556 us from small pages and 230-244 from huge ones,
# whatever the receiver's pages (MPICH and Open MPI, p = 2), about 70 ps
# a byte more. A numpy array under 4 MiB lies on small pages, one of 4
# MiB or more on huge ones: so do the calibration's vectors (numpy
# arrays), whose "huge" regime (above HUGE) is timed on huge pages, and
# a bucket modelled there was priced as if its members were. A bucket of
# 8 separately allocated 1 MiB arrays reduced as pieces took 1.4-2.2x
# the time of the same arrays on huge pages (MPICH 1393-1454 against
# 720-746 us, Open MPI 1511-1737 against 729-765), and the model, blind
# to pages, chose pieces where one call per array (whose sends the lanes
# stage, Note [Staging sends] in pycoll/_resources.pyx) was faster in
# every launch. The model
# now adds SMALL_PAGE_BETA per byte on the wire, for the share of a
# bucket above HUGE that lies on small pages on some rank (agreed with
# the layout); up to HUGE the calibration's own vectors lay on small
# pages.
# Staging a pieces send as well was tried: 2x faster in the host's slow
# mode, 0-26% slower in its fast one (bench/NOTES.md, "Pieces on small
# pages").


# Note [Copies in the caches]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~
# A bucket's pack and unpack read and write its arrays and its buffer.
# Timed as PackPlan.pack + unpack of 8 or 64 float32 arrays into one
# buffer, both ranks at once (p = 2, this machine: 1 MiB L2 per core, 32
# MiB L3), a byte cost 21-24 ps up to 4 MiB, 27 at 8 MiB, 41 at 16, 52-59
# at 32 and 61-67 from 64 MiB: PACK_BETA, measured on ResNet-50's 97.5
# MiB, is three times a small bucket's cost. With it alone, the model
# sent every member of 8 and 32 x 64 KiB alone, where packing took
# 0.46-0.70x the time (MPICH, p = 2, the host's fast mode; 0.72-0.89x in
# its slow one). Up to HUGE (the regimes' bound) an allreduce's bucket
# costs PACK_BETA_CACHED per byte copied, and those buckets pack; 8 x 256
# KiB still goes one array at a time at p = 2 (packing: 0.62-0.90x in the
# fast mode, 2.5x in the slow one). bench/NOTES.md, "Copies in the caches".


def regime(n: int) -> str:
    """The size regime of a vector or block of n bytes: "tiny" up to TINY,
    "small" up to SPLIT, "large" up to HUGE, "huge" above."""
    if n <= TINY:
        return "tiny"
    return "small" if n <= SPLIT else "large" if n <= HUGE else "huge"


def modelled_time(collective: str, algorithm: str, n: int, p: int, params=None,
                  dtype: str | None = None, footprint: int = 0) -> float:
    """T(n, p) of one algorithm, in seconds.

    *footprint*: the bytes of data the caller sweeps through around this
    call, read once, when more than n (one array of a fused bucket sent on
    its own is as cold as the bucket). Then beta is that size's: the
    calibration's repeated calls on one vector find a small one in cache,
    which the arrays of a 60 MiB bucket never are (ResNet-50's 161
    gradients took 1.6-1.9x their cache-hot modelled time one by one).
    alpha, the cost per step, stays the vector's own.
    """
    params = params or DEFAULT_PARAMS
    pieces = params["algorithms"][collective][algorithm]
    alpha = pieces[regime(n)][0]
    beta = pieces[regime(max(n, footprint))][1]
    steps, wire, reduced = terms(collective, algorithm, n, p, params)
    return steps * alpha + wire * beta + reduced * gamma(params, dtype)


def terms(collective: str, algorithm: str, n: int, p: int, params=None) -> tuple:
    """(steps, bytes on the wire, bytes reduced) of one algorithm on n bytes:
    its module's cost terms, but for a pipelined chain cut into m segments
    (p - 2 + m) segment times (Note [Pipelined chains]), m as *params* cut
    (PYCOLL_SEGMENT_BYTES, a test's setting, is not modelled)."""
    module = REGISTRY[collective][algorithm]
    steps, wire, reduced = module.steps(p), module.bytes_on_wire(n, p), module.reduce_bytes(n, p)
    if (collective, algorithm) in PIPELINED and p > 2 and n > 0:
        m = -(-n // pipeline_segment(collective, algorithm, n, p, params))
        times = p - 2 + m
        steps, wire, reduced = times, wire * times / m, reduced * times / m
    return steps, wire, reduced


# Note [Pipelined chains]
# ~~~~~~~~~~~~~~~~~~~~~~~
# A chain of p ranks that cuts n bytes into m segments delivers the last
# one after p - 2 + m segment times (the first segment crosses p - 1
# links, then one more arrives per segment time), each a step and n / m
# bytes: the chain's terms (p - 1 steps, n bytes) are its limit for many
# segments. Below MIN_PIPELINE_SEGMENT a chain is one message passed
# p - 1 times, and with its limit alone the model ranked a 16 KiB
# broadcast at p = 4 (modelled 3 alpha + n beta against the binomial
# tree's 2 alpha + 2 n beta) ahead of the tree, which it took 3.8-6.6x
# as long as (uncalibrated, MPICH, p = 4 on two cores; bench/NOTES.md,
# "Uncalibrated picks at p = 3 and 4").

# Note [Scatter's terms]
# ~~~~~~~~~~~~~~~~~~~~~~
# Both scatters' roots send (p - 1) * n bytes, and counted so, the p = 2
# defaults, extrapolated, gave the binomial tree (fewer steps, the same
# bytes) every size at p = 4, where from 256 KiB blocks it took 1.3-3.6x
# the linear scatter's time. Between ranks of a node the receiver makes
# the copy (bench/NOTES.md, "Why the sender's pages"), so the linear
# scatter's p - 1 receivers copy their blocks out of the root's buffer at
# once, while the tree's first child copies half of them before it passes
# any on. scatter_linear counts one block, as gather_linear does for its
# mirror image; at p = 2 the terms are the tree's, as before.


def select(collective: str, n: int, p: int, settings, dtype: str | None = None) -> str:
    """The algorithm "auto" runs (Note [Same choice everywhere]).

    n: the vector's bytes (allreduce, broadcast, reduce, scan) or one rank's
    block (the others), as in the algorithms' cost terms.
    """
    override = settings.algorithms.get(collective)
    if override:
        return override
    params = settings.params or DEFAULT_PARAMS
    names = ALGORITHMS[collective]
    return min(names, key=lambda a: modelled_time(collective, a, n, p, params, dtype))


def candidates(collective: str, n: int, p: int, settings, dtype: str | None = None) -> list:
    """What online tuning tries for "auto" (Note [Tuning online] in
    _trials.py): the model's choice, then the algorithms modelled within
    TUNE_MARGIN of it, fastest first, TUNE_MAX in all; the override alone
    where PYCOLL_ALGORITHM_ sets one."""
    chosen = select(collective, n, p, settings, dtype)
    if settings.algorithms.get(collective):
        return [chosen]
    params = settings.params or DEFAULT_PARAMS
    times = {a: modelled_time(collective, a, n, p, params, dtype) for a in ALGORITHMS[collective]}
    near = sorted((a for a in times if times[a] <= times[chosen] * (1 + TUNE_MARGIN)),
                  key=times.__getitem__)
    return [chosen] + [a for a in near if a != chosen][:TUNE_MAX - 1]


def best(collective: str, n: int, p: int, settings, dtype: str | None = None,
         algorithm: str = "auto", pieces: bool = False):
    """(algorithm, modelled seconds) of what *algorithm* ("auto": the model's
    choice, or the PYCOLL_ALGORITHM_ override) runs on n bytes; with
    *pieces*, among the algorithms that run on unpacked arrays (``PIECES``)
    only: (None, inf) if there is none."""
    params = settings.params or DEFAULT_PARAMS
    if algorithm == "auto":
        algorithm = settings.algorithms.get(collective) or "auto"
    names = ALGORITHMS[collective] if algorithm == "auto" else (algorithm,)
    if pieces:
        names = tuple(a for a in names if getattr(REGISTRY[collective][a], "PIECES", False))
    if not names:
        return None, math.inf
    return min(((a, modelled_time(collective, a, n, p, params, dtype)) for a in names),
               key=lambda pair: pair[1])


def segment(collective: str, algorithm: str, n: int, p: int, settings) -> int:
    """Bytes per message of one transfer for this algorithm at this size."""
    if settings.segment_bytes:
        return settings.segment_bytes
    if (collective, algorithm) in PIPELINED:
        if p <= 2:
            return WHOLE                        # a chain of one link: one message
        return pipeline_segment(collective, algorithm, n, p, settings.params)
    if REGISTRY[collective][algorithm].reduce_bytes(max(n, 1), max(p, 2)) > 0:
        return (settings.params or DEFAULT_PARAMS).get("reduce_segment", REDUCE_SEGMENT)
    return WHOLE


def pipeline_segment(collective: str, algorithm: str, n: int, p: int, params=None) -> int:
    """The segment of a pipelined chain of p > 2 ranks on n bytes."""
    # The classic optimum of a pipelined chain: sqrt(n alpha / ((p-2) beta)),
    # alpha being what each segment's message costs beyond its bytes: the
    # "small" fit's, made where a call is mostly its steps. A "large" or
    # "huge" fit's alpha is the intercept of a line through big vectors,
    # which the fit clamps at 0 (MPICH's p = 4 calibration on d4b0a7d):
    # taken as the cost of a segment, it made every segment the minimum,
    # a 64 MiB broadcast 1,024 messages down the chain (0.46x native).
    pieces = (params or DEFAULT_PARAMS)["algorithms"][collective][algorithm]
    alpha, beta = pieces["small"][0], pieces[regime(n)][1]
    best = math.sqrt(n * alpha / ((p - 2) * max(beta, 1e-12)))
    best = int(min(MAX_PIPELINE_SEGMENT, max(MIN_PIPELINE_SEGMENT, best)))
    return best - best % 64                     # a multiple of every itemsize


def segment_scores(times: dict) -> dict:
    """Each candidate segment's score (Note [Reduction segments]): the
    mean over cases of its time relative to the fastest candidate's.
    *times* maps each candidate segment to {case: seconds}; the cases timed
    for every candidate count."""
    candidates = sorted(times)
    cases = sorted(set.intersection(*(set(times[c]) for c in candidates))) if candidates else []
    if not cases:
        raise ValueError("segment_scores needs the same timed cases for every candidate")
    fastest = {case: min(times[c][case] for c in candidates) for case in cases}
    return {c: sum(times[c][case] / fastest[case] for case in cases) / len(cases)
            for c in candidates}


def choose_reduce_segment(times: dict) -> int:
    """The reduction segment a calibration keeps (Note [Reduction
    segments]): of the candidates' segment_scores, the smallest candidate
    within SEGMENT_TIE of the best score."""
    score = segment_scores(times)
    best = min(score.values())
    return next(c for c in sorted(score) if score[c] <= best * (1 + SEGMENT_TIE))


def check_settings(settings) -> None:
    """ValueError for an override naming no algorithm of its collective."""
    for collective, name in settings.algorithms.items():
        if collective not in ALGORITHMS:
            raise ValueError(f"PYCOLL_ALGORITHM_{collective.upper()}: no collective "
                             f"named {collective!r}")
        if name not in ALGORITHMS[collective]:
            raise ValueError(f"PYCOLL_ALGORITHM_{collective.upper()}={name}: {collective} "
                             f"has {', '.join(ALGORITHMS[collective])}")


# ---------------------------------------------------------------------------
# The calibration cache


def library_slug(library_version: str) -> str:
    """'MPICH Version: 5.0.2 ...' -> 'mpich-5.0.2'; 'Open MPI v5.0.11, ...' -> 'openmpi-5.0.11'."""
    first = " ".join(library_version.split())
    if first.startswith("Open MPI"):
        return "openmpi-" + first.split()[2].lstrip("v").rstrip(",")
    if first.startswith("MPICH"):
        return "mpich-" + first.split()[2]
    return first.split()[0].lower() if first else "mpi"


def cache_path(library_version: str, p: int) -> Path:
    """Where the calibration of (this machine, this MPI library, p) lives:
    $PYCOLL_TUNE_DIR, else ~/.cache/pycoll."""
    root = Path(os.environ.get("PYCOLL_TUNE_DIR") or Path.home() / ".cache" / "pycoll")
    return root / f"tuning-{socket.gethostname()}-{library_slug(library_version)}-p{p}.json"


def load_params(library_version: str, p: int):
    """The cached calibration's parameters, or None."""
    try:
        path = cache_path(library_version, p)
    except RuntimeError as exc:             # Path.home(): no home directory to find
        log.warning("no calibration directory (%s): the default parameters apply", exc)
        return None
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        log.debug("no calibration at %s: the default parameters apply", path)
        return None
    except (OSError, ValueError) as exc:
        log.warning("calibration %s is unreadable (%s): the default parameters apply", path, exc)
        return None
    try:
        params = merge_params(data.get("params") if isinstance(data, dict) else None)
    except (TypeError, ValueError, LookupError, AttributeError) as exc:
        # valid JSON with the wrong content (edited by hand, another version's)
        log.warning("calibration %s does not hold parameters this version reads (%s: %s): "
                    "the default parameters apply", path, type(exc).__name__, exc)
        return None
    log.debug("calibration %s: %s", path, "loaded" if params else "not a calibration, ignored")
    return params


def merge_params(params):
    """A calibration's parameters over the defaults (whatever it lacks keeps
    its default), or None if it is not a calibration."""
    if not isinstance(params, dict) or not isinstance(params.get("algorithms"), dict):
        return None
    # Its (alpha, beta) were fitted with its segment: a calibration from
    # before reduce_segment was measured keeps the 1 MiB it was made with.
    segment = params.get("reduce_segment", LEGACY_REDUCE_SEGMENT)
    if not (type(segment) is int and 1 <= segment <= WHOLE):
        log.warning("calibration has reduce_segment=%r, not a byte count: %d applies",
                    segment, REDUCE_SEGMENT)
        segment = REDUCE_SEGMENT
    costs = {str(name): float(cost) for name, cost in params.get("kernel_cost", {}).items()}
    merged = {"gamma": float(params.get("gamma", DEFAULT_PARAMS["gamma"])),
              "kernel_cost": {**DEFAULT_PARAMS["kernel_cost"], **costs},
              "reduce_segment": segment,
              "algorithms": {c: dict(algs) for c, algs in DEFAULT_PARAMS["algorithms"].items()}}
    for collective, algs in params["algorithms"].items():
        for name, pieces in algs.items():
            if (collective in merged["algorithms"] and name in merged["algorithms"][collective]
                    and isinstance(pieces, dict) and {"small", "large"} <= set(pieces)):
                # A calibration from before the "huge" regime: "large" stands
                # for it; from before "tiny", "small".
                pieces = {"huge": pieces["large"], "tiny": pieces["small"], **pieces}
                merged["algorithms"][collective][name] = {k: _pair(pieces[k]) for k in REGIMES}
    return merged


def _pair(piece) -> tuple:
    """A regime's (alpha, beta) from a calibration; ValueError (the
    calibration is ignored, load_params) unless two numbers."""
    pair = tuple(float(v) for v in piece[:2])
    if len(pair) != 2:
        raise ValueError(f"a regime holds {piece!r}, not (alpha, beta)")
    return pair


def fit(samples, gamma_f32: float) -> tuple:
    """(alpha, beta) >= 0 minimising the squared relative error of
    T = steps*alpha + wire*beta + reduced*gamma over samples of (steps, wire,
    reduced, measured seconds), gamma known. Non-negative least squares by
    trying each set of free parameters (there are two). Where fits tie (a
    regime with one sample), the one with beta alone wins: a time that grows
    with the bytes is the safer extrapolation."""
    import numpy as np

    rows = [(s / t, w / t, 1 - r * gamma_f32 / t) for s, w, r, t in samples if t > 0]
    if not rows:
        return (0.0, 0.0)
    a = np.array([r[:2] for r in rows], float)
    b = np.array([r[2] for r in rows], float)
    best, best_err = np.zeros(2), math.inf
    for free in ((1,), (0,), (0, 1)):
        cols = a[:, free]
        if not cols.any():
            continue
        theta, *_ = np.linalg.lstsq(cols, b, rcond=None)
        if (theta < 0).any():
            continue
        full = np.zeros(2)
        full[list(free)] = theta
        err = float(((a @ full - b) ** 2).sum())
        if err < best_err - 1e-12:
            best, best_err = full, err
    return tuple(float(v) for v in best)


def kernel_gamma(dtype_name: str, nbytes: int = 1 << 20, repeat: int = 5) -> float:
    """Seconds per byte of a = a + b for one operand of *nbytes* (the
    reduction kernel's cost per reduced byte), the best of *repeat* runs.
    In place, as the algorithms reduce (Note [Reduce in place] in _p2p.py)."""
    import time

    import numpy as np

    from pycoll._dtypes import BY_NAME
    from pycoll._kernels.reduce import reduce as kernel

    dt = BY_NAME[dtype_name]
    a = np.ones(nbytes // dt.itemsize, dt.numpy)
    b = a.copy()
    best = math.inf
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(20):
            kernel(0, dt.code, a, a, b)
        best = min(best, (time.perf_counter() - start) / 20)
    return best / nbytes
