"""Choosing by timing (Note [Tuning online] in pycoll/_trials.py), without MPI:
the trials' schedule, the decision on agreed times, when decisions are
tried again, and what the model offers as candidates."""
from types import SimpleNamespace

import numpy as np
import pytest

from pycoll import _resources, _trials, tuning
from pycoll._comm import Settings
from pycoll._trials import AlgorithmTuner, Trials
from pycoll.algorithms import ALGORITHMS


def run_trials(trials, seconds):
    """Make the trial's calls, candidate k taking seconds(k, call) each;
    the candidates in call order."""
    order = []
    while not trials.finished():
        k = trials.next()
        order.append(k)
        trials.record(k, seconds(k, len(order) - 1))
    return order


def test_bursts_take_turns_and_warm_up_untimed():
    trials = Trials(["a", "b", "c"], rounds=4, warmup=1, burst=3)
    order = run_trials(trials, lambda k, i: 1.0 + k)
    assert order == [0, 0, 0, 1, 1, 1, 2, 2, 2] * 4
    assert trials.length() == len(order) == 36
    # one time per timed round (3 of 4), each the mean of the burst after its first call
    assert [len(t) for t in trials.times] == [3, 3, 3]
    assert trials.times[2] == [3.0, 3.0, 3.0]


def test_a_bursts_first_call_is_not_counted():
    trials = Trials(["a", "b"], rounds=2, warmup=0, burst=3)
    # every burst's first call is slow: it finds the other candidate's caches
    run_trials(trials, lambda k, i: 100.0 if i % 3 == 0 else 1.0 + k)
    assert trials.times == [[1.0, 1.0], [2.0, 2.0]]


def test_single_calls_in_turn_count_every_call():
    """burst=1, as the fusion manager's autotune tries its plans."""
    trials = Trials(["x", "y"], rounds=3)
    order = run_trials(trials, lambda k, i: float(i))
    assert order == [0, 1, 0, 1, 0, 1]
    assert trials.times == [[0.0, 2.0, 4.0], [1.0, 3.0, 5.0]]


def test_the_decision_takes_the_agreed_medians():
    trials = Trials(["fast here", "fast everywhere"], rounds=3)
    run_trials(trials, lambda k, i: [1.0, 2.0][k])
    # This rank timed the first faster; another rank timed it 10x slower:
    # the agreed (largest) medians decide.
    seen = []

    def agree(medians):
        seen.append(medians.copy())
        return np.maximum(medians, [10.0, 2.0])
    assert trials.decide(agree) == "fast everywhere" == trials.chosen
    assert seen[0].tolist() == [1.0, 2.0]
    assert not trials.finished()


def test_one_candidate_is_chosen_without_trials():
    trials = Trials(["only"], rounds=5, warmup=2, burst=4)
    assert trials.chosen == "only" and not trials.finished()


def test_restart_forgets_the_times():
    trials = Trials(["a", "b"], rounds=2)
    run_trials(trials, lambda k, i: 1.0)
    trials.decide(lambda m: m)
    trials.restart()
    assert trials.chosen is None and trials.calls == 0 and trials.times == [[], []]


class FakeComm:
    """What the tuner reads of a communicator."""

    def __init__(self, size=2, settings=None):
        self.size, self.settings = size, settings or Settings()


def args_of(collective, n, dtype="float32"):
    return SimpleNamespace(collective=collective, n=n, dtype=SimpleNamespace(name=dtype))


def tuned_calls(tuner, key, args, slow, calls):
    """Make *calls* calls of one signature: each candidate takes 1 s, the
    *slow* one 3 s (as this rank times them). The algorithms run, in order."""
    ran = []

    def run(name):
        ran.append(name)
        return name

    tuner._timed = lambda run, name: (run(name), 3.0 if name == slow else 1.0)
    for _ in range(calls):
        name = tuner.chosen(key)
        if name is None:
            tuner.trial(key, lambda: args, run)
        else:
            run(name)
    return ran


def test_the_tuner_tries_the_candidates_then_keeps_the_fastest():
    agreed = []
    tuner = AlgorithmTuner(FakeComm(), lambda m: agreed.append(m) or m)
    args = args_of("allreduce", 16 << 20)
    names = tuning.candidates("allreduce", 16 << 20, 2, Settings(), "float32")
    assert len(names) > 1
    trials = tuner._trials_of(args)
    ran = tuned_calls(tuner, "key", args, names[0], trials.length() + 10)
    assert ran[:trials.length()] == [n for r in range(trials.rounds) for n in names
                                     for _ in range(trials.burst)]
    # The model's pick timed slowest: the others are faster by the same
    # 1 s, and the first of them in the model's order wins.
    assert ran[trials.length():] == [names[1]] * 10
    assert len(agreed) == 1 and tuner.choices() == {"key": names[1]}
    # every candidate settles its lane's ways before it is timed
    assert trials.warmup * trials.burst >= _resources.SETTLE


def test_decisions_are_tried_again_after_many_calls(monkeypatch):
    monkeypatch.setattr(_trials, "RETUNE_FACTOR", 2)
    monkeypatch.setattr(_trials, "RETUNE_CALLS", 1)
    tuner = AlgorithmTuner(FakeComm(), lambda m: m)
    args = args_of("allreduce", 16 << 20)
    length = tuner._trials_of(args).length()
    ran = tuned_calls(tuner, "key", args, None, 7 * length)
    # Trials; the choice for RETUNE_FACTOR times the trials' calls after
    # the decision (calls counted from 1, trials' included); trials again;
    # the choice again.
    names = tuning.candidates("allreduce", 16 << 20, 2, Settings(), "float32")
    trial = ran[:length]
    assert trial[0] == names[0] and set(trial) == set(names)
    assert ran[length:3 * length - 1] == [names[0]] * (2 * length - 1)
    assert ran[3 * length - 1:4 * length - 1] == trial
    assert ran[4 * length - 1:6 * length - 2] == [names[0]] * (2 * length - 1)
    assert ran[6 * length - 2:7 * length - 2] == trial[:len(ran) - 6 * length + 2]


def test_a_new_decision_holds_every_decision_longer(monkeypatch):
    """Decisions hold for RETUNE_FACTOR times all the trials' calls after
    the last one: a signature decided late is not tried again at once."""
    monkeypatch.setattr(_trials, "RETUNE_FACTOR", 2)
    monkeypatch.setattr(_trials, "RETUNE_CALLS", 1)
    tuner = AlgorithmTuner(FakeComm(), lambda m: m)
    args = args_of("allreduce", 16 << 20)
    length = tuner._trials_of(args).length()
    tuned_calls(tuner, "a", args, None, length)
    tuned_calls(tuner, "b", args, None, length + 1)
    assert tuner._retune_at == 2 * length + 2 * (2 * length)
    assert None not in tuner.choices().values()


def test_forgotten_signatures_lose_their_decision(monkeypatch):
    monkeypatch.setattr(_trials, "REMEMBERED", 2)
    tuner = AlgorithmTuner(FakeComm(), lambda m: m)
    args = args_of("allreduce", 16 << 20)
    length = tuner._trials_of(args).length()
    for key in ("a", "b", "c"):
        tuned_calls(tuner, key, args, None, length)
    assert set(tuner.choices()) == {"b", "c"} and tuner.chosen("a") is None


def test_candidates_start_with_the_models_pick():
    settings = Settings()
    for collective, names in ALGORITHMS.items():
        for n in (1 << 16, 1 << 20, 1 << 26):
            for p in (2, 3, 8):
                got = tuning.candidates(collective, n, p, settings, "float32")
                assert got[0] == tuning.select(collective, n, p, settings, "float32")
                assert 1 <= len(got) <= tuning.TUNE_MAX and len(set(got)) == len(got)
                times = {a: tuning.modelled_time(collective, a, n, p, None, "float32")
                         for a in names}
                assert all(times[a] <= times[got[0]] * (1 + tuning.TUNE_MARGIN) for a in got)
                # the ones left out are slower than every one taken, or the
                # candidates are full
                left = [a for a in names if a not in got]
                assert len(got) == tuning.TUNE_MAX or all(
                    times[a] > times[got[0]] * (1 + tuning.TUNE_MARGIN) for a in left)


def test_an_override_is_the_only_candidate():
    settings = Settings(algorithms={"allreduce": "tree"})
    assert tuning.candidates("allreduce", 1 << 24, 4, settings) == ["tree"]


@pytest.mark.parametrize("value, on", [("", False), ("0", False), ("1", True), ("yes", True),
                                       ("off", False)])
def test_pycoll_autotune_switches_it(value, on):
    assert Settings.from_env({"PYCOLL_AUTOTUNE": value}).autotune is on


def test_a_bad_pycoll_autotune_raises():
    with pytest.raises(ValueError,
                       match=r"PYCOLL_AUTOTUNE='Maybe': expected 0 or 1 \(or false/true"):
        Settings.from_env({"PYCOLL_AUTOTUNE": "Maybe"})
    with pytest.raises(ValueError, match="PYCOLL_CHECKS='2': expected 0 or 1"):
        Settings.from_env({"PYCOLL_CHECKS": "2"})
