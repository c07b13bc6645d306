"""The progress queue and its handles, without MPI (Note [Issue order] and
Note [Waiting runs the queue] in pycoll/_async.py). The collectives' own
async tests run under mpiexec (group_async in mpi_cases.py)."""
import threading

import pytest

from pycoll import _async


@pytest.fixture
def progress(monkeypatch):
    monkeypatch.setattr(_async, "check_thread_level", lambda: None)   # no MPI here
    queue = _async.Progress("test")
    # Start the progress thread and let it fall asleep on an empty queue
    # (a wait with a timeout never runs the call itself).
    queue.submit(lambda: None, "start").wait(10)
    yield queue
    queue.close()


def recorder(log, k):
    def run():
        log.append((k, threading.current_thread()))
        return k
    return run


def test_a_waiter_runs_the_queue_up_to_its_call(progress):
    log = []
    handles = [progress.submit(recorder(log, k), f"call {k}", wake=False) for k in range(5)]
    assert handles[2].wait() == 2
    assert [k for k, _ in log] == [0, 1, 2]
    assert all(thread is threading.current_thread() for _, thread in log)
    assert not handles[3].done() and not handles[4].done()
    # What is left runs when asked, still in issue order.
    assert handles[4].wait() == 4
    assert [k for k, _ in log] == [0, 1, 2, 3, 4]


def test_the_progress_thread_runs_what_nobody_waits_for(progress):
    log = []
    handles = [progress.submit(recorder(log, k), f"call {k}") for k in range(3)]
    progress.drain()
    assert [h.done() for h in handles] == [True] * 3
    assert [k for k, _ in log] == [0, 1, 2]
    assert all(thread is progress._thread for _, thread in log)


def test_a_wait_with_a_timeout_only_waits(progress):
    log = []
    h = progress.submit(recorder(log, 0), "call", wake=False)
    with pytest.raises(TimeoutError, match="call has not finished after 0.05 s"):
        h.wait(0.05)
    assert log == [] and not h.done()
    assert h.wait() == 0 and h.done()


def test_a_blocking_call_behind_queued_ones_runs_them_on_its_thread(progress):
    log = []
    queued = [progress.submit(recorder(log, k), f"call {k}", wake=False) for k in range(2)]
    assert progress.call(recorder(log, 2), "blocking", async_op=False) == 2
    assert [k for k, _ in log] == [0, 1, 2]
    assert all(h.done() for h in queued)
    assert not progress.busy()


def test_errors_reach_the_waiter_of_their_call(progress):
    def fails():
        raise ValueError("call 0 failed")
    first = progress.submit(fails, "call 0", wake=False)
    second = progress.submit(lambda: "fine", "call 1", wake=False)
    assert second.wait() == "fine"          # ran call 0 on the way, kept its error for it
    with pytest.raises(ValueError, match="call 0 failed"):
        first.wait()


def test_an_interrupt_in_a_call_run_while_waiting_is_raised_there(progress):
    def interrupted():
        raise KeyboardInterrupt
    log = []
    first = progress.submit(interrupted, "call 0", wake=False)
    later = progress.submit(recorder(log, 1), "call 1", wake=False)
    with pytest.raises(KeyboardInterrupt):
        later.wait()
    with pytest.raises(KeyboardInterrupt):
        first.wait()
    # The queue is not left stuck: the progress thread takes the rest.
    assert later.wait(10) == 1
    assert log[0][1] is progress._thread


def test_every_waiter_gets_the_result(progress):
    gate = threading.Event()
    h = progress.submit(lambda: gate.wait(10) and "done", "slow")
    results = []
    waiters = [threading.Thread(target=lambda: results.append(h.wait())) for _ in range(4)]
    for t in waiters:
        t.start()
    gate.set()
    for t in waiters:
        t.join(10)
    assert results == ["done"] * 4


def test_done_callbacks_run_once_on_the_thread_that_finishes(progress):
    seen = []
    h = progress.submit(lambda: 7, "call", wake=False)
    h.add_done_callback(lambda hh: seen.append((hh.done(), threading.current_thread())))
    assert h.wait() == 7
    assert seen == [(True, threading.current_thread())]
    h.add_done_callback(lambda hh: seen.append("late"))
    assert seen[-1] == "late" and len(seen) == 2
