"""Choosing among candidates by timing them, the same choice on every rank.

Note [Tuning online]: the cost model (pycoll/tuning.py) is calibrated once,
in one launch, and decides from that. On this shared host the order of two
algorithms a few tens of percent apart flips between launches (the host's
modes, Note [Choosing the way] in _resources.pyx): MPICH's calibration timed
Rabenseifner's allreduce at 4 MiB 25% faster than recursive doubling, and
three later launches timed recursive doubling 1-25% faster. A choice made
by measuring, in the launch that runs the calls, follows the machine as it
is now, as Horovod's HOROVOD_AUTOTUNE and Intel MPI's I_MPI_TUNING_AUTO do.

A ``Trials`` runs its candidates in bursts that take turns, the first
rounds untimed (a candidate's first calls build its plan and try its ways
of sending), keeps each rank's times, and decides on the candidate with
the lowest median, the slowest rank's median counting: ``decide(agree)``
passes the medians to *agree*, an allreduce (MAX) over the ranks, so every
rank holds the same numbers and makes the same choice (Note [Same choice
everywhere] in tuning.py). Every rank must therefore make the same calls in
the same order, which collectives do.

``AlgorithmTuner`` runs Trials for the blocking "auto" allreduce, reduce
and reduce_scatter calls of at least TUNE_MIN_BYTES of one Communicator
that asks for it (``Communicator(autotune=True)`` or
``PYCOLL_AUTOTUNE=1``): per call signature, the algorithms the model times
within TUNE_MARGIN of its pick, TUNE_MAX of them at most (tuning.py). The
choice holds for RETUNE_FACTOR times the calls the trials took, then the
trials run again (the host's modes last minutes). Off by default: the
choice then depends on timing, so two launches may run different
algorithms, whose float sums may round differently (every rank of one
launch still gets the same bits).

Measured (bench/autotune.py, three launches per library;
bench/PERFORMANCE.md, "Choosing by timing"): at p = 2 "tuned" was within
10% of the fastest algorithm in 21 and 20 of 24 cases against the
model's 13 and 11 (MPICH, Open MPI); at p = 4 on two cores, 20 and 16
against 20 and 22, and the trials' picks at 1 MiB differed in every
launch (with four ranks on two cores, a guess: a burst's time is mostly
the scheduler's).
"""
from __future__ import annotations

import collections
import statistics
import time

import numpy as np

from pycoll import _resources, tuning

# A trial's bursts last BURST_SECONDS at the model's time, MIN_BURST to
# MAX_BURST calls (one call's time is noise here; and at 4 MiB, recursive
# doubling called right after the ring took 1.5x its time called after
# itself, so a burst's first call is not counted). TIMED_ROUNDS rounds are
# timed after enough untimed ones for SETTLE calls of each candidate (its
# first call builds its plan, and its lane's first SETTLE calls try each
# way of sending, Note [Choosing the way] in _resources.pyx: timed, they made
# the 4 MiB allreduce's trials pick the slowest of three).
BURST_SECONDS, MIN_BURST, MAX_BURST, TIMED_ROUNDS = 1e-3, 3, 32, 7
# Decisions hold for RETUNE_FACTOR times the calls the trials of every
# signature remembered make, RETUNE_CALLS at least: the losers' calls cost
# a few percent at most.
RETUNE_FACTOR, RETUNE_CALLS = 20, 1000
# Call signatures whose trials a tuner keeps (the oldest forgotten first:
# every rank forgets the same, having made the same calls).
REMEMBERED = 1024


class Trials:
    """The state of one choice: candidates tried, then one chosen.

    The candidates take turns, a *burst* of calls each, for *rounds*
    rounds, the first *warmup* rounds untimed. A round's time of a
    candidate is the mean call of its burst after the first (which finds
    the caches as the previous candidate left them); its time in the end,
    the median round. So it is timed as pycoll.bench times an algorithm:
    bursts taking turns give every candidate the same share of a noisy
    machine, and calls in a row find the caches as a repeated call does."""

    def __init__(self, candidates: list, rounds: int, warmup: int = 0, burst: int = 1):
        self.candidates, self.rounds, self.warmup = list(candidates), rounds, warmup
        self.burst = burst
        self.restart()

    def restart(self) -> None:
        """Try every candidate again (a single one is chosen at once)."""
        self.times: list[list] = [[] for _ in self.candidates]
        self.calls, self._spent = 0, 0.0
        self.chosen = None if len(self.candidates) > 1 else self.candidates[0]

    def length(self) -> int:
        """The calls a trial makes."""
        return self.rounds * len(self.candidates) * self.burst

    def next(self) -> int:
        """The index of the candidate the next trial call runs."""
        k = self.calls // self.burst % len(self.candidates)
        self.calls += 1
        return k

    def record(self, k: int, seconds: float) -> None:
        """This rank's time of the call next() gave k for."""
        place = (self.calls - 1) % self.burst
        if place or self.burst == 1:                # a burst's first call pays for the switch
            self._spent += seconds
        if place == self.burst - 1:
            if self.calls > self.warmup * len(self.candidates) * self.burst:
                self.times[k].append(self._spent / max(1, self.burst - 1))
            self._spent = 0.0

    def finished(self) -> bool:
        return self.chosen is None and self.calls == self.length()

    def decide(self, agree):
        """Choose by the agreed medians; *agree* maps this rank's medians
        (float64) to the largest over ranks."""
        slowest = agree(np.array([statistics.median(t) for t in self.times]))
        self.chosen = self.candidates[int(np.argmin(slowest))]
        return self.chosen


class AlgorithmTuner:
    """Note [Tuning online] for the "auto" calls of one communicator.

    call() asks chosen(key) first: the algorithm decided for the call's
    signature, or None while its trials go on, when it calls trial().
    RETUNE_FACTOR times the calls of the trials remembered after the last
    decision, all decisions are dropped and tried again (counted over all
    calls, so every rank drops them at the same call)."""

    def __init__(self, comm, agree):
        self.comm, self.agree = comm, agree
        self._trials = collections.OrderedDict()   # call signature -> Trials
        self._fixed = {}                           # call signature -> algorithm decided
        self._calls, self._retune_at = 0, RETUNE_CALLS

    def call(self, key, build, run):
        """Run one call of signature *key* (the same on every rank):
        run(name) makes it with algorithm *name*; build() gives its CollArgs
        (raising, before any message, on bad arguments)."""
        name = self.chosen(key)
        return run(name) if name is not None else self.trial(key, build, run)

    def chosen(self, key):
        """The algorithm decided for signature *key*, or None. Counts the
        call, and drops every decision when their time is up."""
        self._calls += 1
        if self._calls >= self._retune_at:
            for k in self._fixed:
                self._trials[k].restart()
            self._fixed.clear()
            self._hold()
        return self._fixed.get(key)

    def _hold(self) -> None:
        """Keep the decisions for RETUNE_FACTOR times the calls of every
        signature's trials from now (RETUNE_CALLS at least)."""
        self._retune_at = max(self._retune_at, self._calls + max(
            RETUNE_CALLS, RETUNE_FACTOR * sum(t.length() for t in self._trials.values())))

    def trial(self, key, build, run):
        """Run one call of *key* while its trials go on (arguments as for
        call())."""
        trials = self._trials.get(key)
        if trials is None:
            trials = self._trials[key] = self._trials_of(build())
            while len(self._trials) > REMEMBERED:
                self._fixed.pop(self._trials.popitem(last=False)[0], None)
        if trials.chosen is not None:                   # a single candidate
            self._fixed[key] = trials.chosen
            return run(trials.chosen)
        k = trials.next()
        result, seconds = self._timed(run, trials.candidates[k])
        trials.record(k, seconds)
        if trials.finished():
            self._fixed[key] = trials.decide(self.agree)
            self._hold()
        return result

    @staticmethod
    def _timed(run, name: str) -> tuple:
        """(run(name), this rank's seconds)."""
        start = time.perf_counter()
        result = run(name)
        return result, time.perf_counter() - start

    def _trials_of(self, args) -> Trials:
        p, settings = self.comm.size, self.comm.settings
        names = tuning.candidates(args.collective, args.n, p, settings, args.dtype.name)
        seconds = tuning.modelled_time(args.collective, names[0], args.n, p, settings.params,
                                       args.dtype.name)
        burst = int(min(MAX_BURST, max(MIN_BURST, BURST_SECONDS / max(seconds, 1e-9))))
        warmup = -(-_resources.SETTLE // burst)
        return Trials(names, warmup + TIMED_ROUNDS, warmup, burst)

    def choices(self) -> dict:
        """{call signature: the algorithm chosen, or None while trying}."""
        return {key: trials.chosen for key, trials in self._trials.items()}
