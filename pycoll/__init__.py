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
import importlib.util as _importlib_util
import logging as _logging
import os as _os


def _check_built() -> None:
    """Name the source tree whose extensions are not built, before an import deep inside fails.

    A flat layout puts ``pycoll/`` at the repository root, so Python started
    there imports the source tree even when pycoll was installed elsewhere
    with ``pip install .`` (numpy and scipy refuse their source directories
    for the same reason).
    """
    compiled = ("pycoll._mpicall", "pycoll._resources", "pycoll._lane_reduce", "pycoll._lane_move",
                "pycoll._kernels.copy", "pycoll._kernels.reduce")
    missing = [name for name in compiled if _importlib_util.find_spec(name) is None]
    if missing:
        here = _os.path.dirname(_os.path.abspath(__file__))
        raise ImportError(
            f"pycoll is imported from {here}, where its compiled extensions "
            f"({', '.join(missing)}) are not built. In a source tree, build them with "
            "'pip install -e .' or 'python setup.py build_ext --inplace'; with pycoll "
            "installed by 'pip install .', start Python outside the source tree.",
            name=__name__, path=here)


_check_built()

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
