"""The benchmark harness's timing loop without MPI: which calls it makes,
in which order. (test_bench.py runs the CLI itself under mpiexec.)"""
from types import SimpleNamespace

from pycoll.bench.harness import measure_all


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


def test_rounds_rotate_the_order_of_the_cases():
    """Round k starts k cases further on, so that no case always follows
    the same one (a case timed after a larger one pays for its cache sweep)."""
    rec = Recorder()
    benches = {name: (SimpleNamespace(name=name, p=1, fill=lambda: None), None, 64)
                for name in ("float32", "float16", "bfloat16")}
    cases = [(name, "auto", False) for name in benches]
    args = SimpleNamespace(rounds=4, iters=1, warmup_iters=0, round_us=0, check=0)
    results = measure_all(rec, benches, cases, None, rec, rec, args)
    rounds = [rec.calls[k:k + 3] for k in range(0, len(rec.calls), 3)]
    names = [[case[0] for case in r] for r in rounds]
    assert names == [["float32", "float16", "bfloat16"], ["float16", "bfloat16", "float32"],
                     ["bfloat16", "float32", "float16"], ["float32", "float16", "bfloat16"]]
    # Every case is timed once per round and reported.
    assert set(results) == set(cases) and all(r is not None for r in results.values())
