"""The benchmark harness's timing loop without MPI: which calls it makes,
in which order. (test_bench.py runs the CLI itself under mpiexec.)"""
from collections import Counter
from types import SimpleNamespace

import pytest

from pycoll.bench.harness import balanced_order, measure_all


class Recorder:
    """Stands in for the op spec, the benches and the native communicator:
    every call a case makes is recorded, the reductions over ranks are the
    identity (one rank)."""

    MAX = SUM = None

    def __init__(self):
        self.calls = []
        self.timing = False
        self.p = 1

    # the native communicator and mpi4py's MPI module
    def Barrier(self):
        self.timing = True

    def allreduce(self, value, op=None):
        return value

    # the spec
    def run(self, bench, comm, algorithm, inplace):
        if self.timing:
            self.calls.append((bench.name, algorithm, inplace))

    def native_supported(self, dtype, redop):
        return True

    def factor(self, p):
        return 1.0


@pytest.mark.parametrize("n", range(1, 10))
def test_balanced_order_is_a_balanced_latin_square(n):
    """Over n rounds (2n for odd n) every case takes every place equally
    often and directly follows every other case equally often."""
    rounds = n if n % 2 == 0 else 2 * n
    rows = [balanced_order(n, k) for k in range(rounds)]
    assert all(sorted(row) == list(range(n)) for row in rows)
    places = Counter((i, c) for row in rows for i, c in enumerate(row))
    assert set(places.values()) == {rounds // n}
    follows = Counter(pair for row in rows for pair in zip(row, row[1:]))
    if n > 1:
        assert len(follows) == n * (n - 1) and len(set(follows.values())) == 1
    # The pattern repeats after those rounds.
    assert balanced_order(n, rounds + 1) == rows[1 % rounds]


def test_rounds_take_the_balanced_orders():
    """Each round times every case once, in balanced_order's order (a case
    right after a larger one pays for its cache sweep)."""
    rec = Recorder()
    names = ("float32", "float16", "bfloat16")
    benches = {name: (SimpleNamespace(name=name, p=1, fill=lambda: None), None, 64)
               for name in names}
    cases = [(name, "auto", False) for name in names]
    args = SimpleNamespace(rounds=7, iters=1, warmup_iters=0, round_us=0, check=0)
    results = measure_all(rec, benches, cases, None, rec, rec, args)
    rounds = [[c[0] for c in rec.calls[k:k + 3]] for k in range(0, len(rec.calls), 3)]
    assert rounds == [[names[i] for i in balanced_order(3, k)] for k in range(7)]
    # float16 follows float32 as often as it follows bfloat16 (over 6 rounds).
    follows = Counter(pair for r in rounds[:6] for pair in zip(r, r[1:]))
    assert follows[("float32", "float16")] == follows[("bfloat16", "float16")] == 2
    assert set(results) == set(cases) and all(r is not None for r in results.values())
