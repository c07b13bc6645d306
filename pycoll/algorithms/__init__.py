"""One module per algorithm: ``<collective>_<algorithm>.py``.

Every module has the same small interface:

    run(task)               the algorithm, on this rank
    steps(p)                communication rounds on the critical path
    bytes_on_wire(n, p)     bytes one rank sends (the busiest rank), for an
                            n-byte message (n: the whole vector for
                            allreduce/broadcast/reduce; one rank's block for
                            the others)
    reduce_bytes(n, p)      bytes one rank pushes through the reduction kernel

and states the same numbers in its docstring, so the tuner and the README
read them from one place. ``REGISTRY[collective][name]`` is the module.

A module may also set ``PIECES = True``: run in place (send is data), it
only ever slices its vector and hands the slices to the Channel, and both
ends of every message address the same byte range of the vector. Such an
algorithm runs on a pycoll._pieces.Pieces (many arrays as one vector,
unpacked), which is how the FusionManager reduces a bucket without
copying it.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass

ALGORITHMS = {
    "allreduce": ("ring", "recursive_doubling", "rabenseifner", "tree"),
    "broadcast": ("binomial", "scatter_allgather", "pipeline"),
    "reduce": ("binomial", "rabenseifner"),
    "allgather": ("ring", "recursive_doubling", "bruck"),
    "reduce_scatter": ("ring", "recursive_halving"),
    "gather": ("binomial", "linear"),
    "scatter": ("binomial", "linear"),
    "alltoall": ("pairwise",),
    "scan": ("recursive_doubling", "linear"),
    "barrier": ("dissemination",),
}

REGISTRY = {
    collective: {name: importlib.import_module(f"{__name__}.{collective}_{name}") for name in names}
    for collective, names in ALGORITHMS.items()
}


@dataclass(slots=True)
class Task:
    """What one rank brings to one run of an algorithm (byte views only).

    ch        the Channel: step primitives, the reduction kernel, scratch
    rank, size, root
    itemsize  bytes per element: blocks of a vector are cut at elements
    send      this rank's input: read, never written (as MPI's sendbuf)
    data      the vector a reduction works in (allreduce, reduce, scan,
              reduce_scatter) and the broadcast buffer: uninitialised on entry
              unless it *is* send (in place), so an algorithm reads its own
              input from send the first time it touches a region, and from
              data after that. On exit: the result (allreduce, broadcast, the
              root's reduce); scratch otherwise
    out       the result buffer of gather (root), scatter, allgather,
              reduce_scatter, alltoall and scan
    counts    bytes of each rank's block (gather, scatter, allgather,
              reduce_scatter; alltoall: the blocks this rank sends)
    recv_counts  alltoall with sizes=: bytes of the block this rank
              receives from each rank; () when every block it receives
              is counts[rank] long
    exclusive scan only: exclude this rank's own contribution
    """

    ch: object
    rank: int
    size: int
    root: int = 0
    itemsize: int = 1
    data: object = None
    send: object = None
    out: object = None
    counts: tuple = ()
    recv_counts: tuple = ()
    exclusive: bool = False

    @property
    def displs(self) -> list:
        """Byte offset of each rank's block: the running sum of counts."""
        offsets, total = [], 0
        for c in self.counts:
            offsets.append(total)
            total += c
        return offsets
