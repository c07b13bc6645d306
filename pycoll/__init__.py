"""pycoll: collective communication algorithms for Python.

    import numpy as np, pycoll
    y = pycoll.allreduce(np.ones(4))          # under mpiexec -n P

Collectives are algorithms over mpi4py point-to-point messages; the
arithmetic runs in pycoll's Cython kernels. Importing pycoll does not import
mpi4py.MPI: MPI is initialised on first use of a communicator. pycoll
never prints: it logs to the "pycoll" logger (DEBUG: the algorithm and
segment size chosen for each new call signature, the calibration in use;
WARNING: a timed-out call breaking its communicator).
"""
import logging as _logging

from pycoll._async import Handle
from pycoll._dtypes import Op
from pycoll._memory import empty
from pycoll.api import (
    AVG, BAND, BOR, BXOR, MAX, MIN, PROD, SUM,
    Communicator, allgather, allreduce, alltoall, barrier, broadcast, gather, reduce,
    reduce_scatter, scan, scatter, set_checks,
)
from pycoll.errors import CollectiveTimeout, MismatchError

from pycoll.fusion import assign_buckets
from pycoll.fusion.manager import FusionManager

__version__ = "0.1.0"

_logging.getLogger(__name__).addHandler(_logging.NullHandler())

__all__ = [
    "Communicator", "Op", "SUM", "PROD", "MAX", "MIN", "AVG", "BAND", "BOR", "BXOR",
    "allreduce", "broadcast", "reduce", "gather", "scatter", "allgather", "reduce_scatter",
    "alltoall", "scan", "barrier", "FusionManager", "assign_buckets", "Handle", "set_checks",
    "MismatchError", "CollectiveTimeout", "empty",
]
