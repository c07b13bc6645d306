"""Asynchronous collectives: one progress thread per communicator.

Note [Issue order]: collectives must run in the same order on every rank.
A call with ``async_op=True`` checks its arguments on the caller's thread
(so bad input still raises before any message), then queues the rest of
the call and returns a Handle. The communicator's progress thread runs the
queue one call at a time, in the order the calls were issued. A blocking
call issued while earlier calls are still queued joins the queue and runs
in its turn; with nothing queued it runs on the caller's thread at once.
So every rank runs its collectives in issue order, and the tags the calls
take (Note [Tag discipline] in _comm.py) agree.

Note [Waiting runs the queue]: handing a call to the progress thread and
its result back costs two thread wake-ups, 10-15 µs each here. So a
thread that waits on a handle without a timeout runs the queued calls
itself, from the head of the queue up to its own, while no other thread
is running one: the calls still run one at a time, in issue order, so
nothing else changes; it is work the waiter would otherwise sleep
through. A blocking call behind queued ones does the same, without
waking the progress thread at all (``submit(wake=False)``: the thread
takes the call after the one it is running, if it is running one). A
handle the progress thread has already taken, or a wait with a timeout
(which must be able to give up), just waits. ``_runner`` is the ident
of the thread running a queued call, if any (the lanes of _lane_*.pyx
read it: a call runs on its lane only in its turn, ``in_turn``); it
keeps that place from one call to the next. An 8 B allreduce issued
async and waited at once took 44-48 µs before, 34-35 µs after (native:
3.8 µs; p = 2, MPICH, ``bench/latency.py --async``).

Communication overlaps the caller's work because everything that blocks
lets the GIL go: mpi4py's calls, the C calls of _mpicall.pyx and the
reduction kernels (from 64 KiB up).

Threads and MPI: the progress thread calls MPI while the caller's thread
may too (its own mpi4py calls, a blocking pycoll call that found the queue
empty), so asynchronous use needs MPI_THREAD_MULTIPLE, the level mpi4py
asks for by default; the first async call checks it. What is thread-safe:
issuing collectives on one communicator from one thread at a time (as MPI
requires), waiting on handles from any thread. What is not: touching an
async call's arrays before its handle's ``wait()`` returns.
"""
from __future__ import annotations

import collections
import datetime
import logging
import numbers
import threading
import _thread
from typing import TYPE_CHECKING

from pycoll._mpi import mpi

if TYPE_CHECKING:
    from pycoll._typing import Timeout

_callbacks_lock = threading.Lock()      # every Handle's done-callbacks and _finished


def as_seconds(timeout) -> float | None:
    """A timeout as seconds: None, any real number >= 0 (a numpy scalar
    too, not a bool), or a datetime.timedelta as torch.distributed takes."""
    if timeout is None:
        return None
    if isinstance(timeout, datetime.timedelta):
        timeout = timeout.total_seconds()
    elif isinstance(timeout, bool) or not isinstance(timeout, numbers.Real):
        raise TypeError(f"timeout must be a number of seconds, got {type(timeout).__name__}")
    if not timeout >= 0:
        raise ValueError(f"timeout must be >= 0 seconds, got {timeout}")
    return float(timeout)


class Handle:
    """An asynchronous collective: ``wait()`` returns its result (or raises
    its error), ``done()`` says whether it has finished."""

    # A raw lock, held until the call finishes, is the gate waiters pass
    # (a threading.Event builds a Condition per handle: 3 µs of the call).
    __slots__ = ("_gate", "_finished", "_result", "_error", "name", "_callbacks", "_progress",
                 "_queued")

    def __init__(self, name: str = "collective", progress: "Progress | None" = None):
        self._gate = _thread.allocate_lock()
        self._gate.acquire()
        self._finished = False
        self._result = None
        self._error = None
        self.name = name
        self._callbacks: list = []
        self._progress = progress       # whose queue holds the call, if queued
        self._queued = False            # in that queue, not yet taken (under its lock)

    def done(self) -> bool:
        """Whether the call has finished (then wait() returns at once)."""
        return self._finished

    def wait(self, timeout: Timeout = None):
        """The result, once the call has run; TimeoutError if *timeout*
        (seconds, or a timedelta) passes first (the call itself goes on).
        Without a timeout this thread runs the queued calls up to this one
        itself when no other thread is running one
        (Note [Waiting runs the queue])."""
        seconds = as_seconds(timeout)
        if not self._finished:
            if seconds is None:
                if self._queued:
                    assert self._progress is not None       # (a queued call has one)
                    self._progress.run_until(self)
                self._gate.acquire()
            elif not self._gate.acquire(timeout=min(seconds, threading.TIMEOUT_MAX)):
                raise TimeoutError(f"{self.name} has not finished after {timeout} s")
            self._gate.release()        # for the next waiter
        if self._error is not None:
            raise self._error
        return self._result

    def add_done_callback(self, fn) -> None:
        """Call ``fn(handle)`` once the call has finished: on the thread that
        finishes it (the progress thread, or a thread waiting on a later
        call, Note [Waiting runs the queue]), or at once if it already has. fn
        should be quick and must not wait on this communicator's calls."""
        with _callbacks_lock:
            if not self._finished:
                self._callbacks.append(fn)
                return
        fn(self)

    def _finish(self, result=None, error=None) -> None:
        self._result, self._error = result, error
        with _callbacks_lock:
            self._finished = True
            callbacks, self._callbacks = self._callbacks, []
        self._gate.release()
        for fn in callbacks:
            try:
                fn(self)
            except Exception:           # a callback's bug must not stop the progress thread
                logging.getLogger("pycoll").exception("a done-callback of %s raised", self.name)

    def __repr__(self) -> str:
        return f"<pycoll.Handle {self.name} {'done' if self.done() else 'pending'}>"


class Progress:
    """The queue and thread that run one communicator's collectives in
    issue order (Note [Issue order])."""

    def __init__(self, name: str):
        self._name = name
        self._queue: collections.deque = collections.deque()
        self._cond = threading.Condition()
        self._pending = 0                   # queued or running
        self._thread: threading.Thread | None = None
        self._runner = None                 # the ident of the thread running a queued call
        self._closed = False

    def busy(self) -> bool:
        return self._pending > 0

    def submit(self, run, name: str, wake: bool = True) -> Handle:
        """Queue *run* (a function of no arguments); its result goes to the
        Handle. *wake* False leaves the progress thread asleep, for a
        caller that waits on the handle at once (it runs the call itself,
        or the progress thread does after the call it is running)."""
        handle = Handle(name, self)
        with self._cond:
            if self._closed:
                raise ValueError("this Communicator has been freed")
            if self._thread is None:
                check_thread_level()
                self._thread = threading.Thread(target=self._loop, name=f"pycoll-{self._name}",
                                                daemon=True)
                self._thread.start()
            self._queue.append((run, handle))
            handle._queued = True
            self._pending += 1
            if wake:
                self._cond.notify()
        return handle

    def in_turn(self) -> bool:
        """Whether a call may run now: nothing is queued or running, or
        this thread is running the queued calls, this call among them
        (as ``in_turn`` in _resources.pxd)."""
        return not self._pending or self._runner == threading.get_ident()

    def on_thread(self) -> bool:
        """Whether the caller is running a queued call (a queued task that
        runs a collective: it runs there, in its turn)."""
        return self._runner == threading.get_ident()

    def call(self, run, name: str, async_op: bool):
        """Run a collective: queued when async_op or when others are queued,
        else at once on this thread."""
        if self.on_thread():
            if not async_op:
                return run()
            handle = Handle(name)
            try:
                handle._finish(run())
            except BaseException as exc:
                handle._finish(error=exc)
            return handle
        if async_op:
            return self.submit(run, name)
        if self._pending:
            return self.submit(run, name, wake=False).wait()
        return run()

    def _take(self):
        """The call at the head of the queue, now this thread's to run
        (called under the lock)."""
        run, handle = self._queue.popleft()
        handle._queued = False
        self._runner = threading.get_ident()
        return run, handle

    def _done(self) -> None:
        with self._cond:
            self._runner = None
            self._pending -= 1
            self._cond.notify_all()

    def _loop(self) -> None:
        while True:
            with self._cond:
                while self._runner is not None or (not self._queue and not self._closed):
                    self._cond.wait()
                if not self._queue:
                    return
                run, handle = self._take()
            try:
                result = run()
            except BaseException as exc:      # handed to the waiter, never swallowed
                handle._finish(error=exc)
            else:
                handle._finish(result)
            finally:
                self._done()

    def run_until(self, handle: Handle) -> None:
        """Run queued calls on this thread, in issue order, up to and
        including *handle*'s, while no other thread is running one (Note
        [Waiting runs the queue]). The thread keeps the runner's place
        from one call to the next, so the progress thread sleeps on."""
        with self._cond:
            if self._runner is not None or not handle._queued:
                return
            run, taken = self._take()
        while True:
            try:
                result = run()
            except Exception as exc:          # the waiter of *taken* raises it
                taken._finish(error=exc)
            except BaseException as exc:      # KeyboardInterrupt: this thread's too
                taken._finish(error=exc)
                self._done()
                raise
            else:
                taken._finish(result)
            with self._cond:
                if taken is handle or not self._queue:
                    self._runner = None
                    self._pending -= 1
                    self._cond.notify_all()
                    return
                self._pending -= 1
                run, taken = self._take()

    def drain(self) -> None:
        """Wait until everything queued has run."""
        with self._cond:
            while self._pending:
                self._cond.wait()

    def close(self) -> None:
        """Run what is queued, then stop the thread."""
        self.drain()
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()


def check_thread_level() -> None:
    MPI = mpi()
    if MPI.Query_thread() < MPI.THREAD_MULTIPLE:
        raise RuntimeError(
            "async collectives need MPI initialised with MPI_THREAD_MULTIPLE (mpi4py's default); "
            f"this process has level {MPI.Query_thread()}. Leave mpi4py.rc.thread_level at "
            "'multiple' or initialise MPI with it.")
