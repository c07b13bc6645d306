"""Algorithm selection for algorithm="auto".

Note [Same choice everywhere]: the choice depends only on what every rank
of the call shares (collective, message size, process count) and on the
settings agreed when the Communicator was created, so every rank picks the
same algorithm. ``PYCOLL_ALGORITHM_<COLLECTIVE>=name`` overrides the rules.

These are simple size rules; the cost model of pycoll's performance work
replaces them.
"""
from __future__ import annotations

from pycoll.algorithms import ALGORITHMS

SMALL = 64 << 10          # latency-bound below this many bytes


def _rules(collective: str, n: int, p: int) -> str:
    """n: the vector's bytes (allreduce, broadcast, reduce, scan) or one
    rank's block (the others), as in the algorithms' cost terms."""
    small = n <= SMALL
    if collective == "allreduce":
        return "recursive_doubling" if small else "ring"
    if collective == "broadcast":
        return "binomial" if small or p <= 2 else "pipeline"
    if collective == "reduce":
        return "binomial" if small else "rabenseifner"
    if collective == "allgather":
        return "bruck" if small else "ring"
    if collective == "reduce_scatter":
        return "recursive_halving" if small else "ring"
    if collective in ("gather", "scatter"):
        return "binomial" if small else "linear"
    if collective == "scan":
        return "recursive_doubling" if small else "linear"
    return ALGORITHMS[collective][0]


def select(collective: str, n: int, p: int, settings) -> str:
    """The algorithm "auto" runs (Note [Same choice everywhere])."""
    return settings.algorithms.get(collective) or _rules(collective, n, p)


def check_settings(settings) -> None:
    """ValueError for an override naming no algorithm of its collective."""
    for collective, name in settings.algorithms.items():
        if collective not in ALGORITHMS:
            raise ValueError(f"PYCOLL_ALGORITHM_{collective.upper()}: no collective "
                             f"named {collective!r}")
        if name not in ALGORITHMS[collective]:
            raise ValueError(f"PYCOLL_ALGORITHM_{collective.upper()}={name}: {collective} "
                             f"has {', '.join(ALGORITHMS[collective])}")
