"""Build pycoll's Cython kernels.

Each .pyx in pycoll/_kernels/ becomes one extension module; the C loops in
pycoll/_kernels/src/ are compiled into the arithmetic module. The build
targets the x86-64 baseline (never -march=native): the loops choose AVX-512
or AVX2 at run time (src/clones.h, src/half.c), so one build runs on every
x86-64 machine.

Rebuild after editing a .pyx or a .c file:  python setup.py build_ext --inplace
"""
import os

from Cython.Build import cythonize
from setuptools import Extension, setup

KERNELS = os.path.join("pycoll", "_kernels")
SRC = os.path.join(KERNELS, "src")

COMPILE_ARGS = [
    "-O3",
    # Every rank must compute the same bits as numpy and as every other
    # clone: no fused multiply-add, no value-changing optimisation.
    "-ffp-contract=off",
    "-fno-math-errno",
    "-Wno-unused-function",
]


def kernel(name, c_sources=()):
    return Extension(
        f"pycoll._kernels.{name}",
        [os.path.join(KERNELS, f"{name}.pyx"), *(os.path.join(SRC, c) for c in c_sources)],
        include_dirs=[SRC],
        depends=[os.path.join(SRC, h) for h in ("kernels.h", "clones.h")],
        extra_compile_args=COMPILE_ARGS,
    )


def module(name, c_sources=()):
    """An extension of pycoll's own: the C calls into the MPI library mpi4py
    loads at run time (no mpi.h here), and the lanes over them."""
    return Extension(
        f"pycoll.{name}", [os.path.join("pycoll", f"{name}.pyx"),
                           *(os.path.join(SRC, c) for c in c_sources)],
        include_dirs=[SRC],
        extra_compile_args=COMPILE_ARGS,
    )


MODULES = [
    module("_mpicall"),                                 # MPI's functions, called from C
    module("_resources", ["pages.c", "stream.c"]),      # tags, scratch, staged sends
    module("_lane_reduce"),                             # allreduce, reduce, scan, reduce_scatter
    module("_lane_move"),                               # broadcast, gather, scatter, ...
]

setup(
    ext_modules=cythonize(
        [kernel("reduce", ["loops.c", "half.c"]), kernel("copy", ["stream.c"]), *MODULES],
        compiler_directives={"language_level": 3},
    ),
    # The C files compile side by side (distutils threads): the install
    # takes about 50 s instead of 80 on two cores.
    options={"build_ext": {"parallel": os.cpu_count() or 1}},
)
