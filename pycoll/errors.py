"""The errors pycoll raises beyond TypeError and ValueError.

MismatchError      ranks disagree about a call: found by checks mode before
                   any message, or by a receive of the wrong length after
CollectiveTimeout  a call's deadline passed while waiting for a peer

Neither ends the job: library code never calls MPI_Abort and never exits.
After a CollectiveTimeout the communicator is broken (its messages can no
longer be matched), and the caller reports and ends the job, with
``comm.abort()`` or by exiting.
"""
from __future__ import annotations


class MismatchError(ValueError):
    """Ranks called collectives that do not match: raised on every rank by
    checks mode, before any message, or, with checks mode off, by a rank
    whose receive brought another length than it expected (wrong_length).

    ``records`` lists each rank's view of the call: {rank: {field: value}}.
    """

    def __init__(self, message: str, records: dict):
        super().__init__(message)
        self.records = records

    @classmethod
    def wrong_length(cls, rank: int, peer: int, collective: str, algorithm: str, step: int,
                     steps: int, got: int, expected: int) -> MismatchError:
        """What a rank raises when a message brought another number of
        bytes than its receive expected (Note [Message lengths] in
        pycoll/_p2p.py): the ranks disagree about the call, and checks mode
        is off. *got* is -1 for a longer message whose length MPI did not
        tell; ``records`` then holds None for it, and holds this rank's
        view only."""
        brought = f"{got} bytes" if got >= 0 else f"more than {expected} bytes"
        return cls(f"rank {rank} received {brought} from rank {peer} in {collective}"
                   f"({algorithm}), step {step} of {steps}, where it expected {expected}: the "
                   "ranks disagree about the call (a shape, or sizes=); checks mode "
                   "(pycoll.set_checks(True)) names every rank's values",
                   {rank: {"collective": collective, "algorithm": algorithm, "peer": peer,
                           "step": step, "received": got if got >= 0 else None,
                           "expected": expected}})


class CollectiveTimeout(TimeoutError):
    """A collective's deadline passed.

    rank        this rank
    peer        the rank it was waiting for (None if it waited on no one)
    collective  e.g. "allreduce"
    algorithm   e.g. "ring"
    step, steps how far the algorithm got, of how many steps
    waited      seconds since the call began
    """

    def __init__(self, rank: int, peer, collective: str, algorithm: str, step: int, steps: int,
                 waited: float):
        self.rank, self.peer, self.collective, self.algorithm = rank, peer, collective, algorithm
        self.step, self.steps, self.waited = step, steps, waited
        who = f"rank {peer}" if peer is not None else "the other ranks"
        super().__init__(f"rank {rank} waited {waited:.1f} s for {who} in {collective}({algorithm}), "
                         f"step {step} of {steps}")
