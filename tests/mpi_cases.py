"""Collective test cases, run on every rank (launched by mpirun.py).

    mpiexec -n P python -m mpi4py tests/mpi_cases.py GROUP

Each group runs a grid of calls. Every rank generates every rank's seeded
data itself, so it knows the expected result without communication; it
compares its own result bit for bit. Float data is chosen so that every
partial result is exact (small integers, powers of two), which makes the
expected bits independent of the order an algorithm combines in. Results
that must be identical everywhere are also hashed, and the hashes compared
across ranks at the end with mpi4py's own allgather (independent of pycoll).
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import importlib.util
import itertools
import os
import re
import sys
import time
import zlib

import numpy as np
from mpi4py import MPI

import pycoll
from data import (ALL_DTYPES, ARRAY_LIKES, HALF, ArrayInterface, assert_bitwise_equal,
                  assert_same_values, bf16, bits, combine, sample, writes_through)
from pycoll._dtypes import BY_NAME, Op
from pycoll._kernels.reduce import supports
from pycoll.algorithms import ALGORITHMS, REGISTRY

F32 = np.float32


# Note [Wide launches]
# ~~~~~~~~~~~~~~~~~~~~
# From p = WIDE on, a launch on a two-core machine puts three or four
# busy-polling ranks on each core: a call there costs milliseconds (about
# 20 ms at p = 8) where it costs microseconds at p = 2, and every rank that
# imports torch spends 2-3 s of CPU before its first call. So there the
# grids take half of each dimension that no schedule depends on: the
# (op, dtype) pairs, the fusion group's (dtype, strategy) pairs, the
# array-like forms, the random calls of the mixed group (Run.some); torch
# tensors are offered at p < WIDE only (Run.torch: a tensor's views do not
# change with p). What a schedule does depend on stays whole at every p:
# the algorithms, roots, counts around p, folds and segments. The kernels
# meet every pair in test_kernels.py, and every pair meets every algorithm
# at p = 1-4. On a machine with a core for each rank, PYCOLL_TESTS_WIDE=N
# moves the bound (a number above p runs every grid whole).
WIDE = int(os.environ.get("PYCOLL_TESTS_WIDE", "5"))


class Run:
    """One group's bookkeeping on one rank."""

    def __init__(self, comm):
        self.comm = comm
        self.p, self.r = comm.size, comm.rank
        self.digests = []
        self.count = 0
        # torch tensors are offered where importing torch is cheap enough
        self.torch = self.p < WIDE and importlib.util.find_spec("torch") is not None

    def some(self, items) -> list:
        """All of items at p < WIDE; from WIDE on every other one: the
        even-numbered at even p, the odd-numbered at odd p, so that p = 8
        and p = 5 or 7 take every item between them (Note [Wide launches])."""
        items = list(items)
        return items if self.p < WIDE else items[self.p % 2::2]

    def check(self, name, got, expected):
        assert_bitwise_equal(got, expected, name)
        self.count += 1

    def same_everywhere(self, name, y):
        y = np.asarray(y)
        h = hashlib.blake2b(bits(y).tobytes(), digest_size=12)
        h.update(f"{y.shape}{y.dtype}".encode())
        self.digests.append((name, h.hexdigest()))

    def finish(self):
        everyone = MPI.COMM_WORLD.allgather(self.digests)
        for i, (name, digest) in enumerate(self.digests):
            seen = {rank: d[i] for rank, d in enumerate(everyone)}
            assert all(v == (name, digest) for v in seen.values()), (
                f"{name}: results differ across ranks: {seen}")


@contextlib.contextmanager
def lanes_only(names, why, when=True):
    """While the block runs (and `when` holds), each of pycoll.api's
    functions in `names`, the general paths, raises AssertionError(why): a
    call that leaves its lane fails. They are restored however it ends."""
    import pycoll.api

    saved = {name: getattr(pycoll.api, name) for name in names}

    def refuse(*args, **kwargs):
        raise AssertionError(why)
    if when:
        for name in names:
            setattr(pycoll.api, name, refuse)
    try:
        yield
    finally:
        for name, general in saved.items():
            setattr(pycoll.api, name, general)


@contextlib.contextmanager
def own_segments(comm):
    """A communicator over comm's ranks that cuts messages into the
    library's own segments (the tuner's), not the tests' 256 bytes: a 2 MiB
    allreduce at p = 8 would otherwise take some 14,000 messages a rank."""
    sub = comm.split(0)
    sub._use_settings(dataclasses.replace(sub.settings, segment_bytes=None))
    try:
        yield sub
    finally:
        sub.free()


def seed_of(*parts) -> int:
    return zlib.crc32(repr(parts).encode())


def rank_data(dtype: str, shape, rank: int, seed: int, op: Op = Op.MAX) -> np.ndarray:
    """This rank's input: exact under SUM/AVG (small integers) and PROD
    (powers of two) for floats, the full range for integers."""
    rng = np.random.default_rng([seed, rank])
    dt = BY_NAME[dtype]
    shape = tuple(shape)
    size = int(np.prod(shape))
    if dt.kind == "c" and op is Op.PROD:
        # Gaussian integers +-(2+i), +-i(2+i): no product of them lies on an
        # axis (arctan(1/2) is no rational multiple of pi), so no partial
        # product has a zero part, whose sign would depend on the order.
        # complex64 holds a product of 16 of them exactly (5^8 < 2^24); the
        # ranks from 16 on hold 1+0j, which leaves every product as it is.
        if rank >= 16:
            return np.ones(shape, dt.numpy)
        return rng.choice([2 + 1j, -2 - 1j, -1 + 2j, 1 - 2j], size).astype(dt.numpy).reshape(shape)
    if dt.kind in "fc" and op in (Op.SUM, Op.AVG, Op.PROD):
        def part():
            if op is Op.PROD:
                return rng.choice([-2, -1, -0.5, 0.5, 1, 2], size)
            return rng.integers(-8, 9, size).astype(np.float64)
        x = part() + 1j * part() if dt.kind == "c" else part()
        return x.astype(dt.numpy).reshape(shape)
    if dt.kind in "fc":
        x = rng.standard_normal(size)
        if dt.kind == "c":
            x = x + 1j * rng.standard_normal(size)
        return x.astype(dt.numpy).reshape(shape)
    return sample(dtype, size, rng).reshape(shape)


def average(s: np.ndarray, k: int) -> np.ndarray:
    """pycoll's AVG division: half types in float32, complex by component."""
    if s.dtype.name in HALF:
        return (s.astype(F32) / F32(k)).astype(s.dtype)
    if s.dtype.kind == "c":
        out = np.empty_like(s)
        out.real = s.real / s.real.dtype.type(k)
        out.imag = s.imag / s.imag.dtype.type(k)
        return out
    return s / s.dtype.type(k)


def reduce_ranks(op: Op, xs) -> np.ndarray:
    acc = xs[0].copy()
    for x in xs[1:]:
        acc = combine(op, acc, x)
    return average(acc, len(xs)) if op is Op.AVG else acc


def special_data(dtype: str, seed: int, rank: int) -> np.ndarray:
    """Random values with NaN, +-inf, +-0.0 mixed in, and a NaN and signed
    zeros at fixed places."""
    x = sample(dtype, 257, np.random.default_rng([seed, rank]), special=True)
    x[:4] = np.array([np.nan, -0.0, 0.0, -0.0]).astype(x.dtype)
    return x


def unsigned_zeros(y: np.ndarray) -> np.ndarray:
    return np.where(y == 0, np.zeros_like(y), y)


def reduction_pairs():
    return [(op, dt) for op in Op for dt in ALL_DTYPES
            if (op is Op.AVG and BY_NAME[dt].kind in "fc")
            or (op is not Op.AVG and supports(op.kernel, BY_NAME[dt].code))]


FEW = [(Op.SUM, "float32"), (Op.MAX, "int16"), (Op.PROD, "bfloat16"), (Op.BXOR, "uint8"),
       (Op.AVG, "float64"), (Op.SUM, "complex64"), (Op.MIN, "float16")]


def counts_for(p):
    return sorted({0, 1, max(p - 1, 0), p + 1, 1000})


# ---------------------------------------------------------------------------
# Reductions


def allreduce_case(run, algo, op, dtype, shape):
    name = f"allreduce {algo} {op.value} {dtype} {shape}"
    seed = seed_of(name)
    xs = [rank_data(dtype, shape, i, seed, op) for i in range(run.p)]
    y = run.comm.allreduce(xs[run.r], op=op, algorithm=algo)
    run.check(name, y, reduce_ranks(op, xs))
    run.same_everywhere(name, y)


def reduce_case(run, algo, op, dtype, shape, root):
    name = f"reduce {algo} {op.value} {dtype} {shape} root {root}"
    seed = seed_of(name)
    xs = [rank_data(dtype, shape, i, seed, op) for i in range(run.p)]
    y = run.comm.reduce(xs[run.r], op=op, root=root, algorithm=algo)
    if run.r == root:
        run.check(name, y, reduce_ranks(op, xs))
    else:
        assert y is None, f"{name}: got {y!r} off the root"


def split_by(x: np.ndarray, p: int, sizes=None) -> list:
    """x's blocks along axis 0: np.array_split's, or of sizes[i] rows."""
    if sizes is None:
        return np.array_split(x, p, axis=0)
    return np.split(x, np.cumsum(sizes)[:-1], axis=0)


def uneven_sizes(p: int, rows: int, seed: int) -> list:
    """*rows* dealt to p ranks at random: some get none, one may get all."""
    rng = np.random.default_rng(seed)
    return np.bincount(rng.integers(0, p, rows), minlength=p).tolist()


def reduce_scatter_case(run, algo, op, dtype, shape, sizes=None):
    name = f"reduce_scatter {algo} {op.value} {dtype} {shape} sizes={sizes}"
    seed = seed_of(name)
    xs = [rank_data(dtype, shape, i, seed, op) for i in range(run.p)]
    y = run.comm.reduce_scatter(xs[run.r], op=op, algorithm=algo, sizes=sizes)
    run.check(name, y, split_by(reduce_ranks(op, xs), run.p, sizes)[run.r])


def scan_case(run, algo, op, dtype, shape, exclusive):
    name = f"scan {algo} {op.value} {dtype} {shape} exclusive={exclusive}"
    seed = seed_of(name)
    xs = [rank_data(dtype, shape, i, seed, op) for i in range(run.p)]
    y = run.comm.scan(xs[run.r], op=op, algorithm=algo, exclusive=exclusive)
    upto = run.r if exclusive else run.r + 1
    if upto == 0:
        assert y is None, f"{name}: rank 0 got {y!r}"
    else:
        run.check(name, y, reduce_ranks(op, xs[:upto]))


USER_OP = MPI.Op.Create(lambda a, b, datatype: None, commute=True)


def mpi_ops(run, comm):
    """mpi4py's ops reduce as pycoll's of the same name (MPI.SUM is
    pycoll.SUM) on every path: lanes, the general path, async, checks
    mode against a rank that names the op, a FusionManager."""
    p, r = run.p, run.r
    x = np.arange(5, dtype=np.int32) * (r + 1) - 2
    for name in ("SUM", "PROD", "MAX", "MIN", "BAND", "BOR", "BXOR"):
        ours, theirs = getattr(pycoll, name), getattr(MPI, name)
        for repeat in range(3):                 # the first call makes the lane
            run.check(f"allreduce MPI.{name}", comm.allreduce(x, theirs),
                      comm.allreduce(x, ours))
            run.check(f"reduce_scatter MPI.{name}", pycoll.reduce_scatter(x, theirs, comm),
                      pycoll.reduce_scatter(x, ours, comm))
            run.check(f"scan MPI.{name}", comm.scan(x, theirs), comm.scan(x, ours))
            got, want = comm.reduce(x, theirs, root=p - 1), comm.reduce(x, ours, root=p - 1)
            assert (got is None) == (r != p - 1)
            if got is not None:
                run.check(f"reduce MPI.{name}", got, want)
        run.check(f"allreduce MPI.{name} async", comm.allreduce(x, theirs, async_op=True).wait(),
                  comm.allreduce(x, ours))
        run.check(f"allreduce MPI.{name} rabenseifner", comm.allreduce(x, theirs, "rabenseifner"),
                  comm.allreduce(x, ours, "rabenseifner"))
    only = np.ones(7, np.int16)                 # a signature called with MPI.SUM alone
    for repeat in range(2):
        run.check("allreduce MPI.SUM alone", comm.allreduce(only, MPI.SUM), only * p)
    assert ("allreduce", only.dtype, only.shape, pycoll.SUM, "auto", None) in comm._plans, \
        "MPI.SUM's call did not keep its plan under pycoll.SUM"
    pycoll.set_checks(True)
    try:
        run.check("checks mode: MPI.SUM and 'sum'", comm.allreduce(x, MPI.SUM if r % 2 else "sum"),
                  sum(np.arange(5, dtype=np.int32) * (k + 1) - 2 for k in range(p)))
        if p > 1:
            exc = expect(pycoll.MismatchError, "op=max", comm.allreduce, x,
                         MPI.MAX if r == 0 else pycoll.SUM)
            assert "op=sum" in str(exc), exc
    finally:
        pycoll.set_checks(False)
    fm = pycoll.FusionManager(op=MPI.SUM, comm=comm)
    arrays = [np.full(3, r + 1.0), np.full(2, r + 2.0)]
    fm.allreduce(arrays)
    run.check("FusionManager(op=MPI.SUM)", arrays[1], np.full(2, p * (p + 3) / 2))
    run.count += 1


def torch_ops(run, comm):
    """torch.distributed's ops reduce as pycoll's of the same name
    (dist.ReduceOp.SUM, which equals 0, is pycoll.SUM; so is a
    dist.ReduceOp object wrapping it), on lanes, the general path, async
    and a FusionManager; PREMUL_SUM names itself in a ValueError."""
    import torch
    import torch.distributed as dist
    p, r = run.p, run.r
    x = np.arange(5, dtype=np.float32) * (r + 1) - 2
    ints = np.arange(5, dtype=np.int32) * (r + 1) - 2
    pairs = [("SUM", "sum", x), ("AVG", "avg", x), ("PRODUCT", "prod", x), ("MIN", "min", x),
             ("MAX", "max", x), ("BAND", "band", ints), ("BOR", "bor", ints), ("BXOR", "bxor", ints)]
    for name, ours, data in pairs:
        member = getattr(dist.ReduceOp, name)
        for theirs in (member, dist.ReduceOp(member)):
            want = comm.allreduce(data, ours)
            for repeat in range(3):             # the first call makes the lane
                run.check(f"allreduce ReduceOp.{name}", comm.allreduce(data, theirs), want)
            run.check(f"allreduce ReduceOp.{name} torch", pycoll.allreduce(
                torch.from_numpy(data.copy()), op=theirs, comm=comm), want)
            run.check(f"allreduce ReduceOp.{name} async",
                      comm.allreduce(data, theirs, async_op=True).wait(), want)
            run.check(f"reduce_scatter ReduceOp.{name}", comm.reduce_scatter(data, theirs),
                      comm.reduce_scatter(data, ours))
            got = comm.reduce(data, theirs, root=p - 1)
            assert (got is None) == (r != p - 1)
            if got is not None:
                run.check(f"reduce ReduceOp.{name}", got, comm.reduce(data, ours, root=p - 1))
            else:
                comm.reduce(data, ours, root=p - 1)
    assert ("allreduce", x.dtype, x.shape, pycoll.SUM, "auto", None) in comm._plans, \
        "ReduceOp.SUM's call did not keep its plan under pycoll.SUM"
    fm = pycoll.FusionManager(op=dist.ReduceOp.AVG, comm=comm)
    arrays = [np.full(3, r + 1.0), np.full(2, r + 2.0)]
    fm.allreduce(arrays)
    run.check("FusionManager(op=ReduceOp.AVG)", arrays[1], np.full(2, (p + 3) / 2))
    for premul in (dist.ReduceOp.PREMUL_SUM, dist._make_nccl_premul_sum(2.0)):
        exc = expect(ValueError, "op is ReduceOp.PREMUL_SUM, which pycoll has no kernel for; "
                     "expected one of sum", comm.allreduce, x, premul)
        assert "or ReduceOp.SUM, ReduceOp.AVG" in str(exc), exc
    expect(TypeError, "AVG needs a floating or complex dtype, got int32",
           comm.allreduce, ints, dist.ReduceOp.AVG)
    run.count += 1


def group_reductions(run):
    p = run.p
    pairs = run.some(reduction_pairs())
    counts = counts_for(p)
    for algo in ALGORITHMS["allreduce"]:
        for op, dtype in pairs:
            allreduce_case(run, algo, op, dtype, (p + 1,))
        for n in counts:
            for op, dtype in FEW:
                allreduce_case(run, algo, op, dtype, (n,))
        allreduce_case(run, algo, Op.SUM, "float32", (3, 5, 2))
        allreduce_case(run, algo, Op.SUM, "float64", ())
    for algo in ALGORITHMS["reduce"]:
        for root in range(p):
            reduce_case(run, algo, Op.SUM, "float32", (p + 1, 2), root)
        for op, dtype in pairs:
            reduce_case(run, algo, op, dtype, (p + 1,), p - 1)
        for n in counts:
            for op, dtype in FEW:
                reduce_case(run, algo, op, dtype, (n,), p // 2)
    for algo in ALGORITHMS["reduce_scatter"]:
        for op, dtype in pairs:
            reduce_scatter_case(run, algo, op, dtype, (p + 1,))
        for n in counts:
            for op, dtype in FEW:
                reduce_scatter_case(run, algo, op, dtype, (n, 3))
        # sizes=: any rows per rank (none, all on one rank, many segments)
        for n in counts:
            sizes = uneven_sizes(p, n, seed_of("reduce_scatter sizes", algo, n))
            for op, dtype in FEW[:3]:
                reduce_scatter_case(run, algo, op, dtype, (n, 3), sizes)
        reduce_scatter_case(run, algo, Op.SUM, "bfloat16", (p + 2,), [0] * (p - 1) + [p + 2])
    for algo in ALGORITHMS["scan"]:
        for exclusive in (False, True):
            for op, dtype in pairs:
                scan_case(run, algo, op, dtype, (3,), exclusive)
            for n in counts:
                for op, dtype in FEW[:4]:
                    scan_case(run, algo, op, dtype, (n,), exclusive)


# ---------------------------------------------------------------------------
# Data movement


def broadcast_case(run, algo, dtype, shape, root, in_place):
    name = f"broadcast {algo} {dtype} {shape} root {root} in_place={in_place}"
    x = rank_data(dtype, shape, root, seed_of(name))
    if run.r == root:
        mine = x.copy()
    elif in_place:
        mine = np.zeros_like(x)
    else:
        mine = None
    y = run.comm.broadcast(mine, root=root, algorithm=algo)
    if mine is not None:
        assert y is mine, f"{name}: broadcast must return x itself"
    run.check(name, y, x)
    run.same_everywhere(name, y)


def gather_case(run, algo, dtype, shape, root, sizes=None):
    name = f"gather {algo} {dtype} {shape} root {root} sizes={sizes}"
    seed = seed_of(name)
    shapes = [shape if sizes is None else (sizes[i], *shape[1:]) for i in range(run.p)]
    xs = [rank_data(dtype, s, i, seed) for i, s in enumerate(shapes)]
    y = run.comm.gather(xs[run.r], root=root, algorithm=algo, sizes=sizes)
    if run.r == root:
        run.check(name, y, np.concatenate([np.atleast_1d(x) for x in xs]))
    else:
        assert y is None, f"{name}: got {y!r} off the root"


def scatter_case(run, algo, dtype, shape, root, give_x_everywhere=False, sizes=None):
    name = f"scatter {algo} {dtype} {shape} root {root} sizes={sizes}"
    x = rank_data(dtype, shape, root, seed_of(name))
    mine = x if run.r == root else (np.zeros(3) if give_x_everywhere else None)
    y = run.comm.scatter(mine, root=root, algorithm=algo, sizes=sizes)
    run.check(name, y, split_by(x, run.p, sizes)[run.r])


def allgather_case(run, algo, dtype, shape, sizes=None):
    name = f"allgather {algo} {dtype} {shape} sizes={sizes}"
    seed = seed_of(name)
    shapes = [shape if sizes is None else (sizes[i], *shape[1:]) for i in range(run.p)]
    xs = [rank_data(dtype, s, i, seed) for i, s in enumerate(shapes)]
    y = run.comm.allgather(xs[run.r], algorithm=algo, sizes=sizes)
    run.check(name, y, np.concatenate([np.atleast_1d(x) for x in xs]))
    run.same_everywhere(name, y)


def alltoall_case(run, algo, dtype, shape, sizes=None):
    """*sizes*: None, or the p x p matrix (rank i's x then has sum(sizes[i]) rows)."""
    name = f"alltoall {algo} {dtype} {shape} sizes={sizes}"
    seed = seed_of(name)
    shapes = [shape if sizes is None else (sum(sizes[i]), *shape[1:]) for i in range(run.p)]
    xs = [rank_data(dtype, s, i, seed) for i, s in enumerate(shapes)]
    y = run.comm.alltoall(xs[run.r], algorithm=algo, sizes=sizes)
    expected = np.concatenate([split_by(x, run.p, None if sizes is None else sizes[i])[run.r]
                               for i, x in enumerate(xs)])
    run.check(name, y, expected)


def uneven_matrix(p: int, rows: int, seed: int) -> list:
    """alltoall's sizes=: each rank's *rows* dealt to p ranks at random."""
    return [uneven_sizes(p, rows, seed + i) for i in range(p)]


def group_movement(run):
    p = run.p
    counts = counts_for(p)
    uneven = [(3 * i + 1) % 4 for i in range(p)]          # includes zero-length ranks
    for algo in ALGORITHMS["broadcast"]:
        for root in range(p):
            broadcast_case(run, algo, "float32", (p + 1, 3), root, in_place=root % 2 == 0)
        for dtype in ALL_DTYPES:
            broadcast_case(run, algo, dtype, (p + 1,), p - 1, in_place=False)
        for n in counts:
            broadcast_case(run, algo, "bfloat16", (n,), p // 2, in_place=True)
            broadcast_case(run, algo, "int64", (n, 2), 0, in_place=False)
        broadcast_case(run, algo, "complex128", (), 0, in_place=False)
    for algo in ALGORITHMS["gather"]:
        for root in range(p):
            gather_case(run, algo, "float32", (2, 3), root)
        for dtype in ALL_DTYPES:
            gather_case(run, algo, dtype, (p + 1,), p - 1)
        for n in counts:
            gather_case(run, algo, "int16", (n, 2), p // 2)
        gather_case(run, algo, "bfloat16", (1, 5), 0, sizes=uneven)
        gather_case(run, algo, "float64", (), p - 1)                   # scalars
    for algo in ALGORITHMS["scatter"]:
        for root in range(p):
            scatter_case(run, algo, "float32", (p + 3, 2), root, give_x_everywhere=root == 1)
        for dtype in ALL_DTYPES:
            scatter_case(run, algo, dtype, (2 * p + 1,), p - 1)
        for n in counts:
            scatter_case(run, algo, "uint16", (n, 3), p // 2)
            sizes = uneven_sizes(p, n, seed_of("scatter sizes", algo, n))
            scatter_case(run, algo, "complex64", (n, 2), p - 1 - p // 2, sizes=sizes)
        scatter_case(run, algo, "float16", (p + 2,), 0, sizes=[p + 2] + [0] * (p - 1))
    for algo in ALGORITHMS["allgather"]:
        for dtype in ALL_DTYPES:
            allgather_case(run, algo, dtype, (2,))
        for n in counts:
            allgather_case(run, algo, "float32", (n, 2))
        allgather_case(run, algo, "float16", (1, 3), sizes=uneven)
        allgather_case(run, algo, "int32", ())
    for algo in ALGORITHMS["alltoall"]:
        for dtype in ALL_DTYPES:
            alltoall_case(run, algo, dtype, (2 * p + 1,))
        for n in counts:
            alltoall_case(run, algo, "float64", (n, 2))
            alltoall_case(run, algo, "int8", (n, 3), uneven_matrix(p, n, seed_of("alltoall", n)))
        # one rank sends all it has to one other, the rest send nothing
        only = [[0] * p for _ in range(p)]
        only[p - 1][0] = p + 2
        alltoall_case(run, algo, "bfloat16", (1,), only)
    for algo in ALGORITHMS["barrier"]:
        run.comm.barrier()


# ---------------------------------------------------------------------------
# Layouts, out=, special values, communicators


def group_special(run):
    comm, p, r = run.comm, run.p, run.r

    # Note [Bitwise-identical results]: data with NaNs, infinities and signed
    # zeros that is not exact, so that the order of combination matters.
    # Every rank must get the same bits; the values are checked where they
    # cannot depend on the order.
    for dtype, op in run.some(itertools.product(
            ("float16", "bfloat16", "float32", "float64", "complex64"),
            (Op.SUM, Op.PROD, Op.MAX, Op.MIN, Op.AVG))):
        if op in (Op.MAX, Op.MIN) and dtype == "complex64":
            continue
        for algo in ALGORITHMS["allreduce"]:
            name = f"special allreduce {algo} {op.value} {dtype}"
            xs = [special_data(dtype, seed_of(name), i) for i in range(p)]
            y = comm.allreduce(xs[r], op=op, algorithm=algo)
            run.same_everywhere(name, y)
            with np.errstate(all="ignore"):
                expected = reduce_ranks(op, xs)
            if op in (Op.MAX, Op.MIN):
                # order-free except the sign of a tie between -0.0 and +0.0
                assert_same_values(unsigned_zeros(y), unsigned_zeros(expected), name)
            elif dtype in ("float32", "float64"):
                # NaNs and infinities do not depend on the order
                for pattern in (np.isnan, np.isposinf, np.isneginf):
                    assert np.array_equal(pattern(y), pattern(expected)), f"{name}: {pattern.__name__}"
            run.count += 1

    # Out of place the first reduction receives straight into the result
    # (Note [Reduce in place] in _p2p.py); in place it goes through scratch.
    # Both must give the same bits, NaN payloads and signed zeros included.
    for dtype in ("bfloat16", "float32"):
        for collective in ("allreduce", "reduce"):
            for algo in ALGORITHMS[collective]:
                name = f"in place vs not {collective} {algo} {dtype}"
                x = special_data(dtype, seed_of(name), r)
                # A NaN whose payload names the rank: a sum keeps its left
                # operand's, so swapped operands show.
                quiet = 0x7fc00000 if dtype == "float32" else 0x7fc0
                bits(x)[4] = quiet | (r + 1)
                call = getattr(comm, collective)
                apart = call(x, op=Op.SUM, algorithm=algo)
                inplace = x.copy()
                call(inplace, op=Op.SUM, algorithm=algo, out=inplace)
                if collective == "allreduce" or r == 0:
                    assert bits(apart).tobytes() == bits(inplace).tobytes(), name
                    run.count += 1

    # accumulate="float32": one rounding at the end instead of one per step.
    for algo in ALGORITHMS["allreduce"]:
        x = np.full(4, 1.0 if r == 0 else 2.0 ** -9, dtype=bf16())
        exact = F32(1.0) + F32(2.0 ** -9) * (p - 1)
        y = comm.allreduce(x, algorithm=algo, accumulate="float32")
        run.check(f"accumulate {algo}", y, np.full(4, exact, dtype=F32).astype(bf16()))
        run.same_everywhere(f"accumulate {algo}", y)
        y = comm.allreduce(x, op=pycoll.AVG, algorithm=algo, accumulate="float32")
        run.check(f"accumulate avg {algo}", y, np.full(4, exact / F32(p), F32).astype(bf16()))
    for algo in ALGORITHMS["reduce_scatter"]:
        x = np.full((p, 2), 3.0 if r == 0 else 2.0 ** -9, dtype=np.float16)
        exact = F32(3.0) + F32(2.0 ** -9) * (p - 1)
        y = comm.reduce_scatter(x, algorithm=algo, accumulate="float32")
        run.check(f"accumulate reduce_scatter {algo}", y, np.full((1, 2), exact, F32).astype(np.float16))
    x = np.full(3, 1.0 if r == 0 else 2.0 ** -9, dtype=bf16())
    y = comm.reduce(x, root=p - 1, accumulate="float32")
    if r == p - 1:
        run.check("accumulate reduce", y, np.full(3, F32(1.0) + F32(2.0 ** -9) * (p - 1), F32).astype(bf16()))
    y = comm.scan(x, accumulate="float32")
    run.check("accumulate scan", y, np.full(3, F32(1.0) + F32(2.0 ** -9) * r, F32).astype(bf16()))

    # Non-contiguous inputs and out= views, in place.
    base = np.arange(4 * 6 * (r + 1), dtype=np.float64).reshape(-1, 6)[: 4]
    views = {"strided": base[:, ::2], "fortran": np.asfortranarray(base), "reversed": base[::-1]}
    for label, x in views.items():
        xs = [np.arange(4 * 6 * (i + 1), dtype=np.float64).reshape(-1, 6)[: 4] for i in range(p)]
        if label == "strided":
            xs = [v[:, ::2] for v in xs]
        elif label == "reversed":
            xs = [v[::-1] for v in xs]
        for algo in ALGORITHMS["allreduce"]:
            run.check(f"allreduce {label} {algo}", comm.allreduce(x, algorithm=algo), sum(xs))
        run.check(f"reduce_scatter {label}", comm.reduce_scatter(x), np.array_split(sum(xs), p)[r])
        run.check(f"allgather {label}", comm.allgather(x), np.concatenate(xs))
        run.check(f"alltoall {label}", comm.alltoall(x),
                  np.concatenate([np.array_split(v, p)[r] for v in xs]))
        target = np.zeros((2 * x.shape[0], 2 * x.shape[1]))
        out = target[::2, ::2] if label != "fortran" else np.asfortranarray(np.zeros(x.shape))
        got = comm.allreduce(x, out=out)
        assert got is out, f"allreduce out={label}: must return out"
        run.check(f"allreduce out={label}", out, sum(xs))
        if label != "fortran":
            assert not target[1::2].any() and not target[:, 1::2].any(), "wrote outside out"
    # in place: out is x
    for algo in ALGORITHMS["allreduce"]:
        x = np.arange(10, dtype=np.int32) * (r + 1)
        y = comm.allreduce(x, out=x, algorithm=algo)
        assert y is x
        run.check(f"allreduce in place {algo}", x, np.arange(10, dtype=np.int32) * sum(range(1, p + 1)))
    x = np.arange(6.0).reshape(2, 3) * (r + 1)
    y = comm.reduce(x, root=0, out=x)
    if r == 0:
        assert y is x
        run.check("reduce in place", x, np.arange(6.0).reshape(2, 3) * sum(range(1, p + 1)))
    # broadcast into a non-contiguous x
    target = np.zeros((6, 4), np.float32)
    x = target[::2, 1::2] if r != 0 else np.arange(6, dtype=np.float32).reshape(3, 2)
    comm.broadcast(x, root=0)
    run.check("broadcast strided x", x, np.arange(6, dtype=np.float32).reshape(3, 2))
    if r != 0:
        assert target[1::2].sum() == 0 and target[:, ::2].sum() == 0, "wrote outside x"
    # a header too long for the binary word (7 dimensions): a second message
    deep = np.arange(2 * 3 * 2 * 1 * 2 * 1 * 2, dtype=np.int16).reshape(2, 3, 2, 1, 2, 1, 2)
    got = comm.broadcast(deep.copy() if r == p - 1 else None, root=p - 1)
    run.check("broadcast 7-d", got, deep)
    got = comm.scatter(np.concatenate([deep] * p) if r == 0 else None, root=0)
    run.check("scatter 7-d", got, deep)

    # scatter into an out= view: each rank's block of 2p rows is 2 rows
    out = np.zeros((4, 4))[::2, ::2]
    got = comm.scatter(np.arange(4.0 * p).reshape(2 * p, 2) if r == 0 else None, root=0, out=out)
    assert got is out
    run.check("scatter out view", out, np.arange(4.0 * p).reshape(2 * p, 2)[2 * r:2 * r + 2])

    # comm= forms: None (COMM_WORLD default), an mpi4py comm (wrapped once), methods.
    y = pycoll.allreduce(np.array([r]), comm=None)
    run.check("default comm", y, np.array([sum(range(p))]))
    y = pycoll.allreduce(np.array([r]), comm=MPI.COMM_WORLD)
    run.check("mpi4py comm", y, np.array([sum(range(p))]))
    assert pycoll.api._comm_of(MPI.COMM_WORLD) is pycoll.api._comm_of(MPI.COMM_WORLD), "not cached"
    # an mpi4py communicator per step, freed by its owner: the wrapper's
    # Dup goes with it (Note [Wrapped communicators] in pycoll/api.py)
    before = []
    for step in range(5):
        mine = MPI.COMM_WORLD.Split(r % 2, r)
        run.check(f"per-step mpi4py comm {step}", pycoll.allreduce(np.ones(2), comm=mine),
                  np.full(2, float(mine.size)))
        before.append(pycoll.api._comm_of(mine))
        mine.Free()
    assert [c.freed for c in before] == [True] * 4 + [False], [c.freed for c in before]
    assert sum(theirs == MPI.COMM_NULL for theirs, _ in pycoll.api._wrapped.values()) == 1
    expect(ValueError, "comm is MPI.COMM_NULL", pycoll.Communicator, MPI.COMM_NULL)
    # A failure making rank 0's settings that is not a bad setting raises
    # there and a RuntimeError elsewhere: no rank waits for the broadcast.
    from pycoll import tuning
    load = tuning.load_params
    def broken(*args):
        raise OSError("disk on fire")
    tuning.load_params = broken if r == 0 else load
    try:
        if r == 0:
            expect(OSError, "disk on fire", pycoll.Communicator)
        else:
            expect(RuntimeError, "rank 0 could not make its settings: OSError: disk on fire",
                   pycoll.Communicator)
    finally:
        tuning.load_params = load
    expect(ValueError, "comm is MPI.COMM_NULL", pycoll.allreduce, np.ones(2), comm=mine)
    expect(TypeError, "intracommunicator, got Comm", pycoll.Communicator, MPI.Comm(MPI.COMM_WORLD))
    # split, context manager, free
    color = r % 2
    sub = comm.split(color, key=-r)
    members = [i for i in range(p) if i % 2 == color]
    assert sub.size == len(members) and sub.rank == len(members) - 1 - members.index(r)
    y = sub.allreduce(np.array([r]))
    run.check("split allreduce", y, np.array([sum(members)]))
    sub.free()
    sub.free()
    try:
        sub.allreduce(np.ones(1))
    except ValueError as exc:
        assert "freed" in str(exc)
    else:
        raise AssertionError("a freed communicator must refuse to run")
    expect(ValueError, "got -5", comm.split, -5)
    # past a C int: mpi4py's OverflowError before, now a ValueError naming it
    expect(ValueError, f"color must be in [0, 2**31) or MPI.UNDEFINED, got {2 ** 31}",
           comm.split, 2 ** 31)
    expect(ValueError, f"key must fit a C int, got {-2 ** 40}", comm.split, 0, -2 ** 40)
    expect(TypeError, "must be ints", comm.split, 1.5)
    expect(TypeError, "must be ints", comm.split, 0, "a")
    nothing = comm.split(MPI.UNDEFINED if r == 0 else 1)
    assert (nothing is None) == (r == 0)
    if nothing is not None:
        nothing.free()
    with pycoll.Communicator(MPI.COMM_WORLD) as c2:
        run.check("context manager", c2.allgather(np.array([r])), np.arange(p))
    assert c2.freed

    # Python objects with the buffer protocol, and torch tensors when present
    # (below p = WIDE: Note [Wide launches]).
    y = comm.allreduce(bytearray([r, 1]))
    run.check("bytearray", y, np.array([sum(range(p)) % 256, p], np.uint8))
    if run.torch:
        import torch
        t = torch.arange(6, dtype=torch.float32).reshape(2, 3) * (r + 1)
        y = comm.allreduce(t)
        run.check("torch allreduce", y, np.arange(6, dtype=F32).reshape(2, 3) * sum(range(1, p + 1)))
        t = torch.full((4,), float(r), dtype=torch.bfloat16)
        y = comm.allreduce(t)
        run.check("torch bf16", y, np.full(4, sum(range(p)), bf16()))
        out = torch.zeros(2, 3)
        comm.allreduce(torch.ones(2, 3), out=out)
        assert (out == p).all(), "out= into a torch tensor"
        t = torch.arange(12, dtype=torch.float64).reshape(3, 4).t()           # non-contiguous
        run.check("torch strided", comm.allgather(t), np.concatenate([t.numpy()] * p))
        bt = torch.zeros(3) if r else torch.tensor([1.0, 2.0, 3.0])
        assert comm.broadcast(bt, root=0) is bt and bt.tolist() == [1.0, 2.0, 3.0]


# ---------------------------------------------------------------------------
# Bad input: every rank raises before any message is sent, then carries on.


def expect(exc_type, match, fn, *args, **kwargs):
    try:
        fn(*args, **kwargs)
    except exc_type as exc:
        assert match in str(exc), f"{exc_type.__name__} {str(exc)!r} does not say {match!r}"
        return exc
    raise AssertionError(f"{fn.__name__}{args} did not raise {exc_type.__name__} ({match})")


def group_errors(run):
    comm, p, r = run.comm, run.p, run.r
    f = np.ones(4, np.float32)
    i = np.ones(4, np.int32)
    before = f.copy()
    cases = [
        (ValueError, "unknown op 'mean'", comm.allreduce, f, "mean"),
        (TypeError, "op must be", comm.allreduce, f, 3),
        (ValueError, "op is MPI.LAND, which pycoll has no kernel for", comm.allreduce, i, MPI.LAND),
        (ValueError, "op is MPI.MAXLOC", pycoll.reduce, f, MPI.MAXLOC, 0, comm),
        (ValueError, "op is a user-defined MPI op", comm.reduce_scatter, f, USER_OP),
        (TypeError, "AVG needs a floating or complex dtype, got int32", comm.allreduce, i, pycoll.AVG),
        (TypeError, "MAX is not defined for complex64", comm.allreduce, f.astype(np.complex64), "max"),
        (TypeError, "BXOR is not defined for float32", comm.reduce, f, pycoll.BXOR),
        (TypeError, "dtype object", comm.allreduce, np.array([1, None])),
        (TypeError, "which pycoll does not support", comm.allgather,
         np.zeros(2, [("a", "i4"), ("b", "f4")])),
        (TypeError, "x.astype('float32') converts it", comm.allreduce, f.astype(">f4")),
        (TypeError, "got list", comm.allreduce, [1.0, 2.0]),
        (ValueError, f"root {p} is out of range for {p} ranks", comm.reduce, f, "sum", p),
        (ValueError, "root must be an int", comm.gather, f, "0"),
        (ValueError, "root -1 is out of range", comm.broadcast, f, -1),
        (ValueError, "unknown allreduce algorithm 'fast'", comm.allreduce, f, "sum", "fast"),
        (TypeError, "algorithm must be a string", comm.allgather, f, 2),
        (ValueError, "expected (4,)", comm.allreduce, f, "sum", "auto", np.zeros(5, np.float32)),
        (TypeError, "out has dtype float64, expected float32", comm.allreduce, f, "sum", "auto",
         np.zeros(4)),
        (ValueError, "accumulate must be None or 'float32'", comm.allreduce, f, "sum", "auto", None,
         "float64"),
        (TypeError, "accumulate='float32' applies to", comm.allreduce, i, "sum", "auto", None, "float32"),
        (ValueError, f"sizes must hold {p} non-negative ints", comm.allgather, f, "auto", [1] * (p + 1)),
        (ValueError, f"sizes[{r}] is 3", comm.gather, f, 0, "auto", [3] * p),
        (ValueError, "at least one dimension", comm.reduce_scatter, np.float32(1)),
        (ValueError, "at least one dimension", comm.alltoall, np.float64(1)),
        # a numpy scalar is read (as a 0-d array) but cannot be written
        (ValueError, "out is read-only (numpy scalars are immutable", comm.allreduce, np.float32(1),
         "sum", "auto", np.float32(0)),
        (ValueError, "x is read-only (numpy scalars are immutable", comm.broadcast, np.float64(r)),
        (ValueError, "arrays[1] is read-only (numpy scalars are immutable",
         pycoll.FusionManager(Op.SUM, comm=comm).allreduce, [np.ones(2), np.float64(1)]),
        (TypeError, "exclusive must be a bool", comm.scan, f, "sum", "yes"),
    ]
    ro = np.zeros(4, np.float32)
    ro.setflags(write=False)
    cases.append((ValueError, "out is read-only", comm.allreduce, f, "sum", "auto", ro))
    cases.append((ValueError, "out is read-only", comm.reduce, f, "sum", 0, "auto",
                  ro if r == 0 else None))
    cases += [
        (ValueError, "timeout must be >= 0 seconds, got -1", comm.allreduce, f, "sum", "auto", None,
         None, False, -1),
        (TypeError, "timeout must be a number of seconds, got str", comm.barrier, False, "soon"),
        (ValueError, "unknown scatter algorithm 'ring'", comm.scatter, f, 0, "ring"),
        (ValueError, f"x has 4 rows on rank {r}, sizes[{r}] is 0", comm.allgather, f, "auto", [0] * p),
        # mpi4py's sentinels: IN_PLACE once raised "out has dtype float32,
        # expected uint8", and BOTTOM reduced 0 bytes at address 0
        (TypeError, "x is MPI.IN_PLACE; for a call in place, pass the array as both x and out",
         comm.allreduce, MPI.IN_PLACE, "sum", "auto", f),
        (TypeError, "out is MPI.IN_PLACE", comm.reduce_scatter, f, "sum", "auto", MPI.IN_PLACE),
        (TypeError, "x is MPI.BOTTOM; pycoll takes arrays", comm.allgather, MPI.BOTTOM),
        # on/off arguments are bools: "no" was true (a Handle, autotune on)
        (TypeError, "async_op must be a bool, got str", comm.allreduce, f, "sum", "auto", None,
         None, "no"),
        (TypeError, "async_op must be a bool, got str", pycoll.broadcast, f, 0, comm, "auto", "no"),
        (TypeError, "async_op must be a bool, got float", comm.barrier, 0.5),
        (TypeError, "autotune must be a bool, got str", pycoll.Communicator, comm, "no"),
        (TypeError, "enabled must be a bool, got str", pycoll.set_checks, "no"),
        (TypeError, "autotune must be a bool, got str", lambda: pycoll.FusionManager(
            comm=comm, autotune="no")),
    ]
    for exc_type, match, fn, *args in cases:
        if fn == comm.reduce and args[-1] is None and r != 0:
            continue            # the root's own out: only the root raises
        snapshots = [(a, a.copy()) for a in args if isinstance(a, np.ndarray)]
        expect(exc_type, match, fn, *args)
        for a, copy in snapshots:
            assert np.array_equal(a, copy, equal_nan=a.dtype.kind in "fc"), f"{match}: wrote into an argument"
        run.count += 1
    assert (f == before).all() and not ro.any(), "bad input wrote into a buffer"
    assert run.count >= min(25, len(cases)), run.count
    # A false async_op runs the call blocking whether or not its lane is
    # ready: "" took the lane of a signature called before and raised a
    # TypeError on a new one.
    for i, falsy in enumerate(("", None, 0, np.False_)):
        for repeat in range(2):             # a new signature, then its lane
            fresh = np.full(11 + i, 2.0)
            y = comm.allreduce(fresh, async_op=falsy)
            run.check(f"async_op={falsy!r} call {repeat}", y, fresh * p)
    if r == 0:
        os.write(2, f"bad-input cases: {run.count}\n".encode())

    # A root that equals a cached call's int root (1.0 == True == 1) is
    # still checked (Note [Equal keys] in api.py); a numpy integer is a root.
    root = min(1, p - 1)
    rooted = [("broadcast", comm.broadcast, pycoll.broadcast, lambda: f.copy(), ()),
              ("reduce", comm.reduce, pycoll.reduce, lambda: f, ("sum",)),
              ("gather", comm.gather, pycoll.gather, lambda: f, ()),
              ("scatter", comm.scatter, pycoll.scatter, lambda: np.ones((p, 2), np.float32), ())]
    for name, method, function, make, op in rooted:
        for call in (method, lambda x, *a, **k: function(x, *a, comm=comm, **k)):
            expected = call(make(), *op, root=root)
            for same in (np.int64(root), np.intc(root)):
                got = call(make(), *op, root=same)
                assert (got is None) == (expected is None), (name, same)
                if got is not None:
                    run.check(f"{name} numpy root", got, expected)
            for bad in (float(root), bool(root)):
                snapshot = make().copy()
                x = make()
                expect(ValueError, f"root must be an int in [0, {p}), got {bad!r}", call, x, *op,
                       root=bad)
                assert np.array_equal(x, snapshot), f"{name} root={bad!r} wrote into x"
                run.count += 1

    # accumulate spelt numpy's way is "float32": the same bits, checks mode
    # agreeing with a rank that writes "float32", a FusionManager's too
    half = (np.arange(6) / 7 + r).astype(bf16())
    want = comm.allreduce(half, accumulate="float32")
    for spelling in (np.float32, np.dtype(np.float32), "f4"):
        for repeat in range(2):                 # the lane from the second call
            run.check(f"accumulate={spelling!r}", comm.allreduce(half, accumulate=spelling), want)
    pycoll.set_checks(True)
    try:
        run.check("checks mode: accumulate np.float32 and 'float32'",
                  comm.allreduce(half, accumulate=np.float32 if r % 2 else "float32"), want)
    finally:
        pycoll.set_checks(False)
    assert pycoll.FusionManager(comm=comm, accumulate=np.float32).accumulate == "float32"
    expect(ValueError, "accumulate must be None or 'float32', got <class 'numpy.float64'>",
           comm.allreduce, half, accumulate=np.float64)
    # async_op None, 0 and 1 by their truth, on the general path and the lanes
    for repeat in range(3):
        for value, waits in ((None, False), (0, False), (1, True), (np.False_, False)):
            y = comm.allreduce(np.full(3, 1.0), async_op=value)
            run.check(f"async_op={value!r}", y.wait() if waits else y, np.full(3, float(p)))
    mpi_ops(run, comm)
    run.check("numpy scalar x", comm.allreduce(np.float32(r)), np.array(sum(range(p)), np.float32))
    run.check("numpy scalar x, 0-d out", comm.allreduce(np.int16(1), out=np.zeros((), np.int16)),
              np.array(p, np.int16))

    # A timeout is any real number of seconds, or a timedelta (torch's)
    import datetime
    for seconds in (np.float32(60), np.int64(60), datetime.timedelta(minutes=1), 60):
        for algorithm in ("auto", "rabenseifner"):          # a lane, the general path
            y = comm.allreduce(f, algorithm=algorithm, timeout=seconds)
            run.check(f"timeout={seconds!r}", y, f * p)
    expect(TypeError, "timeout must be a number of seconds, got bool", comm.allreduce, f,
           timeout=np.True_)
    expect(ValueError, "timeout must be >= 0 seconds, got -1.0", comm.allreduce, f,
           timeout=datetime.timedelta(seconds=-1))

    # So are sizes= and scan's exclusive= that equal a cached call's.
    rows = np.ones((r + 1, 2), np.float32)
    sizes = list(range(1, p + 1))
    for fn in (comm.allgather, lambda x, sizes: comm.gather(x, 0, sizes=sizes)):
        expected = fn(rows, sizes=sizes)
        got = fn(rows, sizes=np.array(sizes))
        if got is not None:
            run.check("gather numpy sizes", got, expected)
        for bad in ([float(s) for s in sizes], [True] * p):
            expect(ValueError, f"sizes must be a sequence of {p} ints", fn,
                   rows if bad[0] is not True else rows[:1], sizes=bad)
            run.count += 1
    comm.scan(f, exclusive=True)
    comm.scan(f, exclusive=np.True_)
    for bad in (1, 0):
        expect(TypeError, "exclusive must be a bool, got int", comm.scan, f, exclusive=bad)
        run.count += 1

    split_sizes_cases(run)
    alltoall_sizes_cases(run)

    # The root's bad input reaches ranks with x=None through the header.
    bad = np.array([object()]) if r == 0 else None
    exc = expect(TypeError, "root:", comm.broadcast, bad, 0)
    assert "dtype object" in str(exc)
    exc = expect(ValueError, "root:", comm.scatter, np.float32(1) if r == 0 else None, 0)
    assert "at least one dimension" in str(exc)
    # A non-root whose x does not match takes part, then raises.
    x = np.zeros(3) if r == 0 else np.zeros(5, np.float32)
    if r == 0:
        comm.broadcast(x, root=0)
    else:
        expect(TypeError, "x has dtype float32, expected float64", comm.broadcast, x, 0)
    # After all that, every rank still agrees on the tags: a real collective works.
    y = comm.allreduce(np.array([r + 1.0]))
    run.check("after errors", y, np.array([p * (p + 1) / 2]))
    run.same_everywhere("after errors", y)


def split_sizes_cases(run):
    """scatter's and reduce_scatter's sizes= (the counts of MPI's Scatterv
    and Reduce_scatter): any form of a sequence of ints, an iterator too
    (gather's and allgather's as well); a plan per sizes; bad sizes raise
    on every rank before any message (a root's through the header), the
    caller's buffers untouched; an async call keeps the sizes it was
    issued with."""
    comm, p, r = run.comm, run.p, run.r
    rows = [(2 * i + 1) % 3 for i in range(p)]          # 1, 0, 2, 1, 0, ...
    total = sum(rows)
    x = np.arange(total * 2, dtype=np.float32).reshape(total, 2) + 1
    mine = split_by(x, p, rows)[r]
    forms = (rows, tuple(rows), np.array(rows), np.array(rows, np.uint8), iter(rows),
             (k for k in rows), map(int, rows), rows)       # two of each collective
    for i, form in enumerate(forms):
        label = f"sizes as {type(form).__name__}"
        # one call per form (an iterator is read once), each collective in turn
        call = i % 4
        want = split_by(x * p, p, rows)[r]
        if call == 0:
            run.check(f"reduce_scatter {label}", comm.reduce_scatter(x, sizes=form), want)
        elif call == 1:
            run.check(f"scatter {label}", comm.scatter(x if r == 0 else None, sizes=form), mine)
        elif call == 2:
            run.check(f"allgather {label}", comm.allgather(mine, sizes=form), x)
        else:
            got = pycoll.gather(mine, 0, comm, sizes=form)
            if r == 0:
                run.check(f"gather {label}", got, x)
        run.count += 1
    # one plan per sizes: the same shape split two ways, then array_split's
    for sizes in (rows, rows[::-1], None, rows):
        want = split_by(x * p, p, sizes)[r]
        for repeat in range(2):
            run.check(f"reduce_scatter sizes={sizes} call {repeat}",
                      pycoll.reduce_scatter(x, comm=comm, sizes=sizes), want)
            run.check(f"scatter sizes={sizes} call {repeat}",
                      pycoll.scatter(x if r == p - 1 else None, p - 1, comm, sizes=sizes),
                      split_by(x, p, sizes)[r])
    # out= of this rank's block
    out = np.full((rows[r], 2), -1, np.float32)
    assert comm.reduce_scatter(x, out=out, sizes=rows) is out
    run.check("reduce_scatter sizes out=", out, split_by(x * p, p, rows)[r])
    out = np.full((rows[r], 2), -1, np.float32)
    assert comm.scatter(x if r == 0 else None, out=out, sizes=rows) is out
    run.check("scatter sizes out=", out, mine)
    # async: the sizes as issued, whatever the list holds later (checks
    # mode reads them in the call's turn)
    for checks in (False, True):
        pycoll.set_checks(checks)
        try:
            sizes = list(rows)
            handles = [comm.reduce_scatter(x, sizes=sizes, async_op=True),
                       comm.scatter(x if r == 0 else None, sizes=sizes, async_op=True)]
            sizes.reverse()
            run.check(f"async reduce_scatter sizes checks={checks}", handles[0].wait(),
                      split_by(x * p, p, rows)[r])
            run.check(f"async scatter sizes checks={checks}", handles[1].wait(), mine)
        finally:
            pycoll.set_checks(False)

    # bad sizes: every rank raises before any message, x untouched
    snapshot = x.copy()
    bad = [
        (f"sizes must hold {p} non-negative ints, got {(1,) * (p + 1)}", [1] * (p + 1)),
        (f"sizes must hold {p} non-negative ints", [-1] + [0] * (p - 2) + [total + 1]),
        (f"sizes must be a sequence of {p} ints", [float(k) for k in rows]),
        (f"sizes must be a sequence of {p} ints", "12"),
        (f"sizes must be a sequence of {p} ints", 3),
        (f"sizes must sum to the {total} rows of x, got {rows[:-1] + [rows[-1] + 1]} "
         f"(sum {total + 1})", rows[:-1] + [rows[-1] + 1]),
    ]
    for match, sizes in bad:
        expect(ValueError, match, comm.reduce_scatter, x, sizes=sizes)
        # scatter: the root's bad sum reaches the others through the header
        root_only = "sum to" in match
        exc = expect(ValueError, match, comm.scatter, x if r == 0 else None, sizes=sizes)
        assert str(exc).startswith("root: ") == root_only, str(exc)
        assert np.array_equal(x, snapshot), f"sizes={sizes!r} wrote into x"
        run.count += 2
    expect(ValueError, f"expected ({rows[r]}, 2)", comm.reduce_scatter, x, sizes=rows,
           out=np.zeros((rows[r] + 1, 2), np.float32))
    # a scatter's out is checked against the root's header: it takes part, then raises
    expect(ValueError, f"expected ({rows[r]}, 2)", comm.scatter, x if r == 0 else None,
           sizes=rows, out=np.zeros((rows[r] + 1, 2), np.float32))
    run.check("after bad sizes", comm.reduce_scatter(x, sizes=rows), split_by(x * p, p, rows)[r])


def alltoall_sizes_cases(run):
    """alltoall's sizes= (a p x p matrix, as MPI's Alltoallv counts): as a
    nested list, a 2-d integer array, tuples or iterators; a plan per
    matrix; a bad matrix raises on every rank before any message; an
    async call keeps the matrix it was issued with."""
    comm, p, r = run.comm, run.p, run.r
    matrix = [[(2 * i + j) % 3 for j in range(p)] for i in range(p)]
    xs = [np.arange(sum(line) * 2, dtype=np.int32).reshape(-1, 2) + 100 * i
          for i, line in enumerate(matrix)]
    want = np.concatenate([split_by(xs[i], p, matrix[i])[r] for i in range(p)])
    for form in (matrix, np.array(matrix), tuple(map(tuple, matrix)),
                 iter([iter(line) for line in matrix]), np.array(matrix).T.T):
        label = f"alltoall sizes as {type(form).__name__}"
        run.check(label, comm.alltoall(xs[r], sizes=form), want)
        run.count += 1
    transposed = [list(line) for line in zip(*matrix)]
    for sizes in (matrix, transposed, matrix):              # one plan each
        mine = np.arange(sum(sizes[r]) * 2, dtype=np.int32).reshape(-1, 2) + 100 * r
        theirs = [np.arange(sum(sizes[i]) * 2, dtype=np.int32).reshape(-1, 2) + 100 * i
                  for i in range(p)]
        run.check(f"alltoall sizes={sizes}", pycoll.alltoall(mine, comm=comm, sizes=sizes),
                  np.concatenate([split_by(theirs[i], p, sizes[i])[r] for i in range(p)]))
    out = np.full_like(want, -1)
    assert comm.alltoall(xs[r], out=out, sizes=matrix) is out
    run.check("alltoall sizes out=", out, want)
    for checks in (False, True):
        pycoll.set_checks(checks)
        try:
            sizes = [list(line) for line in matrix]
            handle = comm.alltoall(xs[r], sizes=sizes, async_op=True)
            sizes.reverse()                     # after issuing: the call keeps its matrix
            sizes[0].append(1)
            run.check(f"async alltoall sizes checks={checks}", handle.wait(), want)
        finally:
            pycoll.set_checks(False)
    snapshot = xs[r].copy()
    for sizes in ([line[:-1] for line in matrix] if p > 1 else [[]], matrix[:-1] or [[1, 2]],
                  [[-1] * p] * p, sum(matrix, []), "ab", 3, [["1"] * p] * p):
        expect(ValueError, f"sizes must be a {p} x {p} matrix of non-negative ints", comm.alltoall,
               xs[r], sizes=sizes)
        run.count += 1
    grown = [line[:-1] + [line[-1] + 1] for line in matrix]
    expect(ValueError, f"sizes[{r}] must sum to the {sum(matrix[r])} rows of x on rank {r}",
           comm.alltoall, xs[r], sizes=grown)
    expect(ValueError, f"expected ({len(want)}, 2)", comm.alltoall, xs[r], sizes=matrix,
           out=np.zeros((len(want) + 1, 2), np.int32))
    assert np.array_equal(xs[r], snapshot), "bad sizes wrote into x"
    run.check("after bad alltoall sizes", comm.alltoall(xs[r], sizes=matrix), want)


def group_settings(run):
    """PYCOLL_* settings: rank 0's win, on every rank."""
    comm = run.comm
    from pycoll import tuning
    assert comm.settings.segment_bytes == int(os.environ.get("EXPECT_SEGMENT", "0")), comm.settings
    expected = os.environ.get("EXPECT_ALGORITHM")
    assert tuning.select("allreduce", 8, comm.size, comm.settings) == expected
    y = comm.allreduce(np.arange(100.0))
    run.check("settings allreduce", y, np.arange(100.0) * comm.size)


def group_lane(run):
    """Repeated calls: the second call of a signature runs in the C lane
    (pycoll/_lane_reduce.pyx, pycoll/_lane_move.pyx) when it applies; every call must agree with the
    oracle and across ranks, whichever path took it."""
    comm, p, r = run.comm, run.p, run.r
    lanes = 0
    for algo in ("recursive_doubling", "tree", "auto"):
        for op, dtype in run.some(reduction_pairs()):
            for repeat in range(3):
                name = f"lane {algo} {op.value} {dtype} call {repeat}"
                xs = [rank_data(dtype, (3,), i, seed_of(name), op) for i in range(p)]
                out = np.empty(3, BY_NAME[dtype].numpy) if repeat == 2 else None
                y = comm.allreduce(xs[r], op=op, algorithm=algo, out=out)
                run.check(name, y, reduce_ranks(op, xs))
                run.same_everywhere(name, y)
                if out is not None:
                    assert y is out, name
            plan = comm._plans[("allreduce", xs[r].dtype, xs[r].shape, op, algo, None)]
            lanes += plan.lane is not None
    # in place, and the cases the lane must leave to the Python path
    x = np.arange(4.0) * (r + 1)
    for _ in range(3):
        x = np.arange(4.0) * (r + 1)
        assert comm.allreduce(x, out=x) is x
        run.check("lane in place", x, np.arange(4.0) * (p * (p + 1) // 2))
    # Out of place the lane receives straight into out, in place into
    # scratch: the same bits either way (a NaN payload naming the rank
    # shows swapped operands).
    for algo in ("recursive_doubling", "tree"):
        x = np.array([0, 1.5, -0.0], np.float32)
        bits(x)[0] = 0x7fc00000 | (r + 1)
        for _ in range(3):
            apart = comm.allreduce(x, algorithm=algo)
            inplace = x.copy()
            comm.allreduce(inplace, algorithm=algo, out=inplace)
            assert bits(apart).tobytes() == bits(inplace).tobytes(), f"lane in place vs not {algo}"
        run.count += 1
    buf = np.zeros(8)
    for _ in range(3):
        y = comm.allreduce(np.arange(4.0), out=buf[::2])
        run.check("lane strided out", buf[::2], np.arange(4.0) * p)
        assert not buf[1::2].any()
    for _ in range(3):
        view = np.arange(8.0)[::2]
        run.check("lane strided x", comm.allreduce(view), np.arange(8.0)[::2] * p)
    shared = np.arange(6.0)
    for _ in range(2):
        shared[:] = np.arange(6.0)
        y = comm.allreduce(shared[:4], out=shared[2:])        # out overlaps x
        run.check("lane overlap", y, np.arange(4.0) * p)
    ro = np.zeros(4)
    ro.setflags(write=False)
    for _ in range(2):
        expect(ValueError, "out is read-only", comm.allreduce, np.ones(4), "sum", "auto", ro)
    expected_lanes = comm.transport is not None and p > 0
    assert (lanes > 0) == expected_lanes, (lanes, comm.transport_info)
    run.count += 1
    broadcast_lane_cases(run)
    alltoall_lane_cases(run)
    entries_take_plain_calls(run)
    array_like_lane_cases(run)
    reduce_lane_cases(run)
    scan_lane_cases(run)
    widened_lane_cases(run)
    overlapped_allgather_cases(run)
    partial_overlap_cases(run)
    allgather_lane_cases(run)
    gather_lane_cases(run)
    sizes_lane_cases(run)
    split_sizes_lane_cases(run)
    own_block_lane_cases(run)
    scatter_lane_cases(run)
    reduce_scatter_lane_cases(run)
    ring_allreduce_lane_cases(run)
    empty_lane_cases(run)
    deadline_lane_cases(run)
    solo_lane_cases(run)
    barrier_lane_cases(run)
    one_plan_per_algorithm_cases(run)


def deadline_lane_cases(run):
    """allreduce, reduce, reduce_scatter, gather, allgather and alltoall
    with timeout= on their lanes (Note [Lane deadlines] in
    pycoll/_mpicall.pyx): odd ranks pass a timeout, even ones do not, in the
    same calls; once the lanes exist no rank may reach the general path,
    and the results are the plain calls'."""
    comm, p, r = run.comm, run.p, run.r
    if comm.transport is None:
        return
    kwargs = {"timeout": 60.0} if r % 2 else {}
    why = "a call with a deadline left its lane"
    for op, dtype in ((Op.SUM, "float64"), (Op.AVG, "bfloat16"), (Op.MAX, "int32")):
        for algo in ("recursive_doubling", "tree"):
            for repeat in range(3):
                name = f"deadline lane {op.value} {dtype} {algo} call {repeat}"
                xs = [rank_data(dtype, (4,), i, seed_of(name), op) for i in range(p)]
                # the reduce_scatter lane (every block non-empty: 2 <= p <= 4
                # here): the ring, or recursive halving
                rs = "recursive_halving" if algo == "tree" else "ring"
                with lanes_only(("_allreduce", "_reduce", "_reduce_scatter"), why, when=repeat):
                    y = comm.allreduce(xs[r], op=op, algorithm=algo, **kwargs)
                    z = comm.reduce(xs[r], op=op, root=p - 1, algorithm="binomial", **kwargs)
                    w = comm.reduce_scatter(xs[r], op=op, algorithm=rs, **kwargs) if 2 <= p <= 4 else None
                run.check(name, y, reduce_ranks(op, xs))
                if w is not None:
                    run.check(f"{name} reduce_scatter {rs}", w,
                              np.array_split(reduce_ranks(op, xs), p)[r])
                if r == p - 1:
                    run.check(f"{name} reduce", z, reduce_ranks(op, xs))
                else:
                    assert z is None, name
    expect(ValueError, "timeout must be >= 0 seconds, got -1", comm.allreduce,
           np.ones(4), "sum", "recursive_doubling", None, None, False, -1)

    # gather, allgather, alltoall, broadcast and scatter: their lanes keep
    # the deadline too (a gather's lane wants all p blocks within the
    # tests' 256 B segment).
    if p < 2:
        return                              # no lanes for these at p = 1
    movers = ("gather", "allgather", "alltoall", "broadcast", "scatter")
    root = p - 1
    for dtype, shape in (("int16", (p + 1,)), ("bfloat16", (p + 1,)), ("float32", (p,))):
        for repeat in range(3):
            name = f"deadline lane {dtype} call {repeat}"
            xs = [rank_data(dtype, shape, i, seed_of(name)) for i in range(p)]
            b = xs[r].copy() if r == root else np.zeros_like(xs[r])
            everyone = np.concatenate(xs)
            with lanes_only(movers, why, when=repeat):
                g = comm.gather(xs[r], root=root, algorithm="binomial", **kwargs)
                ag = {algo: comm.allgather(xs[r], algorithm=algo, **kwargs)
                      for algo in ("ring", "recursive_doubling", "bruck")}
                a2a = comm.alltoall(xs[r], **kwargs)
                assert comm.broadcast(b, root=root, **kwargs) is b, name
                # inline on the tree; linear at p > 2: the word, then the data
                sc = {algo: comm.scatter(everyone if r == root else None, root=root,
                                         algorithm=algo, **kwargs)
                      for algo in ("binomial", "linear")}
            run.check(f"{name} broadcast", b, xs[root])
            for algo, y in sc.items():
                run.check(f"{name} scatter {algo}", y, np.array_split(everyone, p)[r])
            for algo, y in ag.items():
                run.check(f"{name} allgather {algo}", y, everyone)
            if r == root:
                run.check(f"{name} gather", g, everyone)
            else:
                assert g is None, name
            run.check(f"{name} alltoall", a2a,
                      np.concatenate([np.array_split(x, p)[r] for x in xs]))
    # A receiver's lane meeting another signature hands the call (and its
    # deadline) to the general path, which raises after taking part.
    if r == root:
        comm.broadcast(np.ones(p + 1, np.float32), root=root, **kwargs)
    else:
        mine = np.zeros(p + 1, np.int16)
        expect(TypeError, "x has dtype int16, expected float32", comm.broadcast, mine, root,
               **kwargs)
        assert not mine.any(), "a mismatching x was written"
    for _ in range(2):
        b = np.arange(p + 1, dtype=np.int16) if r == root else np.zeros(p + 1, np.int16)
        assert comm.broadcast(b, root=root, **kwargs) is b
        run.check("broadcast lane after a mismatch", b, np.arange(p + 1, dtype=np.int16))


def barrier_lane_cases(run):
    """The barrier's lane (pycoll/_lanes.py make_barrier): once made, no
    call reaches the general path, with or without a timeout; it meets an
    async barrier (the general path, on the progress thread) on another
    rank; and it waits for the last rank to arrive."""

    comm, p, r = run.comm, run.p, run.r
    for repeat in range(3):
        kwargs = {"timeout": 60.0} if repeat == 2 and r % 2 else {}
        # (no lanes without a transport)
        with lanes_only(("_barrier",), "a barrier left its lane",
                        when=repeat and comm.transport is not None):
            assert comm.barrier(**kwargs) is None
    for _ in range(2):                      # the last rank on the general path, the others on the lane
        if r == p - 1:
            comm.barrier(async_op=True).wait()
        else:
            comm.barrier()
    if p > 1:
        if r == 0:
            time.sleep(0.3)
        start = time.monotonic()
        comm.barrier()
        waited = time.monotonic() - start
        if r != 0:
            assert waited > 0.2, f"rank {r} left the barrier after {waited:.3f} s, before rank 0 came"
    lanes_were_taken(run, ("barrier-lane",), "barrier lane")


def solo_lane_cases(run):
    """At p = 1 every collective's lane gives back a copy of x (pycoll/_lanes.py,
    Note [Solo lanes]): once the lanes exist no call reaches the general
    path, with or without a timeout, out= or AVG."""
    comm = run.comm
    if run.p != 1 or comm.transport is None:
        return
    names = ("_allreduce", "_reduce", "_reduce_scatter", "gather", "allgather", "alltoall",
             "scatter")
    for dtype, shape in (("float32", (5,)), ("bfloat16", (2, 3)), ("int16", (7,)),
                         ("complex64", (3,)), ("float64", (0,))):
        x = rank_data(dtype, shape, 0, seed_of(f"solo {dtype}"))
        ops = (Op.SUM, Op.AVG) if x.dtype.kind in "fcV" or dtype == "bfloat16" else (Op.SUM, Op.MAX)
        for repeat in range(3):
            kwargs = {"timeout": 30.0} if repeat == 2 else {}
            with lanes_only(names, "a call at p = 1 left its lane", when=repeat):
                results = {f"allreduce {op.value}": comm.allreduce(x, op=op, **kwargs) for op in ops}
                results.update({f"reduce {op.value}": comm.reduce(x, op=op, **kwargs) for op in ops})
                results["reduce_scatter"] = comm.reduce_scatter(x, **kwargs)
                for name in ("gather", "allgather", "alltoall", "scatter"):
                    results[name] = getattr(comm, name)(x, **kwargs)
                out = np.empty_like(x)
                assert comm.allgather(x, out=out, **kwargs) is out
                results["allgather out"] = out
            for name, y in results.items():
                assert y is not x, name
                run.check(f"solo {dtype} {name} call {repeat}", y, x)


def empty_lane_cases(run):
    """Gather, allgather and alltoall of empty blocks (no rows, or rows of
    no elements) on their empty lanes (pycoll/_lanes.py, Note [Empty lanes]):
    the right shape and dtype, a given out returned, and odd ranks passing
    a timeout in the same calls (their lanes keep a deadline), their tags
    still in step."""
    comm, p, r = run.comm, run.p, run.r
    root = p - 1
    for shape in ((0,), (0, 3), (2, 0)):
        x = np.zeros(shape, np.float32)
        everyone = np.concatenate([x] * p)
        mine = np.concatenate([np.array_split(x, p, axis=0)[r]] * p)
        for repeat in range(3):
            name = f"empty {shape} call {repeat}"
            general = {"timeout": 60.0} if repeat == 1 and r % 2 == 1 else {}
            for algo in ("ring", "recursive_doubling", "bruck"):
                run.check(f"{name} allgather {algo}", comm.allgather(x, algorithm=algo, **general),
                          everyone)
            y = comm.gather(x, root=root, **general)
            if r == root:
                run.check(f"{name} gather", y, everyone)
            else:
                assert y is None, name
            if repeat == 2:
                out = np.empty_like(mine)
                assert comm.alltoall(x, out=out) is out, name
                run.check(f"{name} alltoall out", out, mine)
            else:
                run.check(f"{name} alltoall", comm.alltoall(x, **general), mine)
            for op in (Op.SUM, Op.AVG):
                for algo in ("ring", "recursive_doubling", "rabenseifner", "tree"):
                    run.check(f"{name} allreduce {op.value} {algo}",
                              comm.allreduce(x, op=op, algorithm=algo, **general), x)
                y = comm.reduce(x, op=op, root=root, **general)
                assert (y is None) == (r != root), name
                if r == root:
                    run.check(f"{name} reduce {op.value}", y, x)
                for algo in ("ring", "recursive_halving"):
                    run.check(f"{name} reduce_scatter {op.value} {algo}",
                              comm.reduce_scatter(x, op=op, algorithm=algo, **general),
                              np.array_split(x, p, axis=0)[r])
    if comm.transport is not None and p > 1:
        f32 = np.dtype(np.float32)
        for key in (("allgather-lane", f32, (0, 3), "ring"),
                    ("gather-lane", f32, (2, 0), root, "auto"),
                    ("alltoall-lane", f32, (0,), "auto")):
            assert comm._plans.get(key) is not None, f"no empty lane for {key}"
        for key in (("allreduce", f32, (0, 3), Op.AVG, "ring", None),
                    ("reduce", f32, (2, 0), Op.SUM, root, "auto", None),
                    ("reduce_scatter", f32, (0,), Op.SUM, "recursive_halving", None)):
            assert comm._plans[key].lane is not None, f"no empty lane for {key}"
        run.count += 1
    lanes_were_taken(run, ("allgather-lane", "gather-lane", "alltoall-lane"), "empty lanes")


def alltoall_lane_cases(run):
    """The alltoall lane (pycoll/_lanes.py make_alltoall) beside the
    general path: even and uneven blocks (np.array_split), blocks too few
    for every rank (their lanes send no empty message, Note [Empty lanes]),
    a given out, and ranks on the general path (a strided x, an out that
    overlaps x) meeting the others on the same messages."""
    comm, p, r = run.comm, run.p, run.r
    few = max(1, p // 2)                            # fewer rows than ranks from p = 2
    for rows in (p, 2 * p + 1, 3 * p - 1, few):
        for repeat in range(3):
            name = f"alltoall lane {rows} rows call {repeat}"
            xs = [rank_data("float64", (rows, 2), i, seed_of(name)) for i in range(p)]
            want = np.concatenate([np.array_split(x, p, axis=0)[r] for x in xs])
            if repeat == 1 and r % 2 == 1:          # the general path: a strided x
                wide = np.zeros((rows, 4))
                wide[:, ::2] = xs[r]
                y = comm.alltoall(wide[:, ::2])
            elif repeat == 2:
                out = np.empty_like(want)
                y = comm.alltoall(xs[r], out=out)
                assert y is out, name
            else:                                   # odd ranks' lanes keep a deadline
                y = comm.alltoall(xs[r], **({"timeout": 60.0} if r % 2 else {}))
            run.check(name, y, want)
    shared = np.arange(4.0 * p)                     # out overlaps x: copied by the general path
    want = np.concatenate([np.array_split(np.arange(4.0 * p), p)[r]] * p)
    run.check("alltoall lane: out overlaps x", comm.alltoall(shared, out=shared), want)
    if p > 1:                                       # p - 1 rows: rank p - 1's block is empty
        x = np.arange(p - 1.0) + 10 * r
        want = np.concatenate([np.array_split(np.arange(p - 1.0) + 10 * i, p)[r] for i in range(p)])
        for _ in range(2):
            run.check("alltoall lane: an empty block", comm.alltoall(x), want)
    # allgather with x in its own slot of out (MPI_IN_PLACE's layout)
    for _ in range(2):
        buf = np.zeros(3 * p)
        buf[3 * r:3 * r + 3] = np.arange(3.0) + 10 * r
        y = comm.allgather(buf[3 * r:3 * r + 3], out=buf)
        run.check("allgather in its slot of out", y,
                  np.concatenate([np.arange(3.0) + 10 * i for i in range(p)]))
    if comm.transport is not None and p > 1:
        for rows in (few, p - 1):
            for key in [k for k in comm._plans if k[:1] == ("alltoall-lane",) and k[2] == (rows, 2)]:
                assert comm._plans[key] is not None, key
    lanes_were_taken(run, ("alltoall-lane",), "alltoall lane")


def entries_take_plain_calls(run):
    """The C entries of pycoll/_lane_move.pyx (and reduce_scatter's with
    sizes=, in _lane_reduce.pyx) themselves take a repeated, plain call
    once its lane exists (a lane that always declined would leave every
    result right, through the general path, and gain nothing)."""
    from pycoll import _lane_move, _lane_reduce
    from pycoll._resources import NOT_TAKEN

    def taken(result):                              # _lane_reduce's entries answer None
        return NOT_TAKEN if result is None else result

    comm, p, r = run.comm, run.p, run.r
    if comm.transport is None or p < 2:
        return
    x = np.arange(3.0) + 10 * r
    everyone = np.concatenate([np.arange(3.0) + 10 * i for i in range(p)])
    rows = [1] + [3] * (p - 2) + [5]                # sizes=: uneven blocks
    matrix = [rows] * p
    root_data = np.arange(3.0) + 10 * (p - 1)
    calls = [("broadcast", lambda: comm.broadcast(x.copy(), root=p - 1, algorithm="binomial"),
              lambda: _lane_move.broadcast(comm, x.copy(), p - 1, "binomial"), root_data),
             ("gather", lambda: comm.gather(x, root=0),
              lambda: _lane_move.gather(comm, x, 0, "auto", None), everyone if r == 0 else None),
             ("allgather", lambda: comm.allgather(x, algorithm="ring"),
              lambda: _lane_move.allgather(comm, x, "ring", None), everyone),
             ("recursive doubling allgather", lambda: comm.allgather(x, algorithm="recursive_doubling"),
              lambda: _lane_move.allgather(comm, x, "recursive_doubling", None), everyone),
             ("scatter", lambda: comm.scatter(everyone if r == 0 else None, root=0),
              lambda: _lane_move.scatter(comm, everyone if r == 0 else None, 0, "auto", None),
              np.arange(3.0) + 10 * r),
             ("alltoall", lambda: comm.alltoall(everyone),
              lambda: _lane_move.alltoall(comm, everyone, "auto", None),
              np.concatenate([np.arange(3.0) + 10 * r] * p)),
             ("scatter sizes=", lambda: comm.scatter(everyone if r == 0 else None, sizes=rows),
              lambda: _lane_move.scatter(comm, everyone if r == 0 else None, 0, "auto", None,
                                         None, rows), split_by(everyone, p, rows)[r]),
             ("alltoall sizes=", lambda: comm.alltoall(everyone, sizes=matrix),
              lambda: _lane_move.alltoall(comm, everyone, "auto", None, None, matrix),
              np.concatenate([split_by(everyone, p, rows)[r]] * p)),
             ("reduce_scatter sizes=", lambda: comm.reduce_scatter(everyone, sizes=rows),
              lambda: taken(_lane_reduce.reduce_scatter(comm, everyone, pycoll.SUM, "auto",
                                                        None, None, None, rows)),
              p * split_by(everyone, p, rows)[r])]
    for name, first, entry, want in calls:
        first()                                     # makes the lane
        got = entry()
        assert got is not NOT_TAKEN, f"the {name} lane declined a plain call"
        if want is None:
            assert got is None, name
        else:
            run.check(f"{name} through its C entry", got, want)
    run.count += 1


def array_like_lane_cases(run):
    """Array-likes (__array_interface__, DLPack, the buffer protocol, torch
    tensors when present) take the lanes through their numpy views (Note
    [Lane views] in pycoll/api.py): once a signature's lane exists no call
    reaches the general path, through the module functions or the
    Communicator's methods, and the results are the plain calls'. A
    broadcast fills and returns the caller's own object."""
    import pycoll.api

    comm, p, r = run.comm, run.p, run.r
    if comm.transport is None or p < 2:
        return
    wrappers = {kind: wrap for kind, wrap in ARRAY_LIKES.items()
                if wrap is not None and (kind != "torch" or run.torch)}
    root = p - 1
    why = "an array-like left its lane"
    forms = (("method", comm), ("function", pycoll.api))
    for (form, api), (kind, wrap) in run.some(itertools.product(forms, wrappers.items())):
        # what the calls write into (out=, broadcast's x): numpy itself where
        # this numpy cannot write through the form (writes_through)
        write = wrap if writes_through(kind) else np.asarray
        on = {} if form == "method" else {"comm": comm}
        for repeat in range(3):
            name = f"array-like lane {kind} {form} call {repeat}"
            xs = [rank_data("float32", (p,), i, seed_of(name), Op.SUM) for i in range(p)]
            everyone = np.concatenate(xs)
            total = reduce_ranks(Op.SUM, xs)
            b = xs[r].copy() if r == root else np.zeros_like(xs[r])
            bw = write(b)
            with lanes_only(("_call",), why, when=repeat):
                y = api.allreduce(wrap(xs[r]), algorithm="recursive_doubling", **on)
                z = api.reduce(wrap(xs[r]), root=root, algorithm="binomial", **on)
                w = api.reduce_scatter(wrap(xs[r]), algorithm="ring", **on)
                assert api.broadcast(bw, root=root, algorithm="binomial", **on) is bw, name
                g = api.gather(wrap(xs[r]), root=root, algorithm="binomial", **on)
                ag = api.allgather(wrap(xs[r]), algorithm="ring", **on)
                sc = api.scatter(wrap(everyone) if r == root else None, root=root,
                                 algorithm="binomial", **on)
                a2a = api.alltoall(wrap(xs[r]), **on)
            run.check(f"{name} allreduce", y, total)
            run.check(f"{name} reduce_scatter", w, np.array_split(total, p)[r])
            run.check(f"{name} broadcast", b, xs[root])
            run.check(f"{name} allgather", ag, everyone)
            run.check(f"{name} scatter", sc, np.array_split(everyone, p)[r])
            run.check(f"{name} alltoall", a2a,
                      np.concatenate([np.array_split(x, p)[r] for x in xs]))
            if r == root:
                run.check(f"{name} reduce", z, total)
                run.check(f"{name} gather", g, everyone)
            else:
                assert z is None and g is None, name
            # out= an array-like: the lane writes through its view and
            # the call returns that view (DESIGN.md: results are numpy
            # arrays), as the general path does
            outs = {k: np.full(n, -1.0, F32) for k, n in (
                ("allreduce", p), ("in place", p), ("reduce", p), ("reduce_scatter", len(w)),
                ("gather", p * p), ("allgather", p * p), ("scatter", len(sc)), ("alltoall", p),
                ("scan", p))}
            inplace = xs[r].copy()
            with lanes_only(("_call",), why, when=repeat):
                got = {
                    "allreduce": api.allreduce(wrap(xs[r]), algorithm="recursive_doubling",
                                               out=write(outs["allreduce"]), **on),
                    "reduce": api.reduce(wrap(xs[r]), root=root, algorithm="binomial",
                                         out=write(outs["reduce"]), **on),
                    "reduce_scatter": api.reduce_scatter(wrap(xs[r]), algorithm="ring",
                                                         out=write(outs["reduce_scatter"]), **on),
                    "gather": api.gather(wrap(xs[r]), root=root, algorithm="binomial",
                                         out=write(outs["gather"]), **on),
                    "allgather": api.allgather(wrap(xs[r]), algorithm="ring",
                                               out=write(outs["allgather"]), **on),
                    "scatter": api.scatter(wrap(everyone) if r == root else None, root=root,
                                           algorithm="binomial", out=write(outs["scatter"]), **on),
                    "alltoall": api.alltoall(wrap(xs[r]), out=write(outs["alltoall"]), **on),
                    "scan": api.scan(wrap(xs[r]), out=write(outs["scan"]), **on),
                }
                both = write(inplace)    # in place: one array-like as x and out
                got["in place"] = api.allreduce(both, algorithm="recursive_doubling",
                                                out=both, **on)
                outs["in place"] = inplace
            want = {"allreduce": total, "in place": total, "reduce": total,
                    "reduce_scatter": np.array_split(total, p)[r], "gather": everyone,
                    "allgather": everyone, "scatter": np.array_split(everyone, p)[r],
                    "alltoall": np.concatenate([np.array_split(x, p)[r] for x in xs]),
                    "scan": reduce_ranks(Op.SUM, xs[:r + 1])}
            for k, y in got.items():
                if k in ("reduce", "gather") and r != root:
                    assert y is None, f"{name} {k} out= off the root"
                    continue
                assert type(y) is np.ndarray and np.shares_memory(y, outs[k]), (
                    f"{name} {k} out=: returned {type(y).__name__}, not the view of out")
                run.check(f"{name} {k} out=", outs[k], want[k])
    run.count += 1


def one_plan_per_algorithm_cases(run):
    """A call with algorithm="auto" and one naming the algorithm it picks
    run the same Plan or lane, whichever comes first (pycoll/_plan.py, Note
    [One plan per algorithm]), with the same results."""
    comm, p, r = run.comm, run.p, run.r
    sub = comm.split(0)                 # a communicator with no plans yet
    calls = {
        "allreduce": lambda x, a: sub.allreduce(x, op=pycoll.SUM, algorithm=a),
        "reduce": lambda x, a: sub.reduce(x, op=pycoll.SUM, root=p - 1, algorithm=a),
        "reduce_scatter": lambda x, a: sub.reduce_scatter(x, op=pycoll.SUM, algorithm=a),
        "allgather": lambda x, a: sub.allgather(x, algorithm=a),
        "gather": lambda x, a: sub.gather(x, root=0, algorithm=a),
        "alltoall": lambda x, a: sub.alltoall(x, algorithm=a),
        "broadcast": lambda x, a: sub.broadcast(x, root=0, algorithm=a),
    }
    def expected(collective, xs):
        total = reduce_ranks(Op.SUM, xs)
        return {"allreduce": total, "reduce": total if r == p - 1 else None,
                "reduce_scatter": np.array_split(total, p)[r],
                "allgather": np.concatenate(xs), "gather": np.concatenate(xs) if r == 0 else None,
                "alltoall": np.concatenate([np.array_split(xi, p)[r] for xi in xs]),
                "broadcast": xs[0]}[collective]

    # Small (lanes) and large (the general path, several segments).
    for rows in (2 * p, 3000 * p):
        for collective, call in calls.items():
            name = f"one plan {collective} {rows} rows"
            xs = [rank_data("float32", (rows, 2), i, seed_of(name), Op.SUM) for i in range(p)]
            x = xs[r]
            before = set(sub._plans)
            first = call(x.copy(), "auto")
            autos = {key: v for key, v in sub._plans.items()
                     if key not in before and "auto" in key and v is not None}
            picks = {v.algorithm for v in autos.values()}
            assert len(picks) <= 1, (name, picks)
            # A rank may make no plan (a small broadcast inside its header
            # has none off the root): the others' pick, found with mpi4py.
            everyone = set(MPI.COMM_WORLD.allgather(picks.pop() if picks else None)) - {None}
            assert len(everyone) == 1, (name, everyone)
            pick = everyone.pop()
            before = set(sub._plans)
            again = call(x.copy(), pick)
            made = [key for key in sub._plans if key not in before and sub._plans[key] is not None]
            assert not made, (name, "the named call made its own plan or lane", made)
            for key, kept in autos.items():
                named = tuple(pick if part == "auto" else part for part in key)
                assert sub._plans[named] is kept, (name, key)
            want = expected(collective, xs)
            if want is None:
                assert first is None and again is None, name
            else:
                run.check(name, first, want)
                run.check(name + " named", again, want)
            if collective in ("allreduce", "allgather", "broadcast"):
                run.same_everywhere(name, first)
    # The other order: named first, then "auto" finds what it made.
    x = np.arange(6.0) + r
    key = ("allreduce", x.dtype, x.shape, pycoll.SUM, "auto", None)
    with comm.split(0) as fresh:
        probe = fresh.allreduce(x, op=pycoll.SUM)
        pick = fresh._plans[key].algorithm
    with comm.split(0) as fresh:
        named = fresh.allreduce(x, op=pycoll.SUM, algorithm=pick)
        plan = fresh._plans[key[:4] + (pick, None)]
        run.check("one plan, named first", fresh.allreduce(x, op=pycoll.SUM), named)
        assert fresh._plans[key] is plan, "auto made a second plan after the named call"
        run.check("one plan, named first vs auto first", named, probe)
    sub.free()
    run.count += 1


def lanes_were_taken(run, kinds: tuple, label: str) -> None:
    """A lane of one of *kinds* was made whenever the transport makes lanes
    possible (at every p: pycoll/_lanes.py, Note [Solo lanes]), and the tags
    of both paths still agree."""
    comm, p, r = run.comm, run.p, run.r
    lanes = sum(1 for k, v in comm._plans.items() if k[0] in kinds and v is not None)
    assert (lanes > 0) == (comm.transport is not None), (lanes, comm.transport_info)
    y = comm.allreduce(np.array([r + 1.0]))
    run.check(f"{label}: tags agree after", y, np.array([p * (p + 1) / 2]))
    run.count += 1


def gather_lane_cases(run):
    """The gather lane (pycoll/_lanes.py _RootedLane) beside the general path,
    for every algorithm and several roots: some ranks pass a strided x, the
    root a strided out (both the general path) while the others take the
    lane, and they meet on the same messages; a given out is the result;
    off the root the call returns None and x is untouched."""
    comm, p, r = run.comm, run.p, run.r
    for root in sorted({0, p - 1, p // 2}):
        for algo in ("linear", "binomial", "auto"):
            for repeat in range(4):
                name = f"gather lane {algo} root {root} call {repeat}"
                xs = [rank_data("float64", (3, 2), i, seed_of(name)) for i in range(p)]
                want = np.concatenate(xs)
                if repeat == 1 and r % 2 == 1:      # the general path: a strided x
                    wide = np.zeros((6, 2))
                    wide[::2] = xs[r]
                    mine = wide[::2]
                else:
                    mine = xs[r].copy()
                out = None
                if r == root and repeat == 2:       # the general path: a strided out, written back
                    target = np.zeros((2 * len(want), 2))
                    out = target[::2]
                elif r == root and repeat == 3:
                    out = np.empty_like(want)
                y = comm.gather(mine, root=root, algorithm=algo, out=out)
                if r == root:
                    run.check(name, y, want)
                    if out is not None:
                        assert y is out, name
                    if repeat == 2:
                        assert not target[1::2].any(), name
                else:
                    assert y is None, name
                assert np.array_equal(mine, xs[r]), f"{name}: x changed"
    for dtype in ("bfloat16", "int8", "complex128", "bool"):
        name = f"gather lane {dtype}"
        xs = [rank_data(dtype, (2, 3), i, seed_of(name)) for i in range(p)]
        for _ in range(2):
            y = comm.gather(xs[r], root=p - 1)
            if r == p - 1:
                run.check(name, y, np.concatenate(xs))
    for _ in range(2):                              # 0-d inputs: one row each
        y = comm.gather(np.float64(r), root=0)
        if r == 0:
            run.check("gather lane 0-d", y, np.arange(p, dtype=np.float64))
    lanes_were_taken(run, ("gather-lane",), "gather lane")


def spell_sizes(sizes, r: int, repeat: int):
    """sizes= (a list, or alltoall's matrix as a list of rows) as rank r
    spells it in call *repeat* of the sizes lane cases: a list, a tuple or
    an integer array, differing between ranks of one call (one lane key);
    in call 1 on odd ranks numpy integers, which no lane keys (the general
    path)."""
    if repeat == 1 and r % 2 == 1:
        return [np.int64(n) for n in sizes] if np.ndim(sizes) == 1 else \
            [[np.int64(n) for n in line] for line in sizes]
    return (list, tuple, np.array)[(r + repeat) % 3](sizes)


def sizes_lane_cases(run):
    """Gathers and allgathers with sizes= take lanes keyed by the sizes
    (pycoll/api.py _made_with_sizes): ragged rows on every algorithm and
    several roots, sizes as a list, a tuple or an integer array on
    different ranks of one call (one lane), or as a list of numpy integers
    or with a strided out (the general path) while the others take the
    lane; a rank of no rows sends no message (Note [Empty lanes]).
    Async calls take the lane too, with the sizes as issued."""
    comm, p, r = run.comm, run.p, run.r
    ragged = [i % 3 + 1 for i in range(p)]

    def mine_of(sizes, name):
        xs = [rank_data("float32", (n, 2), i, seed_of(name)) for i, n in enumerate(sizes)]
        return xs[r], np.concatenate(xs)

    for rows in (ragged, [0] + ragged[1:]):
        for algo in ("ring", "recursive_doubling", "bruck", "auto"):
            for repeat in range(4):
                name = f"allgather lane sizes={rows} {algo} call {repeat}"
                mine, want = mine_of(rows, name)
                out = None
                if repeat == 2 and r % 2 == 0:      # the general path: a strided out
                    target = np.zeros((2 * len(want), 2), np.float32)
                    out = target[::2]
                elif repeat == 3:
                    out = np.empty_like(want)
                y = comm.allgather(mine, algorithm=algo, sizes=spell_sizes(rows, r, repeat),
                                   out=out)
                run.check(name, y, want)
                run.same_everywhere(name, y)
                if out is not None:
                    assert y is out, name
                if repeat == 2 and r % 2 == 0:
                    assert not target[1::2].any(), name
        for root in sorted({0, p - 1, p // 2}):
            for algo in ("linear", "binomial", "auto"):
                for repeat in range(3):
                    name = f"gather lane sizes={rows} {algo} root {root} call {repeat}"
                    mine, want = mine_of(rows, name)
                    y = comm.gather(mine, root=root, algorithm=algo,
                                    sizes=spell_sizes(rows, r, repeat))
                    if r == root:
                        run.check(name, y, want)
                    else:
                        assert y is None, name
    for repeat in range(2):
        name = f"allgather and gather lanes sizes={ragged} async call {repeat}"
        mine, want = mine_of(ragged, name)
        sizes = list(ragged)
        if r == 0:
            time.sleep(0.2)                         # holds the others' queues at `first`
        first = comm.allreduce(np.ones(1), async_op=True)
        work = [comm.allgather(mine, sizes=sizes, async_op=True),
                comm.gather(mine, root=p - 1, sizes=sizes, async_op=True)]
        sizes[(r + 1) % p] += 1                     # after issuing: the calls keep their sizes
        first.wait()
        y, z = (w.wait() for w in work)
        run.check(name, y, want)
        if r == p - 1:
            run.check(name, z, want)
    if comm.transport is not None and p > 1:
        for kind, rows in itertools.product(("allgather-lane", "gather-lane"),
                                            (ragged, [0] + ragged[1:])):
            keyed = [k for k, v in comm._plans.items()
                     if k[0] == kind and v is not None and k[-1] == tuple(rows)]
            assert keyed, (kind, rows, [k for k in comm._plans if k[0] == kind])
    lanes_were_taken(run, ("allgather-lane", "gather-lane"), "sizes lanes")


def split_sizes_lane_cases(run):
    """scatter, reduce_scatter and alltoall with sizes= take lanes keyed by
    the sizes (a scatter receiver's header lane too): ragged blocks, empty
    ones included, on every algorithm and several roots; sizes as a list,
    a tuple or an integer array on different ranks of one call (one lane);
    as numpy integers on odd ranks (the general path) or with a strided x
    or out while the others take their lanes; from the third call in the
    lane's spelling no rank leaves its lane. Async calls take the lanes
    with the sizes as issued."""
    comm, p, r = run.comm, run.p, run.r
    lanes = comm.transport is not None

    def strided(a):
        wide = np.zeros((a.shape[0], 2 * a.shape[1]), a.dtype)
        wide[:, ::2] = a
        return wide[:, ::2]

    ragged = [i % 3 + 1 for i in range(p)]
    for rows in (ragged, [0] + ragged[1:]):
        total = sum(rows)
        for root in sorted({0, p - 1, p // 2}):
            for algo in ("linear", "binomial", "auto"):
                for repeat in range(4):
                    name = f"scatter lane sizes={rows} {algo} root {root} call {repeat}"
                    full = rank_data("float32", (total, 2), root, seed_of(name))
                    want = split_by(full, p, rows)[r]
                    x = None if r != root else strided(full) if repeat == 2 else full.copy()
                    out = strided(np.zeros_like(want)) if repeat == 2 and r % 2 else None
                    with lanes_only(("scatter",), f"{name} left its lane",
                                    when=lanes and repeat == 3 and p > 1):
                        y = comm.scatter(x, root=root, algorithm=algo,
                                         sizes=spell_sizes(rows, r, repeat), out=out)
                    run.check(name, y, want)
                    if out is not None:
                        assert y is out, name
        for algo in ("ring", "recursive_halving", "auto"):
            for repeat in range(4):
                name = f"reduce_scatter lane sizes={rows} {algo} call {repeat}"
                xs = [rank_data("float32", (total, 2), i, seed_of(name), Op.SUM) for i in range(p)]
                want = split_by(reduce_ranks(Op.SUM, xs), p, rows)[r]
                out = strided(np.zeros_like(want)) if repeat == 2 and r % 2 else None
                y = comm.reduce_scatter(xs[r], algorithm=algo, sizes=spell_sizes(rows, r, repeat),
                                        out=out)
                run.check(name, y, want)
                run.count += 1
            if lanes and p > 1:
                key = ("reduce_scatter", np.dtype(np.float32), (total, 2), Op.SUM, algo, None,
                       tuple(rows))
                with lanes_only(("reduce_scatter", "_reduce_scatter"), f"{name}: not on its lane",
                                when=comm._plans[key].lane is not None):
                    run.check(f"{name} again", comm.reduce_scatter(xs[r], algorithm=algo,
                                                                   sizes=rows), want)
        matrix = [[(i + 2 * j + (j == 0)) % 3 for j in range(p)] for i in range(p)]
        for repeat in range(4):
            name = f"alltoall lane sizes={matrix} call {repeat}"
            xs = [rank_data("float32", (sum(matrix[i]), 2), i, seed_of(name)) for i in range(p)]
            want = np.concatenate([split_by(xs[i], p, matrix[i])[r] for i in range(p)])
            x = strided(xs[r]) if repeat == 2 and r % 2 == 0 else xs[r]
            out = strided(np.zeros_like(want)) if repeat == 2 and r % 2 else None
            with lanes_only(("alltoall",), f"{name} left its lane", when=lanes and repeat == 3):
                y = comm.alltoall(x, sizes=spell_sizes(matrix, r, repeat), out=out)
            run.check(name, y, want)
    rows = list(ragged)
    matrix = [list(ragged) for _ in range(p)]
    for repeat in range(2):
        name = f"scatter, reduce_scatter and alltoall lanes sizes={rows} async call {repeat}"
        xs = [rank_data("float32", (sum(rows), 2), i, seed_of(name), Op.SUM) for i in range(p)]
        if r == 0:
            time.sleep(0.2)                         # holds the others' queues at `first`
        first = comm.allreduce(np.ones(1), async_op=True)
        work = [comm.scatter(xs[0] if r == 0 else None, sizes=rows, async_op=True),
                comm.reduce_scatter(xs[r], sizes=rows, async_op=True),
                comm.alltoall(xs[r], sizes=matrix, async_op=True)]
        rows[(r + 1) % p] += 1                      # after issuing: the calls keep their sizes
        matrix[r][(r + 1) % p] += 1
        first.wait()
        got = [w.wait() for w in work]
        rows[(r + 1) % p] -= 1
        matrix[r][(r + 1) % p] -= 1
        run.check(f"{name}: scatter", got[0], split_by(xs[0], p, rows)[r])
        run.check(f"{name}: reduce_scatter", got[1],
                  split_by(reduce_ranks(Op.SUM, xs), p, rows)[r])
        run.check(f"{name}: alltoall", got[2],
                  np.concatenate([split_by(xs[i], p, rows)[r] for i in range(p)]))
    if lanes and p > 1:
        scatter = "scatter-lane-root" if r == 0 else "scatter-header"
        for kind, tail in ((scatter, tuple(ragged)), ("alltoall-lane", tuple(map(tuple, matrix)))):
            keyed = [k for k, v in comm._plans.items()
                     if k[0] == kind and v is not None and k[-1] == tail]
            assert keyed, (kind, tail, [k for k in comm._plans if k[0] == kind])
    lanes_were_taken(run, ("scatter-lane-root", "scatter-header", "alltoall-lane"),
                     "split sizes lanes")


def own_block_lane_cases(run):
    """allgather, and gather on its root, with x in its own block of out
    (MPI_IN_PLACE's layout) take their lanes (Note [Own blocks] in
    pycoll/_lanes.py): even and ragged blocks, every algorithm and several
    roots; from the second call no rank leaves its lane, while odd ranks
    pass a timeout (a deadline on the lane); ranks on the general path (a
    strided out) meet them; an x one element off its block (any other
    overlap) still comes out right, on the general path."""
    comm, p, r = run.comm, run.p, run.r
    for rows in ([2] * p, [i % 3 + 1 for i in range(p)]):
        lo, hi = sum(rows[:r]), sum(rows[:r + 1])
        for algo in ("ring", "recursive_doubling", "bruck", "auto"):
            for repeat in range(4):
                name = f"allgather in place sizes={rows} {algo} call {repeat}"
                want = np.concatenate([rank_data("float32", (n, 2), i, seed_of(name))
                                       for i, n in enumerate(rows)])
                if repeat == 3 and r % 2 == 1:      # the general path: a strided out
                    out = np.zeros((2 * len(want), 2), np.float32)[::2]
                else:
                    out = np.zeros_like(want)
                out[lo:hi] = want[lo:hi]
                timeout = {"timeout": 60.0} if r % 2 and repeat == 2 else {}
                lanes = comm.transport is not None      # (PYCOLL_TRANSPORT=mpi4py: none)
                with lanes_only(("allgather",), f"{name} left its lane",
                                when=lanes and 0 < repeat < 3):
                    y = comm.allgather(out[lo:hi], algorithm=algo, sizes=rows, out=out, **timeout)
                assert y is out, name
                run.check(name, y, want)
        for root in sorted({0, p - 1, p // 2}):
            for algo in ("linear", "binomial", "auto"):
                for repeat in range(3):
                    name = f"gather in place sizes={rows} root {root} {algo} call {repeat}"
                    want = np.concatenate([rank_data("float32", (n, 2), i, seed_of(name))
                                           for i, n in enumerate(rows)])
                    out = np.zeros_like(want)
                    out[lo:hi] = want[lo:hi]
                    with lanes_only(("gather",), f"{name} left its lane",
                                    when=comm.transport is not None and repeat > 0):
                        y = comm.gather(out[lo:hi], root=root, algorithm=algo, sizes=rows, out=out)
                    if r == root:
                        assert y is out, name
                        run.check(name, y, want)
                    else:
                        assert y is None, name
    for _ in range(2):                              # x one element off its own block
        buf = np.arange(3.0 * p + 1)
        want = np.concatenate([np.arange(3.0 * i + 1, 3.0 * i + 4) for i in range(p)])
        y = comm.allgather(buf[3 * r + 1:3 * r + 4], out=buf[:3 * p])
        run.check("allgather: x one element off its block", y, want)
    lanes_were_taken(run, ("allgather-lane", "gather-lane"), "own-block lanes")


def scatter_lane_cases(run):
    """The scatter lane (pycoll/api.py _scatter_lane) beside the general
    path, for every algorithm and several roots, blocks even and uneven:
    a root that takes the general path (a strided x) while the others
    wait on the lane; ranks with a strided out (the general path from the
    header on); a new signature; the root's bad input, raised everywhere;
    blocks too few to fill every rank (their lanes send no empty
    message, Note [Empty lanes])."""
    comm, p, r = run.comm, run.p, run.r
    for root in sorted({0, p - 1, p // 2}):
        for algo in ("linear", "binomial", "auto"):
            for rows in (3 * p, 2 * p + 1, p // 2 + 1):
                for repeat in range(4):
                    name = f"scatter lane {algo} root {root} {rows} rows call {repeat}"
                    full = rank_data("float64", (rows, 2), root, seed_of(name))
                    want = np.array_split(full, p)[r]
                    x = None
                    if r == root:
                        x = full.copy()
                        if repeat == 3:             # the root on the general path
                            wide = np.zeros((2 * rows, 2))
                            wide[::2] = full
                            x = wide[::2]
                    out = None
                    if repeat == 1:
                        out = np.zeros_like(want)
                    elif repeat == 2 and r % 2 == 1:    # the general path after the header
                        target = np.zeros((2 * len(want), 2))
                        out = target[::2]
                    y = comm.scatter(x, root=root, algorithm=algo, out=out)
                    run.check(name, y, want)
                    if out is not None:
                        assert y is out, name
                    if repeat == 2 and r % 2 == 1:
                        assert not target[1::2].any(), name
                    if r == root:
                        assert np.array_equal(x, full), f"{name}: x changed"
            if r == root and comm.transport is not None and p > 1:
                key = ("scatter-lane-root", np.dtype(np.float64), (p // 2 + 1, 2), root, algo)
                assert comm._plans.get(key) is not None, key
    for dtype in ("bfloat16", "int8", "complex128", "bool"):    # one word after another
        name = f"scatter lane {dtype}"
        full = rank_data(dtype, (p, 3), 0, seed_of(name))
        for _ in range(2):
            y = comm.scatter(full.copy() if r == 0 else None, root=0)
            run.check(name, y, np.array_split(full, p)[r])
    for _ in range(2):                              # the root's error reaches every rank
        expect(ValueError, "at least one dimension", comm.scatter,
               np.float64(1.0) if r == 0 else None, 0)
    if p > 1:
        full = np.arange(p - 1, dtype=np.float32)   # a rank gets an empty block
        for _ in range(2):
            y = comm.scatter(full if r == 0 else None, root=0)
            run.check("scatter lane: empty block", y, np.array_split(full, p)[r])
    inline_scatter_cases(run)
    lanes_were_taken(run, ("scatter-lane", "scatter-lane-root"), "scatter lane")


def inline_scatter_cases(run):
    """Scatters of at most INLINE_BYTES on the header's tree carry their
    blocks in the header's messages (pycoll/_header.py, Note [Inline scatter]):
    at the limit and 8 bytes past it, with no data at all, each with odd
    ranks on the general path (a timeout, a strided out) in the same calls
    as the others' lanes, and the root's lane made."""
    from pycoll._header import INLINE_BYTES

    comm, p, r = run.comm, run.p, run.r
    root = p // 2
    for count in (INLINE_BYTES // 8, INLINE_BYTES // 8 + 1, 0, 3):
        for algo in ("binomial", "linear", "auto"):
            name = f"inline scatter {count} float64 {algo}"
            full = rank_data("float64", (count, 1), root, seed_of(name)).reshape(count)
            want = np.array_split(full, p)[r]
            for repeat in range(4):
                kwargs = {}
                if repeat == 1 and r % 2 == 1:
                    kwargs["timeout"] = 60.0
                elif repeat == 2 and r % 2 == 1:
                    target = np.zeros(2 * len(want))
                    kwargs["out"] = target[::2]
                x = full.copy() if r == root else None
                before = comm._calls.tags_taken
                y = comm.scatter(x, root=root, algorithm=algo, **kwargs)
                run.check(f"{name} call {repeat}", y, want)
                if algo != "auto" and p > 1:    # one tag when inline, else the data's too
                    inline = count * 8 <= INLINE_BYTES and (algo == "binomial" or p == 2)
                    tags = comm._calls.tags_taken - before
                    assert tags == (1 if inline else 2), (name, repeat, tags)
                if "out" in kwargs:
                    assert y is kwargs["out"] and not target[1::2].any(), name
                if r == root:
                    assert np.array_equal(x, full), f"{name}: x changed"
    # A rank's out of the wrong shape is found once the header has come:
    # that rank still passes its children their blocks, then raises; its
    # out is untouched, the others get theirs, the tags still agree.
    bad = (root + 2) % p
    for count in (8 * p, INLINE_BYTES // 8 + p):
        for repeat in range(2):
            name = f"scatter {count} float64, rank {bad}'s out wrong, call {repeat}"
            full = rank_data("float64", (count,), root, seed_of(name))
            x = full.copy() if r == root else None
            if r == bad and r != root:
                out = np.full(len(np.array_split(full, p)[r]) + 1, -1.0)
                expect(ValueError, "out has shape", comm.scatter, x, root, "binomial", out)
                assert (out == -1).all(), f"{name}: out written"
            else:
                run.check(name, comm.scatter(x, root=root, algorithm="binomial"),
                          np.array_split(full, p)[r])
    y = comm.allreduce(np.array([r + 1.0]))
    run.check("inline scatter: tags agree after", y, np.array([p * (p + 1) / 2]))
    if comm.transport is not None and p > 1:
        for count in (INLINE_BYTES // 8, 0):
            key = ("scatter-lane-root", np.dtype(np.float64), (count,), root, "binomial")
            assert r != root or comm._plans.get(key) is not None, f"no inline root lane {key}"
        run.count += 1


def reduce_lane_cases(run):
    """The reduce lane (Lane in pycoll/_lane_reduce.pyx on reduce_binomial's
    schedule) beside the general path: repeated reduces of every (op,
    dtype) to several roots; a root that must take the general path (a
    strided out) while the others take the lane; off the root, out is
    ignored on either path and the call returns None."""
    comm, p, r = run.comm, run.p, run.r
    roots = sorted({0, p - 1, p // 2})
    for i, (op, dtype) in enumerate(run.some(reduction_pairs())):
        root = roots[i % len(roots)]
        for repeat in range(3):
            name = f"reduce lane {op.value} {dtype} root {root} call {repeat}"
            xs = [rank_data(dtype, (3,), i, seed_of(name), op) for i in range(p)]
            y = comm.reduce(xs[r], op=op, root=root, algorithm="binomial")
            if r == root:
                run.check(name, y, reduce_ranks(op, xs))
            else:
                assert y is None, name
    for root in roots:
        for algo in ("binomial", "auto"):
            for repeat in range(4):
                name = f"reduce lane {algo} root {root} call {repeat}"
                xs = [rank_data("float64", (5, 2), i, seed_of(name), Op.SUM) for i in range(p)]
                mine = xs[r].copy()
                if repeat == 2 and r == root:       # the general path: a strided out, written back
                    target = np.zeros((10, 2))
                    y = comm.reduce(mine, root=root, algorithm=algo, out=target[::2])
                    assert not target[1::2].any(), name
                elif repeat == 3 and r == root:     # in place
                    y = comm.reduce(mine, root=root, algorithm=algo, out=mine)
                    assert y is mine, name
                else:                               # off the root a useless out is ignored
                    out = None if r == root else np.empty(1, np.int8)
                    y = comm.reduce(mine, root=root, algorithm=algo, out=out)
                if r == root:
                    run.check(name, y, reduce_ranks(Op.SUM, xs))
                else:
                    assert y is None, name
                    assert np.array_equal(mine, xs[r]), f"{name}: x changed off the root"
    lanes = sum(1 for k, v in comm._plans.items() if k[0] == "reduce" and v.lane is not None)
    assert (lanes > 0) == (comm.transport is not None), (lanes, comm.transport_info)
    y = comm.allreduce(np.array([r + 1.0]))
    run.check("reduce lane: tags agree after", y, np.array([p * (p + 1) / 2]))
    run.count += 1


def scan_lane_cases(run):
    """The scan lane (ScanLane in pycoll/_lane_reduce.pyx, on each algorithm's
    schedule) beside the general path: repeated scans of every (op,
    dtype), inclusive and exclusive; in the same calls, odd ranks on the
    general path (a strided out) or with a deadline while even ones take
    the lane; in place; the same bits on the general path and the lane,
    in place or not (a NaN payload naming the rank shows swapped
    operands); empty vectors; and once made, the lanes take every plain
    call, timeout= included."""
    comm, p, r = run.comm, run.p, run.r

    def check(name, y, xs, op, exclusive):
        upto = r if exclusive else r + 1
        if upto == 0:
            assert y is None, f"{name}: rank 0 got {y!r}"
        else:
            run.check(name, y, reduce_ranks(op, xs[:upto]))
    for algo in ALGORITHMS["scan"]:
        for exclusive in (False, True):
            for op, dtype in run.some(reduction_pairs()):
                for repeat in range(3):
                    name = f"scan lane {algo} {op.value} {dtype} exclusive={exclusive} call {repeat}"
                    xs = [rank_data(dtype, (3,), i, seed_of(name), op) for i in range(p)]
                    y = comm.scan(xs[r], op=op, algorithm=algo, exclusive=exclusive)
                    check(name, y, xs, op, exclusive)
            for repeat in range(5):
                name = f"scan lane {algo} exclusive={exclusive} call {repeat}"
                xs = [rank_data("float64", (5, 2), i, seed_of(name), Op.SUM) for i in range(p)]
                mine = xs[r].copy()
                if repeat == 2 and r % 2:           # the general path: a strided out, written back
                    target = np.zeros((10, 2))
                    y = comm.scan(mine, algorithm=algo, exclusive=exclusive, out=target[::2])
                    assert (y is None) == (exclusive and r == 0), name
                    assert not target[1::2].any(), name
                elif repeat == 3:
                    y = comm.scan(mine, algorithm=algo, exclusive=exclusive,
                                  timeout=60.0 if r % 2 else None)
                elif repeat == 4:                   # in place
                    y = comm.scan(mine, algorithm=algo, exclusive=exclusive, out=mine)
                    assert y is (None if exclusive and r == 0 else mine), name
                else:
                    y = comm.scan(mine, algorithm=algo, exclusive=exclusive)
                check(name, y, xs, Op.SUM, exclusive)
                if y is not mine:
                    assert np.array_equal(mine, xs[r]), f"{name}: x changed"
        x = np.array([0, 1.5, -0.0], np.float32)
        bits(x)[0] = 0x7fc00000 | (r + 1)
        seen = []
        for _ in range(3):
            seen.append(bits(comm.scan(x, algorithm=algo)).tobytes())     # the lane
            inplace = x.copy()
            comm.scan(inplace, algorithm=algo, out=inplace)
            seen.append(bits(inplace).tobytes())
            strided = np.empty(6, np.float32)[::2]  # the general path, written back
            comm.scan(x, algorithm=algo, out=strided)
            seen.append(bits(strided).tobytes())
        assert len(set(seen)) == 1, f"scan lane {algo}: the bits differ between paths"
        run.count += 1
    for shape in ((0,), (0, 3)):
        for op in (Op.SUM, Op.AVG):
            for exclusive in (False, True):
                for repeat in range(3):
                    name = f"scan lane empty {shape} {op.value} exclusive={exclusive} call {repeat}"
                    x = np.zeros(shape, np.float32)
                    check(name, comm.scan(x, op=op, exclusive=exclusive), [x] * p, op, exclusive)
    lanes = [k for k, v in comm._plans.items() if k[0] == "scan" and v.lane is not None]
    assert bool(lanes) == (comm.transport is not None), (lanes, comm.transport_info)
    if comm.transport is not None:
        why = "a plain scan left its lane"
        for repeat in range(3):
            with lanes_only(("_call",), why, when=repeat > 0):
                for algo in ("auto", *ALGORITHMS["scan"]):
                    for op, exclusive in ((Op.SUM, False), (Op.AVG, True)):
                        name = f"scan lane only {algo} {op.value} exclusive={exclusive}"
                        xs = [rank_data("bfloat16", (4,), i, seed_of(name), op) for i in range(p)]
                        timeout = {"timeout": 60.0} if r % 2 else {}
                        y = comm.scan(xs[r], op=op, algorithm=algo, exclusive=exclusive, **timeout)
                        check(name, y, xs, op, exclusive)
    y = comm.allreduce(np.array([r + 1.0]))
    run.check("scan lane: tags agree after", y, np.array([p * (p + 1) / 2]))


def widened_lane_cases(run):
    """accumulate="float32" on the lanes (Note [Widened lanes] in
    pycoll/_lane_reduce.pyx): allreduce (the ring too), reduce, reduce_scatter
    and scan of float16 and bfloat16, SUM and AVG, round once at the end,
    on the lane and on the
    general path (a strided out, in the same signature) to the same bits,
    in place too; once made, the lanes take every plain call."""
    comm, p, r = run.comm, run.p, run.r
    small = {bf16(): 2.0 ** -9, np.dtype(np.float16): 2.0 ** -11}   # below half an ulp of 1

    def want(dtype, op, ranks):
        """Ranks 0..ranks-1 reduced in float32 (exact for these values),
        rounded once; None for no ranks."""
        if ranks == 0:
            return None
        total = F32(1.0) + F32(small[dtype]) * F32(ranks - 1)
        if op is Op.AVG:
            total = total / F32(ranks)
        return np.full(64, total, F32).astype(dtype)

    def calls(name, call, x, expected, in_place=True):
        """call(x, out) on the lane, on the general path and (*in_place*) in
        place, for x of 1.0 and small[dtype] and for random x (the same
        bits on every path; None where *expected* is None)."""
        noisy = np.random.default_rng([len(name), r]).standard_normal(64).astype(x.dtype)
        for data in (x, noisy):
            seen = []
            for _ in range(3):
                y = call(data, None)
                size = data.size if y is None else y.size
                strided = np.zeros(2 * size, data.dtype)[::2]   # the general path, written back
                general = call(data, strided)
                outputs = [y, strided]
                if in_place:
                    outputs.append(data.copy())
                    assert call(outputs[-1], outputs[-1]) is (None if y is None else outputs[-1])
                if expected is None:
                    assert y is None and general is None, name
                    continue
                if data is x:
                    run.check(name, y, expected)
                seen += [bits(out).tobytes() for out in outputs]
            assert len(set(seen)) <= 1, f"{name}: the lane and the general path differ"
            run.count += 1
    for dtype in small:
        x = np.full(64, 1.0 if r == 0 else small[dtype], dtype)
        for op in (Op.SUM, Op.AVG):
            for algo in ("recursive_doubling", "tree", "ring", "auto"):
                calls(f"widened allreduce {dtype} {op.value} {algo}",
                      lambda x, out: comm.allreduce(x, op=op, algorithm=algo, out=out,
                                                    accumulate="float32"),
                      x, want(dtype, op, p))
            for algo in ALGORITHMS["reduce_scatter"]:
                calls(f"widened reduce_scatter {dtype} {op.value} {algo}",
                      lambda x, out: comm.reduce_scatter(x, op=op, algorithm=algo, out=out,
                                                         accumulate="float32"),
                      x, np.array_split(want(dtype, op, p), p)[r], in_place=False)
            calls(f"widened reduce {dtype} {op.value}",
                  lambda x, out: comm.reduce(x, op=op, root=p - 1, out=out, accumulate="float32"),
                  x, want(dtype, op, p) if r == p - 1 else None)
            for exclusive in (False, True):
                for algo in ALGORITHMS["scan"]:
                    calls(f"widened scan {dtype} {op.value} {algo} exclusive={exclusive}",
                          lambda x, out: comm.scan(x, op=op, algorithm=algo, exclusive=exclusive,
                                                   out=out, accumulate="float32"),
                          x, want(dtype, op, r if exclusive else r + 1))
    lanes = [k for k, v in comm._plans.items() if k[-1] == "float32" and v.lane is not None]
    assert bool(lanes) == (comm.transport is not None), (lanes, comm.transport_info)
    if comm.transport is not None:
        why = "a plain call with accumulate left its lane"
        for repeat in range(3):
            with lanes_only(("_call",), why, when=repeat > 0):
                y = comm.allreduce(x, op=Op.AVG, algorithm="recursive_doubling",
                                   accumulate="float32", timeout=60.0 if r % 2 else None)
                run.check("widened lane only allreduce", y, want(x.dtype, Op.AVG, p))
                y = comm.reduce(x, root=0, accumulate="float32")
                assert (y is None) == (r != 0), "widened lane only reduce"
                y = comm.scan(x, accumulate="float32")
                run.check("widened lane only scan", y, want(x.dtype, Op.SUM, r + 1))
                y = comm.reduce_scatter(x, algorithm="ring", accumulate="float32")
                run.check("widened lane only reduce_scatter", y,
                          np.array_split(want(x.dtype, Op.SUM, p), p)[r])


def group_staging(run):
    """Sends of 256 KiB-8 MiB from inputs on 4 KiB pages go out of a copy
    on huge pages (Note [Staging sends] in pycoll/_resources.pyx): every
    algorithm of every collective gives the same bits with staging on and
    off, on the lanes (repeated calls) and the general path alike, and
    leaves the input as it was."""
    from pycoll._memory import empty_small_pages
    from pycoll._resources import huge_page_bytes, set_staging

    comm, p, r = run.comm, run.p, run.r
    can_tell = huge_page_bytes(np.ones(1)) is not None
    for collective in ("allreduce", "reduce", "reduce_scatter", "scan"):
        for algo in ALGORITHMS[collective]:
            for dtype, count in (("float32", 70_000 * p), ("bfloat16", 300_000)):
                name = f"staging {collective} {algo} {dtype} {count}"
                xs = [rank_data(dtype, (count,), i, seed_of(name), Op.SUM) for i in range(p)]
                x = empty_small_pages(count, BY_NAME[dtype].numpy)
                x[:] = xs[r]
                want = reduce_ranks(Op.SUM, xs if collective != "scan" else xs[:r + 1])
                if collective == "reduce_scatter":
                    want = np.array_split(want, p)[r]
                got = []
                for staging in STAGING_MODES:
                    set_staging(staging)
                    try:
                        if collective == "reduce":
                            y = comm.reduce(x, root=p - 1, algorithm=algo)
                        else:
                            y = getattr(comm, collective)(x, algorithm=algo)
                    finally:
                        set_staging("auto")
                    assert np.array_equal(bits(x), bits(xs[r])), f"{name}: x changed"
                    if collective != "reduce" or r == p - 1:
                        run.check(f"{name} staging {staging}", y, want)
                        got.append(y)
                if got:
                    assert all(np.array_equal(bits(g), bits(got[0])) for g in got), name
    staging_data_movement(run)
    if can_tell and p == 2:
        for mode in ("copy", "stream"):
            set_staging(mode)
            try:
                stage_holds_the_send(run, mode)
            finally:
                set_staging("auto")
    if can_tell:
        # "auto" times every way: the plan that ran these calls (its lane,
        # or its channel on the general path) has tried all three.
        x = empty_small_pages(1 << 18, np.float32)
        x[:] = r
        for _ in range(8):
            comm.allreduce(x, algorithm="ring")
        records = [w for plan in comm._plans.values()
                   for w in (getattr(plan, "lane", None), getattr(getattr(plan, "channel", None), "_stage", None))
                   if w is not None and hasattr(w, "stage_ways")]
        timed = [w.stage_ways for w in records if w.stage_ways["calls"] >= 6]
        assert timed and all(t["off"] > 0 and t["copy"] > 0 and t["stream"] > 0 for t in timed), \
            [w.stage_ways for w in records]
        # In place, a call sends what the one before it wrote: a lane times
        # those calls' ways apart from the others'.
        lanes = [w for w in records if w.stage_ways["calls"] >= 6 and hasattr(w, "algorithm")]
        before = [w.stage_ways["calls"] for w in lanes]
        for _ in range(8):
            comm.allreduce(x, out=x, algorithm="ring")
        assert [w.stage_ways["calls"] for w in lanes] == before
        in_place = [w.stage_ways["in_place"] for w in lanes]
        assert all(t["calls"] >= 6 and t["off"] > 0 and t["copy"] > 0 and t["stream"] > 0
                   for t in in_place), in_place
        # At p = 2 the ring's lane stages its 512 KiB sends (with C transport calls).
        assert lanes or p > 2 or comm.transport is None, records
        run.count += 1


# Every way of sending (Note [Choosing the way] in pycoll/_resources.pyx),
# and "auto" twice, so that its lanes are past the first calls and choose.
STAGING_MODES = ("copy", "off", "stream", "auto", "auto", "copy")


def stage_holds_the_send(run, mode):
    """At p = 2 with sends copied (*mode* "copy" or "stream"), the stage
    holds what the last staged send sent: an allreduce's first message, a
    repeated broadcast's from its root and a gather's to its root (their
    lanes; the general path's concurrent sends are not staged)."""
    from pycoll._memory import empty_small_pages

    comm, r = run.comm, run.r
    x = empty_small_pages(1 << 18, np.float32)
    stage = comm._calls.scratch("stage", x.nbytes)
    x[:] = r + 1
    stage[:] = 0
    comm.allreduce(x, algorithm="recursive_doubling")
    assert np.array_equal(stage.view(np.float32), x), f"{mode}: the send was not staged"
    run.count += 1
    lanes = comm.transport is not None
    for name, call, sender in () if not lanes else (
            ("broadcast", lambda y: comm.broadcast(y, root=1, algorithm="binomial"), 1),
            ("gather", lambda y: comm.gather(y, root=1, algorithm="linear"), 0)):
        for k in range(2):
            x[:] = 3 * r + 7 + k
            sent = x.copy()
            stage[:] = 0
            call(x)
        if r == sender:
            assert np.array_equal(stage.view(np.float32), sent), f"{name} {mode}: not staged"
            run.count += 1


def staging_data_movement(run):
    """group_staging's broadcast, allgather, gather, scatter and alltoall:
    every algorithm, blocks of 256 KiB and more from numpy arrays on 4 KiB
    pages, the same results with staging on and off, inputs untouched."""
    from pycoll._memory import empty_small_pages
    from pycoll._resources import set_staging

    comm, p, r = run.comm, run.p, run.r
    count = 70_000 * p                               # p blocks of 70,000 float32
    root = p - 1

    def small_pages(a):
        b = empty_small_pages(a.size, a.dtype).reshape(a.shape)
        b[...] = a
        return b

    for collective in ("broadcast", "allgather", "gather", "scatter", "alltoall"):
        for algo in ALGORITHMS[collective]:
            name = f"staging {collective} {algo}"
            xs = [rank_data("float32", (count,), i, seed_of(name)) for i in range(p)]
            blocks = [np.array_split(x, p) for x in xs]
            if collective == "broadcast":
                want, x = xs[root], small_pages(xs[r] if r == root else np.zeros(count, np.float32))
            elif collective in ("allgather", "gather"):
                want, x = np.concatenate([b[0] for b in blocks]), small_pages(blocks[r][0])
            elif collective == "scatter":
                want, x = blocks[root][r], small_pages(xs[root]) if r == root else None
            else:
                want, x = np.concatenate([b[r] for b in blocks]), small_pages(xs[r])
            before = None if x is None else x.copy()
            for staging in STAGING_MODES:
                set_staging(staging)
                try:
                    if collective == "broadcast":
                        if r != root:
                            x[:] = 0
                        y = comm.broadcast(x, root=root, algorithm=algo)
                    elif collective in ("gather", "scatter"):
                        y = getattr(comm, collective)(x, root=root, algorithm=algo)
                    else:
                        y = getattr(comm, collective)(x, algorithm=algo)
                finally:
                    set_staging("auto")
                if collective != "broadcast" and x is not None:
                    assert np.array_equal(bits(x), bits(before)), f"{name}: x changed"
                if collective != "gather" or r == root:
                    run.check(f"{name} staging {staging}", y, want)


def ring_allreduce_lane_cases(run):
    """The ring's allreduce lane (ReduceScatterLane, whole, in
    pycoll/_lane_reduce.pyx) beside the general path: every (op, dtype) on
    uneven chunks, out of place and in place; some ranks on the general
    path (a strided out) while the others take the lane; the lane's bits
    against the general path's with NaN payloads naming the rank; once
    made, no call leaves the lane, with or without a timeout; and a vector
    of fewer elements than ranks (empty chunks, no message)."""
    import pycoll.api

    comm, p, r = run.comm, run.p, run.r
    rows = 2 * p + 1                               # uneven chunks
    for op, dtype in run.some(reduction_pairs()):
        for repeat in range(4):
            name = f"ring allreduce lane {op.value} {dtype} call {repeat}"
            xs = [rank_data(dtype, (rows, 2), i, seed_of(name), op) for i in range(p)]
            mine = xs[r].copy()
            want = reduce_ranks(op, xs)
            if repeat == 2 and r % 2 == 1:          # the general path: a strided out, written back
                target = np.zeros((2 * rows, 2), want.dtype)
                y = comm.allreduce(mine, op=op, algorithm="ring", out=target[::2])
                assert not bits(target[1::2]).any(), name
            elif repeat == 3:                       # in place
                y = comm.allreduce(mine, op=op, algorithm="ring", out=mine)
                assert y is mine, name
            else:
                y = comm.allreduce(mine, op=op, algorithm="ring")
            run.check(name, y, want)
            if repeat != 3:
                assert np.array_equal(bits(mine), bits(xs[r])), f"{name}: x changed"
    x = np.array([0, 1.5, -0.0, 2, np.nan] * p, np.float32)
    bits(x)[0::5] = 0x7fc00000 | (r + 1)
    for op in (Op.MAX, Op.SUM):
        for _ in range(2):
            lane = comm.allreduce(x, op=op, algorithm="ring")
            general = pycoll.api._allreduce(comm, x, op, "ring", None, None)
            assert bits(lane).tobytes() == bits(general).tobytes(), \
                f"ring allreduce lane vs general path {op.value}"
    # Fewer elements than ranks: the lane sends no empty chunk (Note [Empty
    # lanes]), beside ranks on the general path (a strided out) and in place.
    small = np.arange(max(p - 1, 1), dtype=np.float64) + 1
    for repeat in range(4):
        name = f"ring allreduce, fewer elements than ranks, call {repeat}"
        mine = small * (r + 1)
        if repeat == 1 and r % 2 == 1:
            target = np.zeros(2 * len(small))
            y = comm.allreduce(mine, algorithm="ring", out=target[::2])
        elif repeat == 2:
            y = comm.allreduce(mine, algorithm="ring", out=mine)
        else:
            y = comm.allreduce(mine, algorithm="ring", **({"timeout": 60.0} if r % 2 else {}))
        run.check(name, y, small * (p * (p + 1) // 2))
    rings = [v.lane is not None for k, v in comm._plans.items()
             if k[0] == "allreduce" and v.algorithm == "ring" and v.args.n <= 256
             and v.args.dtype is v.args.result]
    assert rings and all(rings) == (comm.transport is not None), (rings, p)  # p = 1: solo lanes
    if comm.transport is None:
        run.count += 1
        return
    for op, dtype in ((Op.SUM, "float64"), (Op.AVG, "bfloat16"), (Op.BXOR, "int16")):
        for repeat in range(4):
            name = f"ring allreduce lane kept {op.value} {dtype} call {repeat}"
            xs = [rank_data(dtype, (p + 2,), i, seed_of(name), op) for i in range(p)]
            mine = xs[r].copy()
            timeout = {"timeout": 60.0} if (r + repeat) % 2 else {}
            with lanes_only(("_allreduce",), "the ring left its allreduce lane", when=repeat):
                y = comm.allreduce(mine, op=op, algorithm="ring",
                                   out=mine if repeat == 3 else None, **timeout)
            run.check(name, y, reduce_ranks(op, xs))
    run.count += 1


def reduce_scatter_lane_cases(run):
    """The reduce_scatter lane (ReduceScatterLane in pycoll/_lane_reduce.pyx)
    beside the general path: repeated calls of every (op, dtype) with
    uneven blocks; the same bits as the general path (a call with a
    timeout) with NaN payloads naming the rank, which show swapped
    operands; some ranks take the general path (a strided out) while the
    others take the lane, and they meet on the same messages; an out that
    overlaps x, and blocks too few to fill every rank."""
    comm, p, r = run.comm, run.p, run.r
    rows = 2 * p + 1                               # uneven blocks
    for algo in ("ring", "recursive_halving", "auto"):
        for op, dtype in run.some(reduction_pairs()):
            for repeat in range(3):
                name = f"reduce_scatter lane {algo} {op.value} {dtype} call {repeat}"
                xs = [rank_data(dtype, (rows, 2), i, seed_of(name), op) for i in range(p)]
                mine = xs[r].copy()
                block = np.array_split(reduce_ranks(op, xs), p)[r]
                if repeat == 2 and r % 2 == 1:      # the general path: a strided out, written back
                    target = np.zeros((2 * len(block), 2), block.dtype)
                    y = comm.reduce_scatter(mine, op=op, algorithm=algo, out=target[::2])
                    assert not bits(target[1::2]).any(), name
                elif repeat == 2:
                    out = np.empty_like(block)
                    y = comm.reduce_scatter(mine, op=op, algorithm=algo, out=out)
                    assert y is out, name
                else:
                    y = comm.reduce_scatter(mine, op=op, algorithm=algo)
                run.check(name, y, block)
                assert np.array_equal(bits(mine), bits(xs[r])), f"{name}: x changed"
        x = np.array([0, 1.5, -0.0, 2, np.nan] * p, np.float32)
        bits(x)[0::5] = 0x7fc00000 | (r + 1)
        for op in (Op.MAX, Op.SUM):
            for _ in range(2):
                lane = comm.reduce_scatter(x, op=op, algorithm=algo)
                general = comm.reduce_scatter(x, op=op, algorithm=algo, timeout=60)
                assert bits(lane).tobytes() == bits(general).tobytes(), \
                    f"reduce_scatter lane vs general path {algo} {op.value}"
        run.count += 1
    shared = np.arange(4.0 * p)
    for _ in range(2):                              # out overlaps x: the general path copies
        shared[:] = np.arange(4.0 * p)
        y = comm.reduce_scatter(shared, out=shared[:4])
        run.check("reduce_scatter lane overlap", y, np.arange(4.0 * r, 4.0 * r + 4) * p)
    # Recursive halving has its lane at every p, the fold's extra steps
    # included; from the second call on, no rank leaves it.
    halving = [v.lane is not None for k, v in comm._plans.items()
               if k[0] == "reduce_scatter" and v.algorithm == "recursive_halving"
               and v.args.dtype.name == "float32"]
    assert halving and all(halving) == (comm.transport is not None), \
        (halving, p, comm.transport_info)
    if comm.transport is not None:
        for op, dtype in ((Op.SUM, "float64"), (Op.AVG, "bfloat16"), (Op.BXOR, "int16")):
            for repeat in range(3):
                name = f"reduce_scatter halving lane {op.value} {dtype} call {repeat}"
                # (the fold's first step sends the whole vector: one segment)
                xs = [rank_data(dtype, (p + 1, 2), i, seed_of(name), op) for i in range(p)]
                kwargs = {"timeout": 60.0} if repeat == 2 and r % 2 else {}
                with lanes_only(("_reduce_scatter",), "recursive halving left its lane",
                                when=repeat):
                    y = comm.reduce_scatter(xs[r], op=op, algorithm="recursive_halving", **kwargs)
                run.check(name, y, np.array_split(reduce_ranks(op, xs), p)[r])
    # Blocks too few for every rank: the lanes send no empty message
    # (Note [Empty lanes]), beside ranks on the general path (a strided out).
    for rows in sorted({p - 1, p // 2}):
        few = (np.arange(rows, dtype=np.float32) + 1) * (r + 1)
        want = np.array_split(np.arange(rows, dtype=np.float32) + 1, p)[r] * (p * (p + 1) // 2)
        for algo in ("ring", "recursive_halving"):
            for repeat in range(3):
                name = f"reduce_scatter lane {algo}: {rows} rows, call {repeat}"
                if repeat == 1 and r % 2 == 1:
                    target = np.zeros(2 * len(want), np.float32)
                    y = comm.reduce_scatter(few, algorithm=algo, out=target[::2])
                else:
                    y = comm.reduce_scatter(few, algorithm=algo)
                run.check(name, y, want)
    lanes = sum(1 for k, v in comm._plans.items()
                if k[0] == "reduce_scatter" and v.lane is not None)
    assert (lanes > 0) == (comm.transport is not None), (lanes, comm.transport_info)
    if comm.transport is not None and p > 1:
        few_lanes = [(k[2], v.algorithm) for k, v in comm._plans.items()
                     if k[0] == "reduce_scatter" and k[2] in {(p - 1,), (p // 2,)}
                     and v.lane is not None]
        assert len(few_lanes) == 2 * len({p - 1, p // 2}), few_lanes
    y = comm.allreduce(np.array([r + 1.0]))
    run.check("reduce_scatter lane: tags agree after", y, np.array([p * (p + 1) / 2]))
    run.count += 1


def overlapped_allgather_cases(run):
    """Every allgather puts this rank's block in place itself, copying a
    block of 64 KiB or more while its first step sends it from the input;
    uneven sizes, in place and out, small blocks too."""
    comm, p, r = run.comm, run.p, run.r
    for algo in ALGORITHMS["allgather"]:
        for base in (20000, 5):                                 # float32 rows of 80 KB and up; tiny
            rows = [base + 3000 * i * (base > 5) + i for i in range(p)]
            full = np.concatenate([np.arange(n, dtype=np.float32) + 1e5 * i
                                   for i, n in enumerate(rows)])
            lo, hi = sum(rows[:r]), sum(rows[:r + 1])
            mine = full[lo:hi].copy()
            name = f"allgather {algo} own block {base}"
            for _ in range(2):
                y = comm.allgather(mine, algorithm=algo, sizes=rows)
                run.check(name, y, full)
                run.same_everywhere(name, y)
            assert np.array_equal(mine, full[lo:hi]), name          # the input is untouched
            out = np.zeros_like(full)
            out[lo:hi] = mine
            comm.allgather(out[lo:hi], algorithm=algo, sizes=rows, out=out)
            run.check(name + " in place", out, full)
    run.count += 1


def partial_overlap_cases(run):
    """An out that overlaps x without being x (nor, for allgather, x's own
    block): every collective with an out= reads x as it was, on the lanes
    (which decline the call) and the general path alike, by every
    algorithm; x lies a few elements into the buffer, as numpy lets views
    do."""
    comm, p, r = run.comm, run.p, run.r
    tot = p * (p + 1) / 2
    # fewer elements than ranks too; 2000 float64 take many of the tests'
    # 256 B segments per block, so later segments of x are read after out's
    # first ones were written
    for n in (5, 3 * p, 2000):
        for algo in ("auto", *ALGORITHMS["allreduce"]):
            for shift in (3, -3):
                buf = np.arange(n + 3, dtype=np.float64) * (r + 1)
                x, out = (buf[:n], buf[3:]) if shift > 0 else (buf[3:], buf[:n])
                want = np.arange(n + 3, dtype=np.float64)[:n if shift > 0 else None][-n:] * tot
                y = comm.allreduce(x, algorithm=algo, out=out)
                run.check(f"allreduce {algo} out {shift:+d} from x, n={n}", y, want)
        for algo in ("auto", *ALGORITHMS["reduce_scatter"]):
            for _ in range(2):
                buf = np.arange(n * p + 3, dtype=np.float64) * (r + 1)
                block = np.array_split(np.arange(n * p, dtype=np.float64) * tot, p)[r]
                y = comm.reduce_scatter(buf[:n * p], algorithm=algo, out=buf[3:3 + len(block)])
                run.check(f"reduce_scatter {algo} out overlaps x, n={n}", y, block)
        for algo in ("auto", *ALGORITHMS["allgather"]):
            for _ in range(2):
                buf = np.arange(n * p + 3, dtype=np.float64) + 1e5 * r
                y = comm.allgather(buf[:n], algorithm=algo, out=buf[3:3 + n * p])
                want = np.concatenate([np.arange(n, dtype=np.float64) + 1e5 * i for i in range(p)])
                run.check(f"allgather {algo} out overlaps x, n={n}", y, want)
        for _ in range(2):
            buf = np.arange(n * p + 3, dtype=np.float64) + 1e5 * r
            y = comm.alltoall(buf[:n * p], out=buf[3:3 + n * p])
            want = np.concatenate([np.array_split(np.arange(n * p, dtype=np.float64) + 1e5 * i, p)[r]
                                   for i in range(p)])
            run.check(f"alltoall out overlaps x, n={n}", y, want)
        for algo in ("auto", *ALGORITHMS["gather"]):
            for _ in range(2):
                buf = np.arange(n * p + 3, dtype=np.float64) + 1e5 * r
                y = comm.gather(buf[:n], algorithm=algo, out=buf[3:3 + n * p] if r == 0 else None)
                if r == 0:
                    want = np.concatenate([np.arange(n, dtype=np.float64) + 1e5 * i for i in range(p)])
                    run.check(f"gather {algo} out overlaps x, n={n}", y, want)
                buf = np.arange(n * p + 3, dtype=np.float64)
                y = comm.scatter(buf[:n * p] if r == 0 else None, algorithm=algo, out=buf[3:3 + n])
                run.check(f"scatter {algo} out overlaps x, n={n}", y,
                          np.arange(n * p, dtype=np.float64)[r * n:(r + 1) * n])
        for algo in ("auto", *ALGORITHMS["reduce"]):
            buf = np.arange(n + 3, dtype=np.float64) * (r + 1)
            y = comm.reduce(buf[:n], algorithm=algo, out=buf[3:] if r == 0 else None)
            if r == 0:
                run.check(f"reduce {algo} out overlaps x, n={n}", y, np.arange(n, dtype=np.float64) * tot)
        for algo in ("auto", *ALGORITHMS["scan"]):
            for exclusive in (False, True):
                buf = np.arange(n + 3, dtype=np.float64) * (r + 1)
                y = comm.scan(buf[3:], algorithm=algo, out=buf[:n], exclusive=exclusive)
                k = r if exclusive else r + 1
                if k:
                    run.check(f"scan {algo} exclusive={exclusive} out overlaps x, n={n}", y,
                              np.arange(3, n + 3, dtype=np.float64) * k * (k + 1) / 2)
    run.count += 1


def allgather_lane_cases(run):
    """The allgather lane (pycoll/api.py _allgather_lane) beside the general
    path: repeated ring allgathers, small blocks and (with the segment left
    to the tuner, PYCOLL_SEGMENT_BYTES unset) blocks of 64 KiB and more
    that the lane copies in place while its first step is in flight; some
    ranks take the general path (a strided out) while the others take the
    lane, and they meet on the same messages."""
    comm, p, r = run.comm, run.p, run.r
    # float32 rows of 16 B: 80 KB blocks with the tuner's segments (whole
    # messages), 8 KB with the tests' 256 B ones (many segments either way)
    big = 20000 if comm.settings.segment_bytes is None else 500
    for rows, algo in ((3, "ring"), (1, "ring"), (big, "ring"), (3, "recursive_doubling"),
                       (big, "recursive_doubling"), (3, "bruck"), (big, "bruck")):
        for repeat in range(3):
            name = f"allgather lane {algo} {rows} rows call {repeat}"
            full = np.concatenate([rank_data("float32", (rows, 4), i, seed_of(name)) for i in range(p)])
            mine = full[r * rows:(r + 1) * rows].copy()
            if repeat == 2 and r % 2 == 1:          # the general path: a strided out, written back
                target = np.zeros((2 * p * rows, 4), np.float32)
                y = comm.allgather(mine, algorithm=algo, out=target[::2])
                assert y is not None and not target[1::2].any(), name
            elif repeat == 2:
                out = np.empty_like(full)
                y = comm.allgather(mine, algorithm=algo, out=out)
                assert y is out, name
            else:
                y = comm.allgather(mine, algorithm=algo)
            run.check(name, y, full)
            run.same_everywhere(name, y)
            assert np.array_equal(mine, full[r * rows:(r + 1) * rows]), f"{name}: x changed"
    for dtype in ("bfloat16", "int8", "complex128"):
        name = f"allgather lane {dtype}"
        xs = [rank_data(dtype, (2, 3), i, seed_of(name)) for i in range(p)]
        for _ in range(2):
            run.check(name, comm.allgather(xs[r]), np.concatenate(xs))
    for _ in range(2):                              # 0-d inputs: one row each
        run.check("allgather lane 0-d", comm.allgather(np.float64(r)), np.arange(p, dtype=np.float64))
    lanes_were_taken(run, ("allgather-lane",), "allgather lane")


def broadcast_lane_cases(run):
    """The broadcast lane (pycoll/api.py _broadcast_lane) beside the general
    path: ranks taking either one meet on the same messages, whichever
    ranks pass x, None or an x that does not match the root's."""
    comm, p, r = run.comm, run.p, run.r
    for root, algo in [(root, "binomial") for root in sorted({0, p - 1, p // 2})] + [(p - 1, "pipeline")]:
        for repeat in range(3):
            name = f"broadcast lane {algo} root {root} call {repeat}"
            want = rank_data("float64", (5, 2), root, seed_of(name))
            # Every third rank passes None (general path), the rest an x (lane).
            mine = want.copy() if r == root else None if (r + repeat) % 3 == 0 else np.zeros((5, 2))
            y = comm.broadcast(mine, root=root, algorithm=algo)
            run.check(name, y, want)
            run.same_everywhere(name, y)
            if mine is not None:
                assert y is mine, name
        for dtype in ("bfloat16", "int8", "complex64", "bool"):
            name = f"broadcast lane {dtype} root {root}"
            want = rank_data(dtype, (7,), root, seed_of(name))
            for _ in range(2):
                y = comm.broadcast(want.copy() if r == root else np.zeros_like(want), root=root)
                run.check(name, y, want)
    # A rank whose x does not match the root's, in the middle of the tree:
    # it forwards the root's data to its children, then raises; the
    # others, lane or not, get the root's data.
    odd = p // 2 if p > 2 else None
    for _ in range(2):
        x = np.zeros(4) if r == odd else np.zeros(3)
        if r == 0:
            x[:] = [1, 2, 3]
        if r == odd and r != 0:
            expect(ValueError, "x has shape (4,), expected (3,)", comm.broadcast, x, 0)
            assert not x.any(), "a mismatching x was written"
        else:
            comm.broadcast(x, root=0)
            run.check("broadcast lane beside a mismatch", x, np.array([1.0, 2, 3]))
    # Read-only x on a receiver: refused, after taking part. On the root:
    # refused on every rank through the header (broadcast is in place on
    # every rank, DESIGN.md), the receivers' buffers untouched.
    ro = np.arange(3.0)
    ro.setflags(write=False)
    if r == 0:
        comm.broadcast(np.arange(3.0), root=0)
    else:
        expect(ValueError, "read-only", comm.broadcast, ro, 0)
    mine = np.full(3, -1.0)
    expect(ValueError, "x is read-only", comm.broadcast, ro if r == p - 1 else mine, p - 1)
    assert (mine == -1).all(), "a receiver's x was written after the root's error"
    inline_broadcast_cases(run)
    broadcast_into_none_cases(run)
    lanes = sum(1 for k, v in comm._plans.items() if k[0] == "broadcast-lane" and v is not None)
    assert (lanes > 0) == (comm.transport is not None), (lanes, comm.transport_info)
    pipeline = comm._plans.get(("broadcast-lane", np.dtype(np.float64), (5, 2), p - 1, "pipeline"))
    assert (pipeline is not None) == (comm.transport is not None and p == 2), p
    y = comm.allreduce(np.array([r + 1.0]))
    run.check("broadcast lane: tags agree after", y, np.array([p * (p + 1) / 2]))
    run.count += 1


def broadcast_into_none_cases(run):
    """Receivers passing x=None take the lane of the last shape they
    received (Note [Broadcasts into None] in pycoll/_lanes.py): repeated
    calls stay on it; a root that changes dtype or shape, inline or not,
    sends a bad x, or ranks passing a timeout, still give every rank the
    root's data (or error) in a new array, beside ranks passing an x."""
    comm, p, r = run.comm, run.p, run.r
    small = (np.dtype(np.float64), (5, 2))
    if comm.transport is not None and p > 1:
        name = "broadcast into None"
        for repeat in range(4):
            want = rank_data("float64", (5, 2), 0, seed_of(f"{name} {repeat}"))
            with lanes_only(("_broadcast",), f"{name}: left its lane", when=repeat > 1):
                y = comm.broadcast(want.copy() if r == 0 else None, root=0, algorithm="binomial",
                                   timeout=60.0 if r % 2 else None)
            run.check(f"{name} call {repeat}", y, want)
        assert comm._plans.get(("broadcast-none", 0, "binomial")) == (r > 0 and small or None)
    # what the root sends changes under the receivers' guess
    sends = [("float64", (5, 2)), ("float64", (5, 2)), ("int8", (5, 2)), ("float64", (7,)),
             ("float32", (3000,)), ("float32", (3000,)), ("bad", None), ("float64", (5, 2)),
             ("float64", (5, 2))]
    for i, (dtype, shape) in enumerate(sends):
        name = f"broadcast into None, the root sends {dtype} {shape} (call {i})"
        if dtype == "bad":
            ro = np.zeros(3)
            ro.setflags(write=False)
            expect(ValueError, "read-only", comm.broadcast, ro if r == p - 1 else None, p - 1)
            continue
        want = rank_data(dtype, shape, p - 1, seed_of(name))
        mine = want.copy() if r == p - 1 else None if r % 3 != 1 else np.zeros_like(want)
        y = comm.broadcast(mine, root=p - 1, **({"timeout": 60.0} if i % 2 else {}))
        run.check(name, y, want)
        assert mine is None or y is mine, name
    # A receiver's x of another signature, on the lane that "auto" shares
    # with "binomial" (made by the calls above): after the header it goes on
    # with "auto" resolved at the root's size (at p > 2 and this size, not
    # the binomial tree), takes part, then raises.
    want = rank_data("float32", (3000,), p - 1, seed_of("broadcast beside a shared lane"))
    for _ in range(2):
        if r == 1 and p > 1 and r != p - 1:
            expect(TypeError, "x has dtype float64", comm.broadcast, np.zeros((5, 2)), p - 1)
        else:
            y = comm.broadcast(want.copy() if r == p - 1 else None, root=p - 1)
            run.check("broadcast beside a shared lane", y, want)
    run.count += 1


def inline_broadcast_cases(run):
    """A small broadcast on the tree sends its data inside the header's
    message (_header.INLINE_BYTES): one message per edge, so one tag per call;
    with no data the header is the only message. Lane and general-path receivers (x or None) meet it at the limit, past
    it, and when the root's header is not the one a lane expects."""
    from pycoll._header import INLINE_BYTES

    comm, p, r = run.comm, run.p, run.r
    for nbytes, messages in [(0, 1), (8, 1), (INLINE_BYTES, 1), (INLINE_BYTES + 8, 2)]:
        for repeat in range(3):
            name = f"inline broadcast {nbytes} B call {repeat}"
            want = rank_data("float64", (nbytes // 8,), 0, seed_of(name))
            mine = want.copy() if r == 0 else None if (r + repeat) % 2 else np.zeros_like(want)
            before = comm._calls.tags_taken
            y = comm.broadcast(mine, root=0, algorithm="binomial")
            taken = comm._calls.tags_taken - before
            assert taken == messages, (name, taken)
            run.check(name, y, want)
            run.same_everywhere(name, y)
    # The named scatter_allgather keeps its own messages after the header.
    before = comm._calls.tags_taken
    y = comm.broadcast(np.arange(4.0) if r == 0 else np.zeros(4), algorithm="scatter_allgather")
    taken = comm._calls.tags_taken - before
    assert taken == 2, taken
    run.check("scatter_allgather broadcast, not inline", y, np.arange(4.0))
    # Lane receivers expecting (3,) float64 while the root sends an inline
    # (2,) and then a 7-d array (a long header, JSON after the word): every
    # receiver forwards what it got, then raises; the tags still agree.
    for _ in range(2):
        comm.broadcast(np.arange(3.0) if r == 0 else np.zeros(3))     # the lanes exist
    for sent, message in [(np.arange(2.0), "x has shape (3,), expected (2,)"),
                          (np.zeros((1,) * 7), "x has shape (3,), expected (1, 1, 1, 1, 1, 1, 1)")]:
        x = np.full(3, -1.0)
        if r == 0:
            comm.broadcast(sent, root=0)
        else:
            expect(ValueError, message, comm.broadcast, x, 0)
            assert (x == -1).all(), "a mismatching x was written"
    y = comm.allreduce(np.array([r + 1.0]))
    run.check("inline broadcast: tags agree after", y, np.array([p * (p + 1) / 2]))
    run.count += 1


def group_fail(run):
    """For the harness tests: the last rank fails while the others wait."""
    if run.r == run.p - 1:
        raise RuntimeError(f"rank {run.r} fails on purpose")
    run.comm.allreduce(np.ones(4))


def group_silent(run):
    """For the harness tests: the last rank exits cleanly without reporting."""
    if run.r == run.p - 1:
        run.finish()
        sys.exit(0)




# ---------------------------------------------------------------------------
# Async collectives and fusion


def group_async(run):
    """async_op=True on every collective: handles in issue order, results
    equal to the blocking calls', blocking calls queued behind async ones."""
    comm, p, r = run.comm, run.p, run.r
    x = np.arange(12.0) * (r + 1)
    handles = [
        ("allreduce", comm.allreduce(x, async_op=True), x * 0 + np.arange(12.0) * p * (p + 1) / 2),
        ("broadcast", comm.broadcast(np.arange(5.0) if r == 0 else None, async_op=True), np.arange(5.0)),
        ("reduce", comm.reduce(x, root=p - 1, async_op=True),
         np.arange(12.0) * p * (p + 1) / 2 if r == p - 1 else None),
        ("gather", comm.gather(np.array([r]), root=0, async_op=True), np.arange(p) if r == 0 else None),
        ("scatter", comm.scatter(np.arange(2 * p) if r == 0 else None, async_op=True),
         np.arange(2 * p)[2 * r:2 * r + 2]),
        ("allgather", comm.allgather(np.array([r, r]), async_op=True), np.repeat(np.arange(p), 2)),
        ("reduce_scatter", comm.reduce_scatter(np.ones(2 * p), async_op=True), np.full(2, float(p))),
        ("alltoall", comm.alltoall(np.arange(p) + 10 * r, async_op=True), np.arange(p) * 10 + r),
        ("scan", comm.scan(np.array([r + 1]), async_op=True), np.array([(r + 1) * (r + 2) // 2])),
        ("barrier", comm.barrier(async_op=True), None),
    ]
    # a blocking call issued now runs after all of them (issue order)
    y = comm.allreduce(np.array([1.0]))
    assert all(h.done() for _, h, _ in handles), "a blocking call overtook queued async calls"
    run.check("blocking after async", y, np.array([float(p)]))
    for name, h, expected in handles:
        got = h.wait()
        if expected is None:
            assert got is None, f"{name}: {got!r}"
        else:
            run.check(f"async {name}", got, expected)
    # many in flight, waited out of order
    hs = [comm.allreduce(np.full(100, float(k + r)), async_op=True) for k in range(20)]
    import datetime
    for k in reversed(range(20)):
        # wait()'s timeout: seconds of any real type, or a timedelta
        timeout = (None, np.float32(60), datetime.timedelta(minutes=1))[k % 3]
        run.check(f"async burst {k}", hs[k].wait(timeout),
                  np.full(100, float(k * p + p * (p - 1) / 2)))
    expect(TypeError, "timeout must be a number of seconds, got str", hs[0].wait, "soon")
    # Another thread waits on the last of a burst (and may run the queued
    # calls itself, Note [Waiting runs the queue]) while this one issues a
    # blocking call behind them: one call at a time, in issue order.
    import threading
    hs = [comm.allreduce(np.full(10, float(k + r)), async_op=True) for k in range(8)]
    waited = []
    waiter = threading.Thread(target=lambda: waited.append(hs[-1].wait()))
    waiter.start()
    y = comm.allreduce(np.array([2.0]))
    waiter.join(120)
    assert not waiter.is_alive() and len(waited) == 1
    run.check("blocking behind a waiting thread", y, np.array([2.0 * p]))
    for k, h in enumerate(hs):
        run.check(f"burst waited from a thread {k}", h.wait(),
                  np.full(10, float(k * p + p * (p - 1) / 2)))
    # Two threads, each on a communicator of its own, at once: small
    # messages (lanes) on one, large (segments) on the other.
    others = [comm.split(0), comm.split(0)]
    failures = []

    def on_its_own(c, k, n):
        try:
            for i in range(40):
                y = c.allreduce(np.full(n, float(r + k + i), np.float32))
                assert np.all(y == sum(float(j + k + i) for j in range(p))), (k, i, y[:3])
                g = c.allgather(np.array([r * 10 + k]))
                assert g.tolist() == [j * 10 + k for j in range(p)], (k, i, g)
        except BaseException as exc:
            failures.append(exc)
    workers = [threading.Thread(target=on_its_own, args=(c, k, n))
               for k, (c, n) in enumerate(zip(others, (5, 70000)))]
    for w in workers:
        w.start()
    for w in workers:
        w.join(300)
    assert not any(w.is_alive() for w in workers) and not failures, failures
    for c in others:
        c.free()
    run.count += 1
    # errors: bad input raises at the call, on the caller's thread
    expect(TypeError, "MAX is not defined for complex64", comm.allreduce,
           np.ones(2, np.complex64), "max", "auto", None, None, True)
    # an async result is the same bits as the blocking one
    z = sample("float32", 999, np.random.default_rng(r), special=True)
    a, b = comm.allreduce(z, async_op=True).wait(), comm.allreduce(z)
    run.check("async bits", a, b)
    run.same_everywhere("async bits", a)


def group_async_lanes(run):
    """Note [Async lanes] in api.py: an async call, in its turn, runs on
    the lane its blocking twin would take: the lanes are made by async
    calls alone, the results are exact, and ranks that call the same
    collective async and blocking (the lane, the general path, or a lane
    run by a waiting thread) meet on the same messages."""
    p, r = run.p, run.r
    sub = pycoll.Communicator(MPI.COMM_WORLD)       # no lane made yet
    x = np.arange(4.0) + r
    whole = np.arange(4.0 * p) + 10 * r
    total = p * np.arange(4.0) + p * (p - 1) / 2
    root = p - 1
    calls = {
        "allreduce": (lambda a: sub.allreduce(x, async_op=a), total),
        "reduce": (lambda a: sub.reduce(x, root=root, async_op=a), total if r == root else None),
        "broadcast": (lambda a: sub.broadcast(x.copy() if r == root else np.empty(4), root=root,
                                              async_op=a),
                      np.arange(4.0) + root),
        "gather": (lambda a: sub.gather(x, root=root, async_op=a),
                   np.concatenate([np.arange(4.0) + i for i in range(p)]) if r == root else None),
        "scatter": (lambda a: sub.scatter(whole if r == root else None, root=root, async_op=a),
                    np.array_split(np.arange(4.0 * p) + 10 * root, p)[r]),
        "allgather": (lambda a: sub.allgather(x, async_op=a),
                      np.concatenate([np.arange(4.0) + i for i in range(p)])),
        "reduce_scatter": (lambda a: sub.reduce_scatter(whole, async_op=a),
                           np.array_split(p * np.arange(4.0 * p) + 10 * p * (p - 1) / 2, p)[r]),
        "alltoall": (lambda a: sub.alltoall(whole, async_op=a),
                     np.concatenate([np.array_split(np.arange(4.0 * p) + 10 * i, p)[r]
                                     for i in range(p)])),
        "scan": (lambda a: sub.scan(x, async_op=a), (r + 1) * np.arange(4.0) + r * (r + 1) / 2),
        "barrier": (lambda a: sub.barrier(async_op=a), None),
    }

    def check(name, got, want):
        if want is None:
            assert got is None, (name, got)
        else:
            run.check(name, got, want)
    for name, (call, want) in calls.items():
        # three in flight, waited last first; then blocking on even ranks
        # and async on odd ones, in one call
        handles = [call(True) for _ in range(3)]
        for k, h in reversed(list(enumerate(handles))):
            check(f"async lane {name} {k}", h.wait(), want)
        mixed = call(r % 2 == 1)
        check(f"async lane {name} mixed", mixed.wait() if r % 2 else mixed, want)
    made = {k[0] for k, v in sub._plans.items() if v is not None}
    if sub.transport is not None:
        assert {"broadcast-lane", "gather-lane", "allgather-lane", "alltoall-lane",
                "barrier-lane"} <= made, made
        assert made & {"scatter-lane", "scatter-lane-root"}, made
        assert any(k[0] == "scan" and v.lane is not None for k, v in sub._plans.items())
    sub.free()
    run.count += 1


def group_autotune(run):
    """Communicator(autotune=True) (Note [Tuning online] in _trials.py):
    every trial call exact, the same choice on every rank, and a candidate
    that one rank alone times slow dropped by all (the agreed times)."""
    from pycoll import tuning
    comm, p, r = run.comm, run.p, run.r
    tuned = pycoll.Communicator(autotune=True)
    assert tuned.settings.autotune and not comm.settings.autotune and comm.autotune_choices() == {}
    slow = {}
    if r == p - 1:
        timed = tuned._tuner._timed

        def penalised(call, name):
            result, seconds = timed(call, name)
            return result, seconds + (1.0 if name == slow["name"] else 0.0)
        tuned._tuner._timed = penalised
    root = p - 1
    cases = [
        ("allreduce", "float32", lambda x: tuned.allreduce(x), lambda s: s),
        ("allreduce", "bfloat16", lambda x: tuned.allreduce(x), lambda s: s),
        ("reduce", "float32", lambda x: tuned.reduce(x, root=root),
         lambda s: s if r == root else None),
        ("reduce_scatter", "float32", lambda x: tuned.reduce_scatter(x),
         lambda s: np.array_split(s, p)[r]),
    ]
    for collective, dtype, call, expected in cases:
        count = tuning.TUNE_MIN_BYTES // BY_NAME[dtype].itemsize + 5    # the least tuned, and odd
        n = count * BY_NAME[dtype].itemsize
        blocks = {"reduce_scatter": -(-count // p) * BY_NAME[dtype].itemsize}
        candidates = tuning.candidates(collective, blocks.get(collective, n), p,
                                       tuned.settings, dtype)
        slow["name"] = candidates[0]
        inputs = []
        for k in range(3):
            xs = [rank_data(dtype, (count,), i, seed_of("autotune", collective, dtype, k), Op.SUM)
                  for i in range(p)]
            inputs.append((xs[r], reduce_ranks(Op.SUM, xs)))
        for step in range(1000):
            x, total = inputs[step % 3]
            name = f"autotune {collective} {dtype} call {step}"
            y, want = call(x), expected(total)
            if want is None:
                assert y is None, f"{name}: {y!r} off the root"
            else:
                run.check(name, y, want)
            choices = [c for key, c in tuned.autotune_choices().items()
                       if key[0] == collective and key[1] == np.dtype(BY_NAME[dtype].numpy)]
            assert len(choices) == 1, tuned.autotune_choices()
            if choices[0] is not None:
                break
        else:
            raise AssertionError(f"{collective} {dtype}: no choice after 1000 calls")
        chosen = choices[0]
        assert chosen in candidates, (chosen, candidates)
        if len(candidates) > 1:
            assert chosen != candidates[0], (
                f"{collective} {dtype}: rank {p - 1} timed {candidates[0]} 1 s slower, and the "
                f"ranks still chose it")
        run.same_everywhere(f"autotune {collective} {dtype} choice",
                            np.frombuffer(chosen.encode(), np.uint8))
        x, total = inputs[0]
        y = call(x)
        if r == root or collective != "reduce":
            run.check(f"autotune {collective} {dtype} chosen", y, expected(total))
    signatures = len(tuned.autotune_choices())
    # Not tuned: a named algorithm, an async call, a small input, bad input
    # (raised before any message, on every rank).
    count = tuning.TUNE_MIN_BYTES // 4
    x = np.ones(count, np.float32)
    run.check("autotune named", tuned.allreduce(x * 2, algorithm="tree"),
              np.full(count, 2.0 * p, np.float32))
    run.check("autotune async", tuned.allreduce(x * 3, async_op=True).wait(),
              np.full(count, 3.0 * p, np.float32))
    run.check("autotune small", tuned.allreduce(x[:-1]), np.full(count - 1, p, np.float32))
    expect(TypeError, "MAX is not defined for complex64", tuned.allreduce,
           np.ones(count, np.complex64), "max")
    assert len(tuned.autotune_choices()) == signatures, tuned.autotune_choices()
    tuned.free()


def group_fusion(run):
    comm, p, r = run.comm, run.p, run.r
    from pycoll import FusionManager
    rng = np.random.default_rng(7)                  # the same shapes on every rank
    shapes = [tuple(rng.integers(1, 9, rng.integers(1, 3))) for _ in range(23)] + [(0,), (3, 0)]
    def inputs(dtype, rank):
        return [rank_data(dtype, s, rank, seed_of("fusion", dtype, k), Op.SUM) for k, s in enumerate(shapes)]

    @functools.cache
    def oracle(dtype, op):
        """Exact data: every order of combination gives these bits."""
        everyone = [inputs(dtype, i) for i in range(p)]
        return [reduce_ranks(op, [mine[k] for mine in everyone]) for k in range(len(shapes))]
    modes = ("cap", "ids", "split", "pack", "pieces", "each")
    for dtype, mode in run.some(itertools.product(("int32", "float32", "bfloat16", "float64"), modes)):
        op = Op.SUM if dtype == "int32" else Op.AVG
        expected = oracle(dtype, op)          # once per dtype, not per mode
        arrays = inputs(dtype, r)
        kwargs = {}
        fm = FusionManager(op=op, comm=comm, bucket_bytes=64)
        assert repr(fm) == (f"<pycoll.FusionManager {op.value}, buckets of 64 B, "
                            f"on <Communicator rank {r} of {p}>>"), repr(fm)
        if mode == "ids":
            kwargs["fusion"] = [k % 3 for k in range(len(shapes))]
        elif mode == "split":
            kwargs["split_indices"] = [5, 11]
        elif mode in ("pack", "pieces", "each"):
            fm = FusionManager(op=op, comm=comm, bucket_bytes=1 << 20, strategy=mode)
            ways = {way for _, way, _ in fm.plan(arrays)}
            assert ways == {mode}, (mode, ways)
        got = fm.allreduce(arrays, **kwargs)
        assert got is not None and all(g is a for g, a in zip(got, arrays))
        for k, (g, e) in enumerate(zip(arrays, expected)):
            run.check(f"fusion {dtype} {mode} {k}", g, e)
            run.same_everywhere(f"fusion {dtype} {mode} {k}", g)
        # a second call reuses the pack buffers and plans
        again = inputs(dtype, r)
        fm.allreduce(again, **kwargs)
        for k, (g, e) in enumerate(zip(again, expected)):
            run.check(f"fusion again {dtype} {mode} {k}", g, e)
    # floats, random data: bitwise equal to the same algorithm on the flat buffer
    arrays = [sample("float32", (37,), np.random.default_rng([r, k])) for k in range(6)]
    flat = np.concatenate([a.ravel() for a in arrays])
    for algo in ALGORITHMS["allreduce"]:
        for strategy in ("pack", "pieces"):
            fm = FusionManager(Op.SUM, comm=comm, algorithm=algo, bucket_bytes=1 << 20, strategy=strategy)
            (_, way, used), = fm.plan(arrays)
            unpacked = getattr(REGISTRY["allreduce"][algo], "PIECES", False)
            assert used == algo and way == ("pieces" if strategy == "pieces" and unpacked else "pack")
            copies = [a.copy() for a in arrays]
            fm.allreduce(copies)
            reference = comm.allreduce(flat, algorithm=algo)
            run.check(f"fusion flat {algo} {way}", np.concatenate([c.ravel() for c in copies]),
                      reference)
    # one allreduce per array of many distinct sizes: every Plan stays cached
    # (the cache does not change with p: below p = WIDE, Note [Wide launches])
    if p < WIDE:
        plans = len(comm._plans)
        for n in range(1, 301):
            comm.allreduce(np.ones(n, np.float32))
        assert len(comm._plans) >= plans + 300, (plans, len(comm._plans))
    # megabyte arrays: in the library's own segments (own_segments)
    with own_segments(comm) as mine:
        fusion_model_cases(run, mine)
    # accumulate carries through
    halves = [np.full(5, 1.0 if r == 0 else 2.0 ** -9, bf16()) for _ in range(3)]
    FusionManager(Op.SUM, comm=comm, accumulate="float32").allreduce(halves)
    for h in halves:
        run.check("fusion accumulate", h, np.full(5, F32(1.0) + F32(2.0 ** -9) * (p - 1), F32).astype(bf16()))
    # data-parallel: ready in reverse (as backward does); buckets leave in a
    # fixed order whatever order the ranks mark in
    grads = [np.full(s, float(r + 1), np.float32) for s in [(3,), (40,), (5, 5), (2,), (100,)]]
    fm = FusionManager(op=Op.AVG, comm=comm, bucket_bytes=128)
    for order in ("backward", "forward"):
        fm.register(grads, order=order)
        for step in range(3):
            for g in grads:
                g[...] = (r + 1) * (step + 1)
            marks = list(reversed(range(len(grads))))
            if r % 2:
                marks = marks[1:] + marks[:1]       # ranks differ in readiness order
            for k, i in enumerate(marks):
                fm.mark_ready(i)
                if order == "backward" and k == len(marks) - 2 and not r % 2:
                    assert fm._registered["next"] > 0, "no bucket left before the last array was ready"
            fm.wait()
            for g in grads:
                run.check(f"data-parallel {order} step {step}", g,
                          np.full(g.shape, (step + 1) * (p + 1) / 2, np.float32))
    # fused reduce_scatter and allgather: the ZeRO round trip
    full = [rank_data("float64", s, r, seed_of("zero", k), Op.SUM) for k, s in
            enumerate([(7,), (3, 4), (1,), (2 * p + 1, 2)])]
    totals = [reduce_ranks(Op.SUM, [rank_data("float64", a.shape, i, seed_of("zero", k), Op.SUM)
                                    for i in range(p)]) for k, a in enumerate(full)]
    fm = FusionManager(Op.SUM, comm=comm, bucket_bytes=100)
    shards = fm.reduce_scatter(full)
    for k, (s, t) in enumerate(zip(shards, totals)):
        run.check(f"fused reduce_scatter {k}", s, np.array_split(t, p)[r])
    out = [np.zeros_like(a) for a in full]
    fm.allgather(shards, out)
    for k, (o, t) in enumerate(zip(out, totals)):
        run.check(f"fused allgather {k}", o, t)
    fusion_layout_cases(run)
    # bad input, before any message
    fm = FusionManager(Op.SUM, comm=comm)
    expect(TypeError, "fusion id 1 holds arrays of dtypes", fm.allreduce,
           [np.ones(2, np.float32), np.ones(2)], [1, 1])
    expect(ValueError, "fusion has 1 ids for 2 arrays", fm.allreduce, [np.ones(2), np.ones(2)], [1])
    expect(ValueError, "fusion ids must be >= 0", fm.allreduce, [np.ones(2)], [-1])
    expect(ValueError, "split_indices must increase", fm.allreduce,
           [np.ones(2) for _ in range(3)], None, [2, 1])
    same = [np.ones(2), np.ones(2)]
    fm.allreduce(same, [1, 1])              # then ids equal to these, not ints
    expect(TypeError, "fusion must be a sequence of ints", fm.allreduce, same, [1.0, 1.0])
    fm.allreduce(same, None, [1])
    expect(TypeError, "split_indices must be a sequence of ints", fm.allreduce, same, None, [1.0])
    expect(TypeError, "AVG needs a floating", FusionManager(op=Op.AVG, comm=comm).allreduce,
           [np.ones(2, np.int32)])
    expect(ValueError, "bucket_bytes must be a whole number of bytes, got 1.5",
           FusionManager, comm=comm, bucket_bytes=1.5)
    expect(TypeError, "bucket_bytes must be a number of bytes, got '64'",
           FusionManager, comm=comm, bucket_bytes="64")
    assert FusionManager(Op.SUM, comm=comm, bucket_bytes=25e6).bucket_bytes == 25_000_000
    # The default op is AVG (DESIGN.md; gradients_mean, DDP, Horovod):
    # gradients averaged, and integers refused as allreduce refuses them.
    mean = FusionManager(comm=comm)
    grads = [np.full(3, float(r)), np.full((2, 2), 2.0 * r, np.float32)]
    mean.allreduce(grads)
    run.check("default op averages", grads[0], np.full(3, (p - 1) / 2))
    run.check("default op averages float32", grads[1], np.full((2, 2), p - 1.0, np.float32))
    expect(TypeError, "AVG needs a floating or complex dtype, got int32", mean.allreduce,
           [np.ones(2, np.int32)])
    ro = np.ones(3)
    ro.setflags(write=False)
    expect(ValueError, "read-only", fm.allreduce, [ro])
    # Note [Arrays that share memory]: refused before any message, nothing written
    tied, flat = np.full(5, 2.0), np.arange(12.0)
    for arrays, (i, j) in [([np.ones(3), tied, tied], (1, 2)),
                           ([flat[:7], np.ones(2), flat[6:]], (0, 2)),
                           ([flat.reshape(3, 4)[:, 1], flat[::-1][6:8]], (0, 1))]:
        expect(ValueError, f"arrays[{i}] and arrays[{j}] share memory", fm.allreduce, arrays)
        expect(ValueError, f"arrays[{i}] and arrays[{j}] share memory", fm.register, arrays)
    run.check("shared arrays untouched", np.concatenate([tied, flat]),
              np.concatenate([np.full(5, 2.0), np.arange(12.0)]))
    evens, odds = flat[::2], flat[1::2]     # interleaved, no element shared
    fm.allreduce([evens, odds, np.ones(2)])
    run.check("interleaved views", flat, np.arange(12.0) * p)
    expect(ValueError, "never marked ready", _unready, fm)
    fm.register([np.ones(2), np.ones(3)])
    for bad in (1.0, True):
        expect(TypeError, f"mark_ready takes an array's index (an int), got {bad!r}",
               fm.mark_ready, bad)
    fm.mark_ready(np.int64(0))
    fm.mark_ready(1)
    fm.wait()
    expect(ValueError, "order must be one of backward, forward", fm.register, [np.ones(2)], None, None,
           "sideways")
    expect(ValueError, "strategy must be one of", FusionManager, Op.SUM, comm, 64, "auto", None, "zip")
    y = comm.allreduce(np.array([1.0]))
    run.check("after fusion errors", y, np.array([float(p)]))


def fusion_model_cases(run, comm):
    """What the model packs, splits or sends alone, each exact: arrays of
    up to 2 MiB, so run on a communicator with the library's own segments."""
    from pycoll import FusionManager
    p, r = run.p, run.r
    # "split": in one bucket, the small arrays packed and the large ones alone,
    # in place; bitwise the algorithm on the packed small ones and each large
    # one's own allreduce
    rng = np.random.default_rng([r, 11])
    mixed = [sample("float32", (1 << 19 if k in (3, 9) else 3 + k,), rng) for k in range(12)]
    for strategy in (None, "split"):
        fm = FusionManager(Op.SUM, comm=comm, strategy=strategy)
        entries = fm.plan(mixed)
        assert [(b, w) for b, w, _ in entries] == [
            ([k for k in range(12) if k not in (3, 9)], "pack"), ([3], "each"), ([9], "each")], entries
        algo = entries[0][2]
        copies = [a.copy() for a in mixed]
        fm.allreduce(copies)
        small = np.concatenate([a for k, a in enumerate(mixed) if k not in (3, 9)])
        reference = comm.allreduce(small, algorithm=algo)
        run.check(f"fusion split {strategy} packed", np.concatenate(
            [a for k, a in enumerate(copies) if k not in (3, 9)]), reference)
        for k in (3, 9):
            run.check(f"fusion split {strategy} alone {k}", copies[k], comm.allreduce(mixed[k]))
            run.same_everywhere(f"fusion split {strategy} alone {k}", copies[k])
    # the model's choice: many small arrays are packed, a few large ones go unpacked
    # or one by one, and whatever it picks is exact
    fm = FusionManager(Op.SUM, comm=comm)
    small = [np.full(3, r, np.float32) for _ in range(50)]
    assert [way for _, way, _ in fm.plan(small)] == ["pack"], fm.plan(small)
    # and 8 x 64 KiB, its copies in the caches (Note [Copies in the caches])
    mid = [np.full(1 << 14, r + 1.0, np.float32) for _ in range(8)]
    assert [way for _, way, _ in fm.plan(mid)] == ["pack"], fm.plan(mid)
    fm.allreduce(mid)
    for a in mid:
        run.check("fusion 8 x 64 KiB", a, np.full(a.shape, p * (p + 1) / 2, np.float32))
    large = [np.full(1 << 19, r + 1.0, np.float32) for _ in range(3)]
    (_, way, _), = fm.plan(large)
    assert way in ("pieces", "each"), way
    fm.allreduce(large)
    for a in large:
        run.check("fusion large", a, np.full(a.shape, p * (p + 1) / 2, np.float32))
    fusion_pages(run, fm, large)


def fusion_layout_cases(run):
    """Ranks whose arrays lie differently (views of one buffer, separate
    arrays, a strided member) still send every bucket the same way: the
    plan is agreed, the messages match, the results are exact. Then
    autotune: every trial exact, the same choice everywhere."""
    comm, p, r = run.comm, run.p, run.r
    from pycoll import FusionManager
    from pycoll.fusion import flat_buffer
    shapes = [(300,), (20, 5), (0,), (7,), (4000,), (3,)]

    def arrays_as(kind, step):
        if kind == "views":
            _, arrays = flat_buffer(shapes, np.float64)
        elif kind == "strided":
            arrays = [np.zeros(s) for s in shapes]
            arrays[1] = np.zeros((5, 20)).T                 # not C-contiguous
        else:
            arrays = [np.zeros(s) for s in shapes]
        for k, a in enumerate(arrays):
            a[...] = rank_data("float64", a.shape, r, seed_of("layout", k, step), Op.SUM)
        return arrays

    def expected(step):
        return [reduce_ranks(Op.SUM, [rank_data("float64", s, i, seed_of("layout", k, step), Op.SUM)
                                      for i in range(p)]) for k, s in enumerate(shapes)]
    kinds = ("views", "separate", "strided")
    for strategy in (None, "pieces"):
        fm = FusionManager(Op.SUM, comm=comm, bucket_bytes=1 << 20, strategy=strategy)
        for step in range(4):
            # the layout of each rank changes from call to call, without new shapes
            arrays = arrays_as(kinds[(r + step) % len(kinds)] if step < 3 else "views", step)
            plan = fm.plan(arrays)
            run.same_everywhere(f"fusion layout plan {strategy} {step}",
                                np.frombuffer(repr(plan).encode(), np.uint8))
            fm.allreduce(arrays)
            for k, (a, e) in enumerate(zip(arrays, expected(step))):
                run.check(f"fusion layout {strategy} step {step} array {k}", a, e)
    # autotune: the model's plan and each strategy, AUTOTUNE_ROUNDS calls each
    from pycoll.fusion.manager import AUTOTUNE_ROUNDS
    fm = FusionManager(Op.SUM, comm=comm, bucket_bytes=1 << 20, autotune=True)
    ints = [np.zeros(s, np.int64) for s in shapes]
    for step in range(AUTOTUNE_ROUNDS * 4 + 2):
        for k, a in enumerate(ints):
            a[...] = rank_data("int64", a.shape, r, seed_of("autotune", k, step), Op.SUM)
        fm.allreduce(ints)
        for k, a in enumerate(ints):
            want = reduce_ranks(Op.SUM, [rank_data("int64", a.shape, i, seed_of("autotune", k, step),
                                                   Op.SUM) for i in range(p)])
            run.check(f"autotune step {step} array {k}", a, want)
    trials, = fm._trials.values()
    assert trials.chosen in trials.candidates and trials.calls == AUTOTUNE_ROUNDS * len(trials.candidates)
    run.same_everywhere("autotune choice", np.frombuffer(repr(fm.plan(ints)).encode(), np.uint8))
    assert fm._buckets(ints, None, None).ways == trials.chosen
    run.count += 1


def fusion_pages(run, fm, large):
    """Note [Pieces on small pages] in pycoll/tuning.py: the agreed layout
    counts the bytes that lie on small pages on some rank, and "pieces"
    costs SMALL_PAGE_BETA more per byte on the wire for them. Also: a
    bucket of empty arrays alone takes none of the next bucket's flags."""
    from pycoll import tuning
    from pycoll._memory import empty_small_pages
    from pycoll._resources import huge_page_bytes
    from pycoll.fusion.manager import Joins

    p, r = run.p, run.r
    apart = [np.ones(4, np.float32), np.ones(4, np.float32)]
    strided = np.ones(8, np.float32)[::2]
    layouts = fm._agree([np.zeros(0, np.float32), *apart, strided], [[0], [1, 2], [3]])
    assert layouts == [(), (False,), None], layouts
    n = sum(a.nbytes for a in large)
    if huge_page_bytes(np.ones(1)) is not None:
        # rank 0's arrays on small pages, the others' wherever numpy puts them
        arrays = [empty_small_pages(a.shape, a.dtype) if r == 0 else a.copy() for a in large]
        [layout] = fm._agree(arrays, [[0, 1, 2]])
        assert layout == (False, False) and layout.small == n, (layout, layout.small)
        run.count += 1
    on_huge, on_small = (fm.costs(large, Joins((False, False), small)) for small in (0, n // 3))
    algorithm = on_huge["pieces"][1].algorithm
    assert on_small["pieces"][1].algorithm == algorithm
    wire = tuning.REGISTRY["allreduce"][algorithm].bytes_on_wire(n, p)
    more = on_small["pieces"][0] - on_huge["pieces"][0]
    assert np.isclose(more, wire / 3 * tuning.SMALL_PAGE_BETA, rtol=1e-9, atol=0), (more, wire)
    assert p == 1 or more > 0
    assert {k: v for k, v in on_small.items() if k != "pieces"} == \
        {k: v for k, v in on_huge.items() if k != "pieces"}
    # up to HUGE the calibration timed vectors on small pages: no surcharge
    assert n > tuning.HUGE
    few = large[:1] + [a[:len(a) // 4] for a in large[1:]]
    assert sum(a.nbytes for a in few) <= tuning.HUGE
    assert fm.costs(few, Joins((False, False), 0)) == fm.costs(few, Joins((False, False), 1 << 20))
    run.count += 1


def group_fusion_inline(run):
    """Note [Inline buckets] in fusion/manager.py: from the third blocking
    call with the same arrays, a manager whose buckets all run on the
    caller's thread makes their calls directly. Every call is exact, and
    anything that changes what _planned would check (a shape or dtype set
    in place, a read-only or replaced array, other fusion arguments, calls
    still queued) goes the full way again."""
    comm, p, r = run.comm, run.p, run.r
    from pycoll import FusionManager
    from pycoll.fusion import flat_buffer
    shapes = [(5,), (3, 2), (0,), (7,), (2 * p + 1,), (1,)]

    def values(dtype, step):
        return [rank_data(dtype, s, r, seed_of("inline", k, step), Op.SUM) for k, s in enumerate(shapes)]

    def expected(dtype, step):
        return [reduce_ranks(Op.SUM, [rank_data(dtype, s, i, seed_of("inline", k, step), Op.SUM)
                                      for i in range(p)]) for k, s in enumerate(shapes)]

    def counted(fm):
        launches = []
        launch = fm._launch
        fm._launch = lambda *args, **kwargs: launches.append(1) or launch(*args, **kwargs)
        return launches

    # Each way, and ranks whose arrays lie differently (views of one buffer
    # here, separate arrays there: the agreed pieces, cut from a packed
    # copy); several buckets that pack, small ones.
    cases = [("pack", {}), ("pieces", {}), ("each", {}), (None, {"fusion": [1, 1, 0, 2, 2, 1]}),
             (None, {"split_indices": [3]}), ("cap", {})]
    for strategy, kwargs in cases:
        for kind in ("separate", "views" if r % 2 else "separate"):
            if kind == "views":
                _, arrays = flat_buffer(shapes, np.int64)
            else:
                arrays = [np.zeros(s, np.int64) for s in shapes]
            fm = (FusionManager(Op.SUM, comm=comm, bucket_bytes=16) if strategy == "cap" else
                  FusionManager(Op.SUM, comm=comm, strategy=strategy))
            launches = counted(fm)
            for step in range(5):
                for a, v in zip(arrays, values("int64", step)):
                    a[...] = v
                got = fm.allreduce(arrays, **kwargs)
                assert all(g is a for g, a in zip(got, arrays)) and len(got) == len(arrays)
                for k, (a, e) in enumerate(zip(arrays, expected("int64", step))):
                    run.check(f"inline {strategy} {kwargs} {kind} step {step} array {k}", a, e)
                if step == 0:
                    buckets = len(launches)
            # the first two calls launch every bucket, the others none
            assert len(launches) == 2 * buckets, (strategy, kwargs, buckets, launches)
    # A later bucket that packs more than INLINE_PACK_BYTES: every call
    # queues the one before it, to pack while it is on the wire.
    from pycoll.fusion.manager import INLINE_PACK_BYTES
    n = INLINE_PACK_BYTES // 8 // 2 + 1
    large = [np.zeros(n) for _ in range(4)]
    fm = FusionManager(Op.SUM, comm=comm, strategy="pack")
    launches = counted(fm)
    for step in range(3):
        for k, a in enumerate(large):
            a[...] = r + k + step
        fm.allreduce(large, split_indices=[2])
        for k, a in enumerate(large):
            run.check(f"not inline step {step} array {k}", a, np.full(n, p * (p - 1) / 2 + p * (k + step)))
    assert len(launches) == 3 * 2, launches

    fm = FusionManager(Op.SUM, comm=comm)
    launches = counted(fm)
    arrays = [np.zeros(s, np.float32) for s in shapes]

    def call(step, dtype="float32", **kwargs):
        for a, v in zip(arrays, values(dtype, step)):
            a[...] = v
        fm.allreduce(arrays, **kwargs)
        for k, (a, e) in enumerate(zip(arrays, expected(dtype, step))):
            run.check(f"inline {dtype} step {step} array {k}", a, e)
    for step in range(3):
        call(step)
    assert len(launches) == 2
    # a dtype set in place (the same bytes, now int32): the full way, exact
    for a in arrays:
        a.dtype = np.int32
    call(3, "int32")
    assert len(launches) == 3
    for a in arrays:
        a.dtype = np.float32
    # a shape set in place
    arrays[1].shape = (2, 3)
    shapes[1] = (2, 3)
    call(4)
    assert len(launches) == 4
    call(5)
    call(6)
    assert len(launches) == 5
    # a replaced array, then other fusion arguments
    arrays[0] = np.zeros(shapes[0], np.float32)
    call(7)
    assert len(launches) == 6
    call(8, fusion=[1, 1, 1, 1, 1, 0])
    assert len(launches) == 8               # a bucket for id 1, one for id 0
    # a read-only array: raised before any message, nothing written
    call(9)
    call(10)
    launched = len(launches)
    before = [a.copy() for a in arrays]
    arrays[3].setflags(write=False)
    expect(ValueError, "arrays[3] is read-only", fm.allreduce, arrays)
    assert len(launches) == launched
    for a, b in zip(arrays, before):
        run.check("inline read-only untouched", a, b)
    arrays[3].setflags(write=True)
    # an async call still queued: the fused call waits for its turn
    call(11)
    call(12)
    h = comm.allreduce(np.full(3, float(r)), async_op=True)
    for a, v in zip(arrays, values("float32", 13)):
        a[...] = v
    fm.allreduce(arrays)
    assert h.done(), "the fused call overtook a queued async call"
    run.check("inline after async", h.wait(), np.full(3, p * (p - 1) / 2))
    for k, (a, e) in enumerate(zip(arrays, expected("float32", 13))):
        run.check(f"inline after async array {k}", a, e)
        run.same_everywhere(f"inline after async array {k}", a)


def group_fusion_zero(run):
    """FusionManager.reduce_scatter and allgather (the ZeRO pattern): exact
    for every dtype, op, shape (empty blocks, rows < p) and layout, over
    one bucket or several (cap, ids, split indices, a bucket large enough
    to be queued while the next packs), packed, each array on its own, or
    a large array on its own beside a packed bucket; the same arrays again,
    new arrays of the same shapes, a shape set in place; small buckets on
    the lanes; behind a queued async call; bad input before any message."""
    comm, p, r = run.comm, run.p, run.r
    from pycoll import FusionManager
    from pycoll.fusion.manager import INLINE_PACK_BYTES
    shapes = [(7,), (3, 4), (1,), (2 * p + 1, 2), (0,), (0, 3), (p - 1 or 1,), (5, 1, 2)]

    def inputs(dtype, op, step, rank=r, which=shapes):
        return [rank_data(dtype, s, rank, seed_of("zero", dtype, op, k, step), op)
                for k, s in enumerate(which)]

    def totals(dtype, op, step, which=shapes):
        return [reduce_ranks(op, list(xs)) for xs in
                zip(*(inputs(dtype, op, step, i, which) for i in range(p)))]

    def strided(arrays):
        """The same values, every other member a non-contiguous view (a
        strided one, a transposed one)."""
        out = []
        for k, a in enumerate(arrays):
            if k % 2 and a.ndim == 1:
                big = np.zeros((2 * a.shape[0],), a.dtype)
                big[::2] = a
                a = big[::2]
            elif k % 2:
                a = np.ascontiguousarray(a.T).T
            out.append(a)
        return out

    def round_trip(fm, arrays, dtype, op, what, **kwargs):
        """reduce_scatter then allgather into zeros of the same layout."""
        want = totals(dtype, op, what[1], [a.shape for a in arrays])
        before = [a.copy() for a in arrays]
        shards = fm.reduce_scatter(arrays, **kwargs)
        for k, (a, b) in enumerate(zip(arrays, before)):
            run.check(f"zero {what} input {k} untouched", a, b)
        assert len(shards) == len(arrays)
        for k, (s, t) in enumerate(zip(shards, want)):
            run.check(f"zero {what} reduce_scatter {k}", s, np.array_split(t, p)[r])
        out = strided([np.zeros_like(a) for a in arrays]) if what[0] == "strided" else \
            [np.zeros_like(a) for a in arrays]
        assert fm.allgather(shards, out) is not None
        for k, (o, t) in enumerate(zip(out, want)):
            run.check(f"zero {what} allgather {k}", o, t)
            run.same_everywhere(f"zero {what} allgather {k}", o)

    cases = [("float64", Op.SUM, None), ("float32", Op.AVG, None), ("int32", Op.MAX, None),
             ("bfloat16", Op.SUM, None), ("float16", Op.AVG, "float32"),
             ("complex64", Op.SUM, None), ("bool", Op.SUM, None), ("uint8", Op.BXOR, None)]
    for dtype, op, accumulate in cases:
        for config, kwargs in (("one", {}), ("cap", {}), ("ids", {"fusion": [1, 2, 1, 0, 2, 1, 1, 2]}),
                               ("split", {"split_indices": [3, 5]}), ("pack", {}), ("each", {})):
            fm = FusionManager(op=op, comm=comm, accumulate=accumulate,
                               bucket_bytes=40 if config == "cap" else 64 << 20,
                               strategy=config if config in ("pack", "each") else None)
            for step in range(3):
                arrays = inputs(dtype, op, step)
                if step == 2:
                    arrays = strided(arrays)
                for again in range(2):      # the same arrays again: the kept buckets
                    round_trip(fm, arrays, dtype, op,
                               ("strided" if step == 2 else "plain", step, dtype, config, again),
                               **kwargs)
    # A large member among small ones: the model sends it on its own, in
    # place, and packs the others (FusionManager.zero_ways).
    mixed = [(7,), (3, 4), (1,), (1 << 16,), (5, 1, 2), (0,)]
    fm = FusionManager(Op.SUM, comm=comm)
    assert fm.zero_ways("reduce_scatter", [np.zeros(m) for m in mixed]) == (3,)
    assert fm.zero_ways("allgather", [np.zeros(m) for m in mixed]) == (3,)
    for step in range(3):
        arrays = inputs("float64", Op.SUM, step, which=mixed)
        round_trip(fm, arrays, "float64", Op.SUM, ("plain", step, "mixed"))
    # any iterable of arrays
    shards = fm.reduce_scatter(iter(inputs("float64", Op.SUM, 0, which=mixed)))
    for k, (sh, t) in enumerate(zip(shards, totals("float64", Op.SUM, 0, mixed))):
        run.check(f"zero from an iterator {k}", sh, np.array_split(t, p)[r])
    # a shard sent alone is the caller's: dropped, it is freed (the manager
    # holds it weakly, Note [Shards in another array])
    import weakref
    shards = fm.reduce_scatter(inputs("float64", Op.SUM, 1, which=mixed))
    run.check("zero alone, dropped", shards[3],
              np.array_split(totals("float64", Op.SUM, 1, mixed)[3], p)[r])
    alone = weakref.ref(shards[3])
    del shards
    assert alone() is None, "the manager kept the last shard sent alone alive"
    # a shape set in place on the same arrays: the buckets are made again
    fm = FusionManager(Op.SUM, comm=comm)
    arrays = inputs("float64", Op.SUM, 0)
    round_trip(fm, arrays, "float64", Op.SUM, ("plain", 0, "reshape", "before"))
    arrays[1].shape = (4, 3)
    want = totals("float64", Op.SUM, 0)
    want[1] = want[1].reshape(4, 3)
    shards = fm.reduce_scatter(arrays)
    run.check("zero reshaped in place", shards[1], np.array_split(want[1], p)[r])
    # ShardedOptimizer's shards: views of the output's own blocks
    params = [np.zeros(s) for s in shapes]
    blocks = [a[sum(len(b) for b in np.array_split(a, p)[:r]):][:len(np.array_split(a, p)[r])]
              for a in params]
    fm = FusionManager(Op.SUM, comm=comm, bucket_bytes=100)
    for step in range(3):
        for k, b in enumerate(blocks):
            b[...] = np.array_split(totals("float64", Op.SUM, step)[k], p)[r]
        fm.allgather(blocks, params)
        for k, (a, t) in enumerate(zip(params, totals("float64", Op.SUM, step))):
            run.check(f"zero own-block allgather step {step} {k}", a, t)
    # shards of their own, kept (their values change between calls), then
    # one set to another shape in place: checked again, before any message
    moved = [np.empty_like(b) for b in blocks]
    for step in range(3):
        for b in moved:
            b[...] = r + 10 * step
        fm.allgather(moved, params)
        for k, a in enumerate(params):
            run.check(f"zero kept shards step {step} {k}", a, np.concatenate(
                [np.full(b.shape, j + 10.0 * step) for j, b in enumerate(np.array_split(a, p))]))
    moved[1].shape = (-1,)
    expect(ValueError, "shard 1 has shape", fm.allgather, moved, params)
    # A later bucket that packs more than INLINE_PACK_BYTES: the one before
    # it is queued while it packs.
    n = INLINE_PACK_BYTES // 8 + 1
    large = [np.full(n, float(r + k)) for k in range(3)]
    fm = FusionManager(Op.SUM, comm=comm, bucket_bytes=n * 8)
    for step in range(2):
        shards = fm.reduce_scatter(large)
        for k, s in enumerate(shards):
            run.check(f"zero queued reduce_scatter {step} {k}", s,
                      np.array_split(np.full(n, p * (p - 1) / 2 + p * k), p)[r])
        out = [np.zeros(n) for _ in large]
        fm.allgather(shards, out)
        for k, o in enumerate(out):
            run.check(f"zero queued allgather {step} {k}", o, np.full(n, p * (p - 1) / 2 + p * k))
    # Small buckets run on the lanes: no general path (Plan.run, _call)
    # from the second call on.
    if comm.transport is not None:
        import pycoll._plan
        small = [np.full(3, float(r)), np.full((2, 2), float(r))]
        fm = FusionManager(Op.SUM, comm=comm)
        general = pycoll._plan.Plan.run

        def refuse(*args, **kwargs):
            raise AssertionError("a fused reduce_scatter left its lane")
        for step in range(3):
            if step:
                pycoll._plan.Plan.run = refuse
            try:
                with lanes_only(("_call",), "a fused allgather left its lane", when=step > 0):
                    shards = fm.reduce_scatter(small)
                    fm.allgather(shards, small)
            finally:
                pycoll._plan.Plan.run = general
            for k, a in enumerate(small):
                run.check(f"zero lanes step {step} {k}", a, np.full(a.shape, p * (p - 1) / 2 * p ** step))
    # behind a queued async call: in its turn
    fm = FusionManager(Op.SUM, comm=comm)
    arrays = inputs("float64", Op.SUM, 0)
    h = comm.allreduce(np.full(3, float(r)), async_op=True)
    shards = fm.reduce_scatter(arrays)
    assert h.done(), "the fused reduce_scatter overtook a queued async call"
    for k, (sh, t) in enumerate(zip(shards, totals("float64", Op.SUM, 0))):
        run.check(f"zero after async {k}", sh, np.array_split(t, p)[r])
    h = comm.allreduce(np.full(3, float(r)), async_op=True)
    out = [np.zeros_like(a) for a in arrays]
    fm.allgather(shards, out)
    assert h.done(), "the fused allgather overtook a queued async call"
    run.check("zero after async allgather", out[3], totals("float64", Op.SUM, 0)[3])
    # bad input: raised before any message, on every rank
    fm = FusionManager(Op.SUM, comm=comm)
    expect(ValueError, "arrays[1] in reduce_scatter needs an array with at least one dimension",
           fm.reduce_scatter, [np.ones(2), np.float64(1.0)])
    expect(ValueError, "out[0] in allgather needs an array with at least one dimension",
           fm.allgather, [np.ones(1)], [np.array(1.0)])
    expect(ValueError, "2 shards for 1 arrays", fm.allgather, [np.ones(1), np.ones(1)], [np.ones(p)])
    expect(ValueError, f"shard 0 has shape (5,), expected ({len(np.array_split(np.ones(3), p)[r])},)",
           fm.allgather, [np.ones(5)], [np.ones(3)])
    expect(TypeError, "shard 0 has dtype float32, expected float64", fm.allgather,
           [np.ones(len(np.array_split(np.ones(3), p)[r]), np.float32)], [np.ones(3)])
    ro = np.ones(4)
    ro.setflags(write=False)
    expect(ValueError, "out[0] is read-only", fm.allgather,
           [np.ones(len(np.array_split(ro, p)[r]))], [ro])
    expect(TypeError, "AVG needs a floating", FusionManager(op=Op.AVG, comm=comm).reduce_scatter,
           [np.ones(4, np.int32)])
    full = np.zeros(8)
    blocks = [np.ones(len(np.array_split(a, p)[r])) for a in (full[:5], full[4:])]
    expect(ValueError, "out[0] and out[1] share memory", fm.allgather, blocks,
           [full[:5], full[4:]])
    run.check("zero shared out untouched", full, np.zeros(8))
    # A shard lying in another array of out was read after that array was
    # gathered over it (strategy "each": out[0] first, then shards[1], by
    # then rank r + 1's block of out[0]). Refused; a shard elsewhere in its
    # own array is read before that array is written.
    for strategy in ("each", "pack"):
        fm = FusionManager(Op.SUM, comm=comm, strategy=strategy)
        a, b = np.zeros(3 * p), np.zeros(2 * p)
        a[:] = r + 10
        own = len(np.array_split(a, p)[r])
        expect(ValueError, "shards[1] shares memory with out[0], which the allgather writes: "
               "a shard may lie only in its own array", fm.allgather, [a[:own], a[-2:]], [a, b])
        run.check(f"zero shard in another out untouched {strategy}", np.concatenate([a, b]),
                  np.concatenate([np.full(3 * p, r + 10.0), np.zeros(2 * p)]))
        # the shards reduce_scatter just returned (checked by identity,
        # Note [Shards in another array]) with an array of out in them
        big = np.full(8 * p, 1.0)
        fresh = fm.reduce_scatter([big, np.ones(p)])        # blocks of 8 and 1
        expect(ValueError, "shards[0] shares memory with out[1]", fm.allgather, fresh,
               [big, fresh[0][:p]])                        # (p <= 8)
        run.check(f"zero fresh shards untouched {strategy}", np.concatenate(fresh),
                  np.full(9, float(p)))
        b[:] = r + 20
        fm.allgather([a[-own:], b[-2:]], [a, b])            # not their own blocks (but rank p-1's)
        run.check(f"zero shard elsewhere in its own out {strategy}", np.concatenate([a, b]),
                  np.concatenate([np.full(3, 10.0 + j) for j in range(p)]
                                 + [np.full(2, 20.0 + j) for j in range(p)]))
    # reduce_scatter only reads its arrays: one twice is two blocks of its reduction
    grad = np.arange(6.0) + r
    shards = fm.reduce_scatter([grad, grad])
    mine = np.array_split(np.arange(6.0) * p + p * (p - 1) / 2, p)[r]
    run.check("zero one array twice", np.concatenate(shards), np.concatenate([mine, mine]))
    run.check("zero after errors", comm.allreduce(np.ones(2)), np.full(2, float(p)))


def _unready(fm):
    fm.register([np.ones(2), np.ones(3)])
    fm.mark_ready(0)
    return fm.wait()


def group_overlap(run):
    """The caller's work proceeds while buckets are in flight."""
    import datetime
    comm, p = run.comm, run.p
    from pycoll import FusionManager
    grads = [np.ones(1 << 18, np.float32) for _ in range(8)]         # 8 x 1 MiB
    fm = FusionManager(Op.SUM, comm=comm, bucket_bytes=2 << 20)
    fm.register(grads)
    start = time.perf_counter()
    h = fm.allreduce_async(grads)
    launched = time.perf_counter() - start
    work = 0
    while not h.done():
        work += 1                                   # the caller runs while buckets fly
        time.sleep(0.0005)
    h.wait(datetime.timedelta(minutes=5))        # one deadline for every bucket
    assert launched < 0.5, launched
    assert work > 0, "allreduce_async returned only when the buckets were done"
    for g in grads:
        run.check("overlap result", g, np.full(g.shape, float(p), np.float32))
    run.count += 1




# ---------------------------------------------------------------------------
# Mixed: the options the grids vary one at a time, drawn together


def group_mixed(run):
    """Seeded random calls that combine what the grids above vary one at
    a time (mixed_call), FusionManager calls on random lists of arrays
    (mixed_fusion) and queues of async calls (mixed_queue). Every rank
    makes the same draws. MIXED_SEED and MIXED_CASES widen the search;
    without MIXED_CASES, p = WIDE and up take half of the 60 draws (Note
    [Wide launches])."""
    seed = int(os.environ.get("MIXED_SEED", "0"))
    wanted = os.environ.get("MIXED_CASES")
    cases = int(wanted or 60)
    take = list if wanted else run.some
    assert run.comm.settings.checks == (os.environ.get("PYCOLL_CHECKS") == "1")
    for case in take(range(cases)):
        mixed_call(run, np.random.default_rng([seed, 1, case]), seed_of("mixed", seed, case))
    for case in take(range(cases // 3)):
        mixed_fusion(run, np.random.default_rng([seed, 2, case]), seed_of("mixed fusion", seed, case))
    for case in take(range(cases // 6)):
        mixed_queue(run, np.random.default_rng([seed, 3, case]), seed_of("mixed queue", seed, case))


def laid_out(x: np.ndarray, how: str) -> np.ndarray:
    """x's values in a new array: C order, every other row of a larger
    one, or Fortran order."""
    if how == "strided" and x.ndim:
        y = np.zeros((2 * x.shape[0], *x.shape[1:]), x.dtype)[::2]
    elif how == "fortran" and x.ndim > 1:
        y = np.zeros(x.shape, x.dtype, order="F")
    else:
        y = np.empty_like(x, order="C")
    y[...] = x
    return y


def array_like(a: np.ndarray, kind: str, written: bool = False):
    """a offered as *kind* (ARRAY_LIKES), the same memory; a itself where
    that kind cannot hold a's dtype or layout (or torch is missing), or
    cannot be *written* (DLPack under numpy before 2.2.5)."""
    wrap = ARRAY_LIKES[kind]
    if wrap is None or (written and not writes_through(kind)):
        return a
    try:
        obj = wrap(a)
        seen = np.from_dlpack(obj) if kind == "dlpack" else np.asarray(obj)
        if seen.dtype != a.dtype:           # bfloat16 through __array_interface__: V2
            return a
    except (ImportError, TypeError, ValueError, BufferError, RuntimeError):
        return a
    return obj


def mixed_call(run, rng, seed):
    """One call: collective, algorithm, (op, dtype), count (0, below p,
    ragged sizes= of gathers and splits), trailing shape, x strided or in Fortran order, out=
    (strided too), each as numpy or another array-like, async_op,
    timeout, root, the method or the module function with comm=."""
    comm, p, r = run.comm, run.p, run.r
    collective = str(rng.choice(list(ALGORITHMS)))
    shape = (int(rng.choice([0, 1, max(p - 1, 0), p + 1, 3 * p + 1, 1000, 70001])),
             *[(), (3,), (2, 2)][rng.integers(3)])
    algo = str(rng.choice(["auto", *ALGORITHMS[collective]]))
    layout = str(rng.choice(["c", "strided", "fortran"]))
    out_how = str(rng.choice(["none", "c", "strided"]))
    async_op = bool(rng.integers(2))
    root = int(rng.integers(p))
    into_none = bool(rng.integers(2))
    x_kind, out_kind = (str(k) for k in rng.choice(list(ARRAY_LIKES), 2))
    if not run.torch:                # the same draws; numpy for torch (Note [Wide launches])
        x_kind, out_kind = ("numpy" if k == "torch" else k for k in (x_kind, out_kind))
    as_function = bool(rng.integers(2))             # pycoll.<collective>(..., comm=comm)
    kwargs = {"async_op": async_op, "timeout": [None, 120.0][rng.integers(2)]}
    if collective != "barrier":
        kwargs["algorithm"] = algo
    split = None                                    # scatter's, reduce_scatter's sizes=
    if collective in ("scatter", "reduce_scatter") and rng.integers(2):
        split = kwargs["sizes"] = np.bincount(rng.integers(0, p, shape[0]), minlength=p).tolist()
    matrix = None                                   # alltoall's: rank i's x has sum(row i) rows
    if collective == "alltoall" and rng.integers(2):
        matrix = kwargs["sizes"] = [np.bincount(rng.integers(0, p, int(rng.integers(0, shape[0] + 1))),
                                                minlength=p).tolist() for _ in range(p)]
    if collective in ("allreduce", "reduce", "reduce_scatter", "scan"):
        pairs = reduction_pairs()
        op, dtype = pairs[rng.integers(len(pairs))]
        xs = [rank_data(dtype, shape, i, seed, op) for i in range(p)]
        kwargs["op"] = op
        reduced = reduce_ranks(op, xs)
        expected = {"allreduce": reduced, "reduce": reduced if r == root else None,
                    "reduce_scatter": split_by(reduced, p, split)[r]}.get(collective)
        if collective == "scan":
            kwargs["exclusive"] = exclusive = bool(rng.integers(2))
            upto = r if exclusive else r + 1
            expected = reduce_ranks(op, xs[:upto]) if upto else None
        mine = xs[r]
    else:
        dtype = ALL_DTYPES[rng.integers(len(ALL_DTYPES))]
        shapes = [shape] * p
        if collective in ("gather", "allgather") and rng.integers(2):
            kwargs["sizes"] = [int(k) for k in rng.integers(0, 5, p)]
            shapes = [(k, *shape[1:]) for k in kwargs["sizes"]]
        elif matrix is not None:
            shapes = [(sum(line), *shape[1:]) for line in matrix]
        xs = [rank_data(dtype, s, i, seed) for i, s in enumerate(shapes)]
        mine = xs[r]
        gathered = np.concatenate(xs) if collective in ("gather", "allgather") else None
        expected = {
            "broadcast": xs[root],
            "gather": gathered if r == root else None,
            "allgather": gathered,
            "scatter": split_by(xs[root], p, split)[r],
            "alltoall": np.concatenate([split_by(x, p, None if matrix is None else matrix[i])[r]
                                        for i, x in enumerate(xs)]),
        }.get(collective)
        if collective == "broadcast" and r != root:
            mine = None if into_none else np.zeros(shape, xs[0].dtype)
        elif collective == "scatter" and r != root:
            mine = None
    if collective in ("broadcast", "gather", "reduce", "scatter"):
        kwargs["root"] = root
    name = (f"mixed {collective} {kwargs} {xs[0].dtype} {shape} x={layout} {x_kind} "
            f"out={out_how} {out_kind} function={as_function}")
    out = None
    if collective not in ("broadcast", "barrier") and out_how != "none":
        full = expected if expected is not None else (gathered if collective == "gather" else xs[r])
        out = laid_out(np.full_like(full, 7), out_how)
        kwargs["out"] = array_like(out, out_kind, written=True)
    x = None if mine is None else laid_out(mine, layout)
    given = None if x is None else array_like(x, x_kind, written=collective == "broadcast")
    call = functools.partial(getattr(pycoll, collective), comm=comm) if as_function else getattr(comm, collective)
    y = call(*(() if collective == "barrier" else (given,)), **kwargs)
    if async_op:
        y = y.wait()
    if collective == "barrier":
        assert y is None, name
    elif expected is None:
        assert y is None, f"{name}: got {y!r}"
    else:
        if collective == "broadcast" and x is not None:
            assert y is given, f"{name}: broadcast must return x itself"
            y = x
        run.check(name, y, expected)
        if out is not None:
            run.check(name + " (out=)", out, expected)
        if collective in ("allreduce", "allgather", "broadcast"):
            run.same_everywhere(name, y)


def mixed_queue(run, rng, seed):
    """Up to seven calls, async or blocking, fused allreduces among them,
    each rank waiting for the async ones in its own order."""
    from pycoll import FusionManager
    comm, p, r = run.comm, run.p, run.r
    pending = []
    for j in range(int(rng.integers(1, 8))):
        what = str(rng.choice(["allreduce", "allgather", "broadcast", "reduce_scatter", "alltoall",
                               "barrier", "fused"]))
        n = int(rng.choice([0, 1, p + 1, 1000, 70001]))
        async_op = bool(rng.integers(4))
        xs = [rank_data("float32", (n,), i, seed + j, Op.SUM) for i in range(p)]
        total = reduce_ranks(Op.SUM, xs)
        name = f"mixed queue call {j}: {what} of {n} async={async_op}"
        if what == "fused":
            mine = [xs[r][:n // 3].copy(), xs[r][n // 3:].copy()]
            fm = FusionManager(Op.SUM, comm=comm, bucket_bytes=1 << 16)
            h = fm.allreduce_async(mine) if async_op else fm.allreduce(mine)
            pending.append((name, h if async_op else None, mine, [total[:n // 3], total[n // 3:]]))
            continue
        x = xs[r].copy()
        expected = {"allreduce": total, "allgather": np.concatenate(xs),
                    "reduce_scatter": np.array_split(total, p)[r],
                    "alltoall": np.concatenate([np.array_split(a, p)[r] for a in xs]),
                    "broadcast": xs[0]}.get(what)
        if what == "broadcast":
            x = xs[0].copy() if r == 0 else np.zeros(n, F32)
        h = comm.barrier(async_op=async_op) if what == "barrier" else getattr(comm, what)(x, async_op=async_op)
        pending.append((name, h if async_op else None, h, expected))
    for k in np.random.default_rng([seed, r]).permutation(len(pending)):
        name, handle, got, expected = pending[k]
        if handle is not None:
            result = handle.wait()
            assert not isinstance(got, list) or all(a is b for a, b in zip(result, got)), (
                f"{name}: not the caller's arrays")
            got = result
        if expected is None:
            assert got is None, f"{name}: {got!r}"
        elif isinstance(expected, list):
            for part, (g, e) in enumerate(zip(got, expected)):
                run.check(f"{name} part {part}", g, e)
        else:
            run.check(name, got, expected)


def mixed_fusion(run, rng, seed):
    """A FusionManager call: dtypes, fusion ids or split indices, byte
    cap, strategy, accumulate, members that are views of one buffer or
    strided; allreduce once or twice, async, data-parallel or ZeRO."""
    from pycoll import FusionManager
    from pycoll.fusion import flat_buffer
    comm, p, r = run.comm, run.p, run.r
    k = int(rng.integers(1, 14))
    op = [Op.SUM, Op.AVG, Op.MAX][rng.integers(3)]
    kinds = ["float32", "float64", "bfloat16", "float16"] + (["int32"] if op is not Op.AVG else [])
    one = kinds[rng.integers(len(kinds))]
    dtypes = [kinds[rng.integers(len(kinds))] if rng.integers(2) else one for _ in range(k)]
    shapes = [(int(rng.choice([0, 1, 3, p + 1, 1000, 16384, 70001, 300000])), *[(), (2,)][rng.integers(2)])
              for _ in range(k)]
    how = {}
    pick = rng.integers(3)
    if pick == 1:   # equal ids share a bucket, so they carry the dtype; 0 never fuses
        how["fusion"] = [0 if rng.integers(4) == 0 else 10 * kinds.index(d) + 1 + int(rng.integers(2))
                         for d in dtypes]
    elif pick == 2:
        dtypes = [one] * k
        how["split_indices"] = sorted({int(i) for i in rng.integers(1, k, rng.integers(3))}) if k > 1 else []
    if pick == 0:
        dtypes = [one] * k if rng.integers(2) else sorted(dtypes, key=kinds.index)
    strategy = [None, None, "pack", "split", "pieces", "each"][rng.integers(6)]
    accumulate = ("float32" if op is not Op.MAX and rng.integers(3) == 0
                  and {"float64", "int32"}.isdisjoint(dtypes) else None)
    layout = str(rng.choice(["own", "flat", "strided"]))
    mode = str(rng.choice(["allreduce", "twice", "async", "register", "zero"]))
    fm = FusionManager(op=op, comm=comm, bucket_bytes=int(rng.choice([1 << 10, 1 << 16, 1 << 20, 64 << 20])),
                       strategy=strategy, accumulate=accumulate)
    name = f"mixed fusion {op.value} {dtypes} {shapes} {how} {strategy} {accumulate} {layout} {mode}"

    def members(round_):
        xs = [[rank_data(d, s, i, seed + 31 * j + round_, op) for i in range(p)]
              for j, (d, s) in enumerate(zip(dtypes, shapes))]
        if layout == "flat" and len(set(dtypes)) == 1:
            _, mine = flat_buffer(shapes, xs[0][0].dtype)
            for m, x in zip(mine, xs):
                m[...] = x[r]
        else:
            mine = [laid_out(x[r], "strided" if layout == "strided" else "c") for x in xs]
        expected = []
        for x in xs:
            if accumulate and x[0].dtype != np.float32:
                s = reduce_ranks(op, [a.astype(F32) for a in x])
                expected.append(s.astype(x[0].dtype))
            else:
                expected.append(reduce_ranks(op, x))
        return mine, expected

    if mode == "zero":
        mine, expected = members(0)
        shards = fm.reduce_scatter(mine, **how)
        for j, (s, e) in enumerate(zip(shards, expected)):
            run.check(f"{name} shard {j}", s, np.array_split(e, p, axis=0)[r])
        full = [np.zeros_like(e) for e in expected]
        fm.allgather(shards, full)
        for j, (f, e) in enumerate(zip(full, expected)):
            run.check(f"{name} gathered {j}", f, e)
        return
    for round_ in range(2 if mode == "twice" else 1):
        mine, expected = members(round_)
        if mode == "async":
            fm.allreduce_async(mine, **how).wait()
        elif mode == "register":
            fm.register(mine, **how)
            for i in reversed(range(k)):
                fm.mark_ready(i)
            fm.wait()
        else:
            got = fm.allreduce(mine, **how)
            assert all(g is m for g, m in zip(got, mine)), f"{name}: not in place"
        for j, (m, e) in enumerate(zip(mine, expected)):
            run.check(f"{name} array {j} round {round_}", m, e)
            run.same_everywhere(f"{name} array {j} round {round_}", m)


# ---------------------------------------------------------------------------
# Embedding under frameworks: logging, done-callbacks, data-parallel and ZeRO helpers


def group_frameworks(run):
    import logging
    import threading
    from pycoll.parallel import DataParallel, ShardedOptimizer, sgd
    comm, p, r = run.comm, run.p, run.r

    # Diagnostics go to the "pycoll" logger, never to stdout.
    records = []
    handler = logging.Handler(logging.DEBUG)
    handler.emit = records.append
    logger = logging.getLogger("pycoll")
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        comm.allreduce(np.ones(7 + p, np.float32), algorithm="ring")
    finally:
        logger.removeHandler(handler)
        logger.setLevel(logging.NOTSET)
    assert any("allreduce float32" in rec.getMessage() and "ring" in rec.getMessage()
               for rec in records), [rec.getMessage() for rec in records]
    run.count += 1

    # Done-callbacks: once, with the finished handle; at once if already done.
    seen, finished = [], threading.Event()
    h = comm.allreduce(np.ones(3), async_op=True)
    h.add_done_callback(lambda hh: (seen.append(hh.done()), finished.set()))
    h.wait()
    assert finished.wait(10) and seen == [True], seen
    h.add_done_callback(lambda hh: seen.append("late"))
    assert seen == [True, "late"], seen
    run.count += 1

    # DataParallel: rank 0's parameters everywhere; gradients averaged or summed.
    params = [np.full((3, 2), float(r)), np.full(4, 10.0 + r)]
    dp = DataParallel(params, comm)
    run.check("dp broadcast", params[0], np.zeros((3, 2)))
    run.check("dp broadcast 1", params[1], np.full(4, 10.0))
    grads = [np.full((3, 2), float(r + 1)), np.full(4, 2.0 * r)]
    dp.sync(grads)
    run.check("dp mean", grads[0], np.full((3, 2), (p + 1) / 2))
    run.check("dp mean 1", grads[1], np.full(4, float(p - 1)))
    summed = [np.full(5, float(r + 1))]
    DataParallel(comm=comm, mean=False).sync(summed)
    run.check("dp sum", summed[0], np.full(5, p * (p + 1) / 2))
    batch = np.arange(10 * 3).reshape(10, 3)
    run.check("dp shard", dp.shard(batch), np.array_split(batch, p)[r])

    # ShardedOptimizer: the same step as the replicated one, blocks uneven.
    shapes = [(5, 2), (p + 2,), (1, 3)]
    params = [np.arange(np.prod(s), dtype=np.float64).reshape(s) + r for s in shapes]
    reference = [np.arange(np.prod(s), dtype=np.float64).reshape(s) for s in shapes]
    opt = ShardedOptimizer(params, sgd(0.5, momentum=0.9), comm)
    replicated, state = sgd(0.5, momentum=0.9), {}
    for step in range(3):
        grads = [np.full(s, float(r + step)) for s in shapes]
        mean = [np.full(s, (p - 1) / 2 + step) for s in shapes]
        opt.step(grads)
        replicated(reference, mean, state)
        for k, (a, e) in enumerate(zip(params, reference)):
            run.check(f"zero step {step} param {k}", a, e)
            run.same_everywhere(f"zero step {step} param {k}", a)
    # Parameters that are not numpy arrays (torch tensors, say): update gets
    # numpy views of their blocks. A torch block once took sgd's "p -= lr * g"
    # as a rebinding: every parameter stayed as it was, silently.
    makers = {"array_interface": ArrayInterface}
    if run.torch:
        import torch
        makers["torch"] = torch.from_numpy
        torch_ops(run, comm)
    for kind, make in makers.items():
        backing = [np.arange(np.prod(s), dtype=np.float64).reshape(s) + r for s in shapes]
        reference = [np.arange(np.prod(s), dtype=np.float64).reshape(s) for s in shapes]
        ShardedOptimizer([make(b) for b in backing], sgd(0.5), comm).step(
            [make(np.full(s, float(r))) for s in shapes])
        sgd(0.5)(reference, [np.full(s, (p - 1) / 2) for s in shapes], {})
        for k, (a, e) in enumerate(zip(backing, reference)):
            run.check(f"zero {kind} param {k}", a, e)
    own = sum(b.nbytes for b in opt.state["momentum"])
    assert own == sum(np.array_split(np.zeros(s), p)[r].nbytes for s in shapes), own
    expect(ValueError, "params[0] is 0-d", ShardedOptimizer, [np.float64(1.0)], sgd(0.1), comm)
    mine = np.full(2, float(r))
    expect(TypeError, "mean must be a bool, got str", ShardedOptimizer, [mine], sgd(0.1),
           comm, "no")
    run.check("refused before the parameters' broadcast", mine, np.full(2, float(r)))
    expect(TypeError, "mean must be a bool, got str", DataParallel, None, comm, "no")
    # refused in the constructor on every rank, before any message: a step
    # would fail at the allgather, after updating the blocks
    tied, flat = np.full(4, 7.0), np.full(10, 7.0)
    for bad, (i, j) in [([tied, np.ones(2), tied], (0, 2)), ([flat[:6], flat[4:]], (0, 1))]:
        expect(ValueError, f"params[{i}] and params[{j}] share memory: pass a tied parameter once",
               ShardedOptimizer, bad, sgd(0.1), comm)
    ro = np.ones(3)
    ro.setflags(write=False)
    expect(ValueError, "params[1] is read-only: the optimizer updates it in place",
           ShardedOptimizer, [np.ones(2), ro], sgd(0.1), comm)
    run.check("refused params untouched", np.concatenate([tied, flat]), np.full(14, 7.0))
    halves = np.full(10, float(r))          # interleaved views share no element
    ShardedOptimizer([halves[::2], halves[1::2]], sgd(1.0), comm).step([np.ones(5), np.ones(5)])
    run.check("interleaved params", halves, np.full(10, -1.0))
    expect(ValueError, "2 gradients for 3 parameters", opt.step, grads[:2])
    expect(ValueError, "grads[0] has shape (2, 5)", opt.step, [np.zeros((2, 5))] + grads[1:])
    y = comm.allreduce(np.array([1.0]))
    run.check("after framework errors", y, np.array([float(p)]))


def mesh_shapes(p: int) -> list:
    """Every mesh of p ranks in one dimension, every ordered pair of
    factors above 1, and (2, 2, 2) at p = 8, with (1, p) for a mesh
    dimension of one rank."""
    shapes = [(p,), (1, p)]
    shapes += [(a, p // a) for a in range(2, p) if p % a == 0 and p // a > 1]
    return shapes + [(2, 2, 2)] * (p == 8)


def layout_input(mesh, whole, src, case) -> np.ndarray:
    """This rank's block of *whole* laid out by *src*: mesh.shard for the
    splits, and for each "partial" mesh dimension k random summands (whole
    numbers, exact in every dtype used) that add up, over the ranks of k's
    group, to the block without it; each rank of the group draws them all
    from the group's shared coordinates."""
    from pycoll.layout import PARTIAL
    local = mesh.shard(whole, [None if q == PARTIAL else q for q in src]).astype(np.float64)
    for k, q in enumerate(src):
        if q != PARTIAL:
            continue
        coord = list(mesh.coordinate)
        noise = []
        for j in range(mesh.shape[k]):
            coord[k] = j
            rng = np.random.default_rng([seed_of("layout", case, k, *coord)])
            noise.append(rng.integers(-2, 3, local.shape).astype(np.float64))
        i = mesh.coordinate[k]
        local = (local if i == 0 else np.zeros_like(local)) + noise[i] - (i == 0) * sum(noise)
    return local


def group_layouts(run):
    """pycoll.layout: redistribution between every kind of placement, on
    every mesh of p ranks, checked against the global tensor: the block of
    each rank (mesh.shard) and the whole (mesh.full) after each. Then the
    steps chosen, the seeds' two examples (Z = (X W) V; MatMul (2, 4),
    (4, 1) then ReLU (8, 1)), and bad layouts refused before any message."""
    from pycoll.layout import PARTIAL, DeviceMesh
    comm, p, r = run.comm, run.p, run.r
    for shape in mesh_shapes(p):
        mesh = DeviceMesh(shape, comm)
        assert mesh.coordinate == tuple(np.unravel_index(r, shape)), (shape, mesh.coordinate)
        kinds = [None, PARTIAL, 0, 1, 2]
        layouts = list(itertools.product(kinds, repeat=len(shape)))   # nested splits too
        rng = np.random.default_rng(seed_of("layouts", shape))     # the same on every rank
        pairs = [(layouts[i], layouts[j])
                 for i, j in rng.integers(0, len(layouts), (len(run.some(range(48))), 2))]
        pairs = [(s, d) for s, d in pairs if not (PARTIAL in d and any(
            q == PARTIAL and s[k] != PARTIAL for k, q in enumerate(d)))]
        for case, (src, dst) in enumerate(pairs):
            dtype = ("float64", "int32", "bfloat16", "float32")[case % 4]
            dims = (2 * p, 3 * p, p) if case % 7 else (0, p, p)
            whole = np.random.default_rng(seed_of("whole", shape, case)).integers(0, 4, dims)
            whole = whole.astype(BY_NAME[dtype].numpy)
            x = layout_input(mesh, whole, src, (shape, case)).astype(whole.dtype)
            before = x.copy()
            y = mesh.redistribute(x, src, dst)
            name = f"mesh {shape} {dtype} {src} -> {dst}"
            run.check(f"{name}: x unchanged", x, before)
            assert y.flags.c_contiguous and not np.shares_memory(y, x), name
            assert y.shape == mesh.local_shape(dims, dst) and y.dtype == whole.dtype, (name, y)
            if PARTIAL not in dst:
                run.check(name, y, mesh.shard(whole, dst))
            full = mesh.full(y, dst)
            run.check(f"{name}: whole", full, whole)
            run.same_everywhere(f"{name}: whole", full)
        mesh.free()

    # The steps: each placement's change by the collective that makes it.
    mesh = DeviceMesh((p,), comm)
    steps = {((0,), (None,)): [("allgather", 0, 0)],
             ((0,), (1,)): [("alltoall", 0, 0, 1)],
             ((PARTIAL,), (1,)): [("reduce_scatter", 0, 1)],
             ((PARTIAL,), (None,)): [("allreduce", 0, None)],
             ((None,), (1,)): [("slice", 0, 1)],
             ((1,), (1,)): [], ((PARTIAL,), (PARTIAL,)): []}
    for (src, dst), expected in steps.items():
        got = mesh.plan((2 * p, 2 * p), src, dst)
        assert got == (expected if p > 1 else []), (src, dst, got)
        run.count += 1
    if p == 4:
        square = DeviceMesh((2, 2), comm)
        # dimension 0 still has mesh dimension 0's split to lose: mesh
        # dimension 1's cannot join it yet (Note [Nested splits])
        got = square.plan((2, 2), (0, 1), (1, 0))
        assert got == [("allgather", 1, 1), ("alltoall", 0, 0, 1), ("slice", 1, 0)], got
        # the inner split goes first and comes back last
        got = square.plan((2, 2), (0, 0), (None, 0))
        assert got == [("allgather", 1, 0), ("allgather", 0, 0), ("slice", 1, 0)], got
        got = square.plan((2, 2), (0, None), (0, 0))
        assert got == [("slice", 1, 0)], got
        got = square.plan((2, 2), (PARTIAL, 1), (0, None))
        assert got == [("reduce_scatter", 0, 0), ("allgather", 1, 1)], got
        run.count += 4
        square.free()

    # The seed's Z = (X W) V: X split by rows, V by columns.
    X, W, V = (np.random.default_rng(seed_of("zxwv", i)).integers(-3, 4, s).astype(np.float64)
               for i, s in enumerate([(2 * p, 3), (3, 5), (5, 2 * p)]))
    y = mesh.shard(X, (0,)) @ W
    z = mesh.redistribute(y, (0,), (None,)) @ mesh.shard(V, (1,))
    run.check("Z = (X W) V", mesh.full(z, (1,)), X @ W @ V)
    if p % 2 == 0 and p > 2:
        # The seed's MatMul.shard(((2, 4), (4, 1))) then ReLU.shard(((8, 1),))
        # at p = 8 (a (2, p / 2) mesh at p = 4 and 6): A's rows split over
        # mesh dimension 0, its columns and B's rows over 1; the product is
        # partial along 1, and the ReLU's rows are split over both (rank r:
        # block r of p, Note [Nested splits]).
        grid = DeviceMesh((2, p // 2), comm)
        A, B = (np.random.default_rng(seed_of("relu", i)).integers(-3, 4, s).astype(np.float64)
                for i, s in enumerate([(2 * p, p), (p, 5)]))
        y = grid.shard(A, (0, 1)) @ grid.shard(B, (None, 0))
        assert grid.plan(y.shape, (0, PARTIAL), (0, 0)) == [("reduce_scatter", 1, 0)]
        y = np.maximum(grid.redistribute(y, (0, PARTIAL), (0, 0)), 0)
        run.check("MatMul (2, 4), (4, 1) then ReLU (8, 1)", y,
                  np.maximum(A @ B, 0)[2 * r:2 * r + 2])
        grid.free()
    if run.torch:                       # a CPU tensor's block, as any array-like
        import torch
        block = torch.from_numpy(mesh.shard(X, (0,)))
        run.check("a torch block", mesh.redistribute(block, (0,), (None,)), X)

    # Bad layouts: an error naming the numbers, on every rank, before any message.
    x = np.zeros((2 * p, p + 1))
    expect(ValueError, f"holds {p + 1} ranks; the communicator has {p}", DeviceMesh, (p + 1,), comm)
    expect(ValueError, "at least 1", DeviceMesh, (p, 0), comm)
    expect(TypeError, "sequence of ints", DeviceMesh, (p, "a"), comm)
    expect(ValueError, "2 placements for a mesh of 1 dimension", mesh.redistribute, x, (0, None),
           (0,))
    expect(ValueError, "dst[0] is tensor dimension 2, but the tensor has 2 dimensions",
           mesh.redistribute, x, (0,), (2,))
    expect(TypeError, "src[0] must be None, 'partial' or a tensor dimension, got True",
           mesh.redistribute, x, (True,), (0,))
    expect(TypeError, "got 'sum'", mesh.redistribute, x, ("sum",), (0,))
    expect(TypeError, "must be a sequence of placements", mesh.redistribute, x, "partial", (0,))
    expect(ValueError, "dst makes mesh dimension 0 'partial' where src has None",
           mesh.redistribute, x, (None,), (PARTIAL,))
    expect(ValueError, "shard cannot make a 'partial' layout", mesh.shard, x, (PARTIAL,))
    expect(TypeError, "timeout must be a number of seconds", mesh.redistribute, x, (0,), (None,),
           "soon")
    if p > 1:
        expect(ValueError, f"dimension 1 of shape ({2 * p * p}, {p + 1}) has length {p + 1}, "
               f"which mesh dimension 0 ({p} ranks) does not divide", mesh.redistribute, x,
               (0,), (1,))
    if p == 4:
        square = DeviceMesh((2, 2), comm)
        expect(ValueError, "dimension 1 of shape (8, 5) has length 5, which mesh dimensions "
               "0, 1 (4 ranks) do not divide", square.redistribute, x, (None, None), (1, 1))
        square.free()
    # nothing was sent: the next redistribution meets the same messages everywhere
    y = mesh.redistribute(mesh.shard(X, (0,)), (0,), (None,))
    run.check("after the errors", y, X)
    mesh.free()


def group_jax(run):
    """JAX CPU arrays in (through DLPack); numpy arrays out, dtype kept."""
    import jax.numpy as jnp
    comm, p, r = run.comm, run.p, run.r
    x = jnp.arange(6, dtype=jnp.float32).reshape(2, 3) * (r + 1)
    run.check("jax allreduce", comm.allreduce(x), np.arange(6, dtype=F32).reshape(2, 3) * (p * (p + 1) / 2))
    b = jnp.full((4,), r, dtype=jnp.bfloat16)
    run.check("jax bf16", comm.allreduce(b), np.full(4, sum(range(p)), bf16()))
    run.check("jax allgather", comm.allgather(jnp.array([r], dtype=jnp.int32)), np.arange(p, dtype=np.int32))


def group_against_mpi(run):
    """README's "Coming from mpi4py" table, row by row: each mpi4py buffer
    call and its pycoll counterpart on the same data give the same array.
    The data are small integers (floats too), exact in every order, so the
    MPI library's own collectives are the oracle here."""
    comm, p, r = run.comm, run.p, run.r
    world = MPI.COMM_WORLD
    ops = {"sum": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN, "prod": MPI.PROD, "band": MPI.BAND}
    for dtype, name in itertools.product((np.float64, np.int32, np.int64), ops):
        if name == "band" and dtype is np.float64:
            continue
        x = (np.arange(7 * 3).reshape(7, 3) % 5 + r + (name != "prod")).astype(dtype)
        label = f"{np.dtype(dtype).name} {name}"
        y = np.empty_like(x)
        world.Allreduce(x, y, op=ops[name])
        run.check(f"Allreduce {label}", pycoll.allreduce(x, op=ops[name], comm=comm), y)
        y, inplace = x.copy(), x.copy()
        world.Allreduce(MPI.IN_PLACE, y, op=ops[name])
        assert pycoll.allreduce(inplace, op=name, out=inplace, comm=comm) is inplace
        run.check(f"Allreduce IN_PLACE {label}", inplace, y)
        root = p - 1
        y = np.empty_like(x)
        world.Reduce(x, y, op=ops[name], root=root)
        got = pycoll.reduce(x, name, root, comm=comm)
        assert (got is None) == (r != root), label
        if r == root:
            run.check(f"Reduce {label}", got, y)
        y = np.empty_like(x)
        world.Scan(x, y, op=ops[name])
        run.check(f"Scan {label}", pycoll.scan(x, name, comm=comm), y)
        y = np.empty_like(x)
        world.Exscan(x, y, op=ops[name])
        got = pycoll.scan(x, name, exclusive=True, comm=comm)
        if r == 0:
            assert got is None, label               # MPI leaves rank 0's y undefined
        else:
            run.check(f"Exscan {label}", got, y)
        # Reduce_scatter with np.array_split's counts; _block when they divide
        counts = [len(b) * 3 for b in np.array_split(np.arange(7), p)]
        y = np.empty((counts[r] // 3, 3), dtype)
        world.Reduce_scatter(x, y, recvcounts=counts, op=ops[name])
        run.check(f"Reduce_scatter {label}", pycoll.reduce_scatter(x, name, comm=comm), y)
        # and with any counts: pycoll's sizes= (rows, some ranks none)
        rows = [sum((2 * k + 1) % p == i for k in range(7)) for i in range(p)]
        y = np.empty((rows[r], 3), dtype)
        world.Reduce_scatter(x, y, recvcounts=[k * 3 for k in rows], op=ops[name])
        run.check(f"Reduce_scatter counts {label}",
                  pycoll.reduce_scatter(x, name, comm=comm, sizes=rows), y)
        whole = np.tile(x[:1], (2 * p, 1))
        y = np.empty((2, 3), dtype)
        world.Reduce_scatter_block(whole, y, op=ops[name])
        run.check(f"Reduce_scatter_block {label}", pycoll.reduce_scatter(whole, name, comm=comm), y)
    for dtype in (np.float32, np.int16, np.uint8, np.complex128, np.bool_):
        label = np.dtype(dtype).name
        x = (np.arange(2 * p * 2).reshape(2 * p, 2) + 10 * r).astype(dtype)
        root = min(1, p - 1)
        b = x.copy() if r == root else np.zeros_like(x)
        world.Bcast(b, root=root)
        run.check(f"Bcast {label}", pycoll.broadcast(x.copy() if r == root else np.zeros_like(x),
                                                     root, comm=comm), b)
        y = np.empty((p * 2 * p, 2), dtype)
        world.Gather(x, y, root=root)
        got = pycoll.gather(x, root, comm=comm)
        if r == root:
            run.check(f"Gather {label}", got, y)
        world.Allgather(x, y)
        run.check(f"Allgather {label}", pycoll.allgather(x, comm=comm), y)
        y = np.empty((2, 2), dtype)
        world.Scatter(x, y, root=root)
        run.check(f"Scatter {label}", pycoll.scatter(x if r == root else None, root, comm=comm), y)
        y = np.empty_like(x)
        world.Alltoall(x, y)
        run.check(f"Alltoall {label}", pycoll.alltoall(x, comm=comm), y)
        # Alltoallv: rank i sends (i + j) % 3 rows to rank j
        matrix = [[(i + j) % 3 for j in range(p)] for i in range(p)]
        sent = x[:sum(matrix[r])]
        y = np.empty((sum(line[r] for line in matrix), 2), dtype)
        world.Alltoallv([sent, [k * 2 for k in matrix[r]]],
                        [y, [line[r] * 2 for line in matrix]])
        run.check(f"Alltoallv {label}", pycoll.alltoall(sent, comm=comm, sizes=matrix), y)
        # the v-variants: rank i holds i + 1 rows; counts are elements in
        # mpi4py, rows in pycoll's sizes=
        mine = (np.arange((r + 1) * 2).reshape(r + 1, 2) + 10 * r).astype(dtype)
        rows = [i + 1 for i in range(p)]
        y = np.empty((sum(rows), 2), dtype)
        world.Allgatherv(mine, [y, [k * 2 for k in rows]])
        run.check(f"Allgatherv {label}", pycoll.allgather(mine, sizes=rows, comm=comm), y)
        y = np.empty((sum(rows), 2), dtype)
        world.Gatherv(mine, [y, [k * 2 for k in rows]], root=root)
        got = pycoll.gather(mine, root, sizes=rows, comm=comm)
        if r == root:
            run.check(f"Gatherv {label}", got, y)
        # Scatterv with np.array_split's counts: what pycoll.scatter sends
        odd = (np.arange(7 * 2).reshape(7, 2) + 1).astype(dtype)
        split = [len(b) * 2 for b in np.array_split(odd, p)]
        y = np.empty((split[r] // 2, 2), dtype)
        world.Scatterv([odd, split], y, root=root)
        run.check(f"Scatterv {label}", pycoll.scatter(odd if r == root else None, root, comm=comm), y)
        # and with any counts: rank i gets i + 1 rows
        y = np.empty((r + 1, 2), dtype)
        whole = np.concatenate([odd] * p)[:sum(rows)]
        world.Scatterv([whole, [k * 2 for k in rows]], y, root=root)
        run.check(f"Scatterv counts {label}",
                  pycoll.scatter(whole if r == root else None, root, comm=comm, sizes=rows), y)
    world.Barrier()
    assert pycoll.barrier(comm=comm) is None
    h = pycoll.allreduce(np.full(3, r + 1.0), comm=comm, async_op=True)
    y = np.empty(3)
    world.Iallreduce(np.full(3, r + 1.0), y).Wait()
    run.check("Iallreduce", h.wait(), y)


def group_against_torch(run):
    """README's "Coming from torch.distributed" table, row by row: each
    torch.distributed call over gloo and its pycoll counterpart on the same
    tensors give the same values (small integers: exact in every order)."""
    import torch
    import torch.distributed as dist

    import pycoll.contrib.torch as pt
    comm, p, r = run.comm, run.p, run.r
    # torch 2.13 names the tensor forms all_gather_single and
    # reduce_scatter_single (warning on the older names)
    all_gather_single = getattr(dist, "all_gather_single", dist.all_gather_into_tensor)
    reduce_scatter_single = getattr(dist, "reduce_scatter_single", dist.reduce_scatter_tensor)

    def values(t):
        """t's values as numpy (Tensor.numpy() refuses bfloat16)."""
        return t.view(torch.int16).numpy().view(bf16()) if t.dtype == torch.bfloat16 else t.numpy()

    pt.init_process_group("gloo", comm=comm)
    try:
        for dtype in (torch.float32, torch.int64, torch.bfloat16):
            label = str(dtype)
            t = (torch.arange(2 * p * 3).reshape(2 * p, 3) % 7 + r).to(dtype)
            for op in (dist.ReduceOp.SUM, dist.ReduceOp.MAX):
                theirs = t.clone()
                dist.all_reduce(theirs, op=op)
                mine = t.clone()
                pycoll.allreduce(mine, op=op, out=mine, comm=comm)
                run.check(f"all_reduce {label} {op}", values(mine), values(theirs))
            root = p - 1
            theirs = t.clone()
            dist.reduce(theirs, dst=root)
            got = pycoll.reduce(t, root=root, comm=comm)
            if r == root:
                run.check(f"reduce {label}", got, values(theirs))
            theirs, mine = t.clone(), t.clone()
            dist.broadcast(theirs, src=root)
            pycoll.broadcast(mine, root, comm=comm)
            run.check(f"broadcast {label}", values(mine), values(theirs))
            theirs = torch.empty((p * 2 * p, 3), dtype=dtype)
            all_gather_single(theirs, t)
            run.check(f"all_gather_single {label}", pycoll.allgather(t, comm=comm),
                      values(theirs))
            parts = [torch.empty_like(t) for _ in range(p)]
            dist.all_gather(parts, t)
            run.check(f"all_gather {label}", pycoll.allgather(t, comm=comm),
                      values(torch.cat(parts)))
            theirs = torch.empty((2, 3), dtype=dtype)
            reduce_scatter_single(theirs, t)
            mine = torch.empty((2, 3), dtype=dtype)
            pycoll.reduce_scatter(t, out=mine, comm=comm)
            run.check(f"reduce_scatter_single {label}", values(mine), values(theirs))
            theirs = torch.empty_like(t)
            dist.all_to_all_single(theirs, t)
            run.check(f"all_to_all_single {label}", pycoll.alltoall(t, comm=comm), values(theirs))
            # with split sizes: rank i sends (i + j) % 3 rows to rank j
            matrix = [[(i + j) % 3 for j in range(p)] for i in range(p)]
            sent = t[:sum(matrix[r])].contiguous()
            theirs = torch.empty((sum(line[r] for line in matrix), 3), dtype=dtype)
            dist.all_to_all_single(theirs, sent, output_split_sizes=[line[r] for line in matrix],
                                   input_split_sizes=matrix[r])
            run.check(f"all_to_all_single split sizes {label}",
                      pycoll.alltoall(sent, comm=comm, sizes=matrix), values(theirs))
            theirs = torch.empty((2, 3), dtype=dtype)
            dist.scatter(theirs, list(t.chunk(p)) if r == root else None, src=root)
            run.check(f"scatter {label}", pycoll.scatter(t if r == root else None, root, comm=comm),
                      values(theirs))
            parts = [torch.empty_like(t) for _ in range(p)] if r == root else None
            dist.gather(t, parts, dst=root)
            got = pycoll.gather(t, root, comm=comm)
            if r == root:
                run.check(f"gather {label}", got, values(torch.cat(parts)))
        theirs = torch.full((3,), float(r + 1))
        work = dist.all_reduce(theirs, async_op=True)
        mine = torch.full((3,), float(r + 1))
        handle = pycoll.allreduce(mine, out=mine, comm=comm, async_op=True)
        work.wait()
        handle.wait()
        run.check("all_reduce async_op", values(mine), values(theirs))
        dist.barrier()
        assert pycoll.barrier(comm=comm) is None
    finally:
        dist.destroy_process_group()


def group_bfloat16_first_heard(run):
    """Note [Importing ml_dtypes]: ranks that have not imported ml_dtypes
    learn of bfloat16 from the root's header (broadcast and scatter into
    None) and import it there, forwarding down the tree on the way. The
    first call of the launch is a different one at each p: a large
    broadcast at p = 3, a large scatter at p = 4, a small (inline)
    broadcast at p = 2."""
    comm, p, r = run.comm, run.p, run.r
    assert "ml_dtypes" not in sys.modules, "a rank imported ml_dtypes before its first bfloat16"
    calls = [("broadcast", 70000), ("scatter", 30000), ("broadcast", 3), ("scatter", 2)]
    first = {2: 2, 3: 0, 4: 1}.get(p, 0)
    calls = calls[first:] + calls[:first]
    for collective, n in calls:
        name = f"bfloat16 {collective} of {n} into None"
        values = np.arange(n * p if collective == "scatter" else n, dtype=F32) % 251
        x = values.astype(bf16()) if r == 0 else None
        if collective == "broadcast":
            y = comm.broadcast(x, root=0)
            run.same_everywhere(name, y)
            mine = values
        else:
            y = comm.scatter(x, root=0)
            mine = values[r * n:(r + 1) * n]
        assert y.dtype.name == "bfloat16", (name, y.dtype)
        run.check(name, y, mine.astype(y.dtype))


def groups() -> dict:
    """Every group_<name> function of this file, by name."""
    return {name[len("group_"):]: fn for name, fn in globals().items() if name.startswith("group_")}


def main():
    group = sys.argv[1]
    comm = pycoll.Communicator()
    run = Run(comm)
    groups()[group](run)
    run.finish()
    if run.comm is not None:
        comm.free()
    os.write(1, f"PYCOLL-OK rank={comm.rank} group={group} cases={run.count}\n".encode())




# ---------------------------------------------------------------------------
# Reliability: checks mode, timeouts, large counts


def group_checks(run):
    comm, p, r = run.comm, run.p, run.r
    pycoll.set_checks(True)
    try:
        # agreeing calls pass, with the same results
        y = comm.allreduce(np.arange(4.0) * (r + 1))
        run.check("checked allreduce", y, np.arange(4.0) * p * (p + 1) / 2)
        run.check("checked gather sizes", comm.allgather(np.full(r + 1, r), sizes=list(range(1, p + 1))),
                  np.concatenate([np.full(i + 1, i) for i in range(p)]))
        if p > 1:
            # inconsistent shapes: MismatchError on every rank, listing each rank
            exc = expect(pycoll.MismatchError, "ranks disagree about allreduce", comm.allreduce,
                         np.ones(3 + (r == p - 1)))
            assert f"rank {p - 1}:" in str(exc) and "shape=[4]" in str(exc) and "shape=[3]" in str(exc)
            assert set(exc.records) == set(range(p))
            # different dtypes, ops, roots, collectives
            expect(pycoll.MismatchError, "dtype", comm.allreduce,
                   np.ones(2, np.float32 if r else np.float64))
            expect(pycoll.MismatchError, "op", comm.allreduce, np.ones(2), "max" if r else "sum")
            expect(pycoll.MismatchError, "root", comm.reduce, np.ones(2), "sum", r % 2)
            if r == 0:
                expect(pycoll.MismatchError, "collective", comm.allreduce, np.ones(2))
            else:
                expect(pycoll.MismatchError, "collective", comm.broadcast, np.ones(2), 0)
            # allgather without sizes: axis-0 lengths must agree
            expect(pycoll.MismatchError, "shape", comm.allgather, np.ones(1 + (r == 0)))
            # scatter's and reduce_scatter's sizes= must agree, given or not
            even = [1] * p
            odd = [2, 0] + even[2:] if r == p - 1 else even
            for sizes in (odd, even if r else None):
                exc = expect(pycoll.MismatchError, "sizes", comm.reduce_scatter, np.ones((p, 2)),
                             sizes=sizes)
                assert f"rank {p - 1}:" in str(exc), str(exc)
                expect(pycoll.MismatchError, "sizes", comm.scatter,
                       np.ones((p, 2)) if r == 0 else None, sizes=sizes)
            square = [[1] * p for _ in range(p)]
            other = [[2] + line[1:] for line in square] if r == p - 1 else square
            expect(pycoll.MismatchError, "sizes", comm.alltoall, np.ones((p + (r == p - 1), 2)),
                   sizes=other)
            expect(pycoll.MismatchError, "sizes", comm.alltoall, np.ones((p, 2)),
                   sizes=square if r else None)
            agreed = [2, 0] + even[2:]
            run.check("checked sizes", comm.reduce_scatter(np.ones((p, 2)), sizes=agreed),
                      np.full((agreed[r], 2), float(p)))
            # broadcast: an x off the root that does not match the root's,
            # or is read-only, on every rank; x=None matches anything
            exc = expect(pycoll.MismatchError, "ranks disagree about broadcast", comm.broadcast,
                         np.ones(3 + (r == p - 1)), 0)
            assert "shape=[4]" in str(exc) and "shape=[3]" in str(exc)
            expect(pycoll.MismatchError, "dtype", comm.broadcast,
                   np.ones(2, np.float32 if r == p - 1 else np.float64), 0)
            ro = np.ones(2)
            ro.setflags(write=False)
            if r == p - 1:
                expect(ValueError, "x is read-only", comm.broadcast, ro, 0)
            else:
                expect(pycoll.MismatchError, "x is read-only", comm.broadcast, np.ones(2), 0)
            for x in (None, np.zeros(3)):
                y = comm.broadcast(np.arange(3.0) if r == 0 else (None if r % 2 else x), 0)
                run.check("checked broadcast", y, np.arange(3.0))
            # a root that is not an int, on one rank: its ValueError, and a
            # MismatchError on the others (not a wait for that rank)
            for name, call in (("reduce", lambda root: comm.reduce(np.ones(2), root=root)),
                               ("gather", lambda root: comm.gather(np.ones(2), root=root)),
                               ("broadcast", lambda root: comm.broadcast(np.ones(2), root=root)),
                               ("scatter", lambda root: comm.scatter(np.ones((p, 2)), root=root))):
                call(0)                             # a cached plan of root 0 first
                if r == p - 1:
                    expect(ValueError, "root must be an int in [0", call, 0.0)
                else:
                    expect(pycoll.MismatchError, "root must be an int", call, 0)
            # so is a bad timeout on one rank
            if r == p - 1:
                expect(ValueError, "timeout must be >= 0 seconds", comm.allreduce, np.ones(2),
                       timeout=-1)
            else:
                expect(pycoll.MismatchError, "timeout must be >= 0 seconds", comm.allreduce,
                       np.ones(2), timeout=60)
            # scatter: a rank learns its out's shape from the header; its
            # error reaches every rank after the call
            x = np.arange(2.0 * p).reshape(p, 2)
            out = np.zeros((2, 1) if r == p - 1 else (1, 2))
            if r == p - 1:
                expect(ValueError, "out has shape (2, 1), expected (1, 2)", comm.scatter, x, 0,
                       "auto", out)
            else:
                expect(pycoll.MismatchError, "out has shape (2, 1)", comm.scatter,
                       x if r == 0 else None, 0, "auto", out)
            run.check("checked scatter", comm.scatter(x if r == 0 else None, 0), x[r:r + 1])
            # an error only one rank can see (its own out) reaches every rank
            out = np.zeros(5 if r == p - 1 else 4)
            if r == p - 1:
                expect(ValueError, "out has shape (5,), expected (4,)", comm.allreduce,
                       np.ones(4), "sum", "auto", out)
            else:
                exc = expect(pycoll.MismatchError, "out has shape (5,)", comm.allreduce,
                             np.ones(4), "sum", "auto", out)
                assert isinstance(exc, ValueError)
        # all ranks agree on the same bad input: everyone gets the plain error
        expect(TypeError, "MAX is not defined for complex64", comm.allreduce,
               np.ones(2, np.complex64), "max")
        y = comm.allreduce(np.array([1.0]))
        run.check("after mismatches", y, np.array([float(p)]))
    finally:
        pycoll.set_checks(False)
    run.count += 1


def group_short(run):
    """Ranks that disagree about sizes=, checks mode off (Note [Message
    lengths] in pycoll/_p2p.py): rank 1 holds one row and says so, the
    others expect two from it, a message shorter than its receive."""
    _disagreeing_sizes(run, held=1, expected=2)


def group_long(run):
    """As group_short, but rank 1 holds two rows and says so, and the
    others expect one: a message longer than its receive, MPI's
    "message truncated" error, which used to end the receiver's call and
    leave the ranks waiting on it waiting."""
    _disagreeing_sizes(run, held=2, expected=1)


def _disagreeing_sizes(run, held: int, expected: int):
    """Rank q = 1 holds *held* rows and says so; the others expect
    *expected* rows from it (rank 1, not the last: a root's receive from
    it is then not its last, and MPICH reports the others pending, which
    wait() must wait for again). Every call of gather and allgather, on the
    general path (first call), on the lane (later calls), with and without
    a timeout, through the C calls and through mpi4py's, finishes on every
    rank; at least one rank raises MismatchError naming a receive of the
    wrong length, and rank q, whose receives all match, gets the right
    rows. Then every reduction and alltoall with shapes that differ
    (the same, without the rows to check). The communicator stays usable."""
    import os
    comm, p, r = run.comm, run.p, run.r
    q = 1
    sizes = [1] * p
    sizes[q] = held if r == q else expected
    x = np.full((sizes[r], 3), r + 1, np.float32)
    rows = np.repeat(np.arange(1, p + 1, dtype=np.float32), 3).reshape(p, 3)
    mine = np.repeat(rows, sizes, axis=0) if r == q else None      # rank q's view
    os.environ["PYCOLL_TRANSPORT"] = "mpi4py"
    try:
        plain = pycoll.Communicator(comm)
    finally:
        del os.environ["PYCOLL_TRANSPORT"]
    assert plain.transport is None and (comm.transport is not None or p == 1)
    calls = [("allgather", algorithm, lambda c, a, t: c.allgather(x, a, sizes=sizes, timeout=t))
             for algorithm in ("ring", "recursive_doubling", "bruck")]
    calls += [("gather", algorithm, lambda c, a, t: c.gather(x, 0, a, sizes=sizes, timeout=t))
              for algorithm in ("binomial", "linear")]
    for c in (comm, plain):
        for collective, algorithm, call in calls:
            for timeout in (None, None, None, 60):
                try:
                    y = call(c, algorithm, timeout)
                    raised = 0
                except pycoll.MismatchError as exc:
                    got = exc.records[r]["received"]
                    if held < expected:
                        assert got < exc.records[r]["expected"], exc.records
                    else:                   # MPICH does not tell a longer message's length
                        assert got is None or got > exc.records[r]["expected"], exc.records
                        assert ("more than" in str(exc)) == (got is None), str(exc)
                    assert "ranks disagree about the call" in str(exc), str(exc)
                    assert f"in {collective}({algorithm})" in str(exc), str(exc)
                    step, steps = map(int, re.search(r"step (\d+) of (\d+)", str(exc)).groups())
                    assert 1 <= step <= steps, str(exc)     # messages posted together: one step each
                    raised = 1
                else:
                    if r == q and (collective == "allgather" or r == 0):
                        run.check(f"{collective} {algorithm} on rank {q}", y, mine)
                count = int(c.allreduce(np.array([raised]))[0])
                assert count >= 1, f"{collective}({algorithm}): no rank noticed the wrong length"
                run.count += 1
    # Shapes that differ, in every reduction and alltoall: rank q
    # holds held * p elements, the others expected * p (so no rank's
    # blocks are empty: a block of 0 bytes is no message, and ranks that
    # disagree about that wait for one another; Note [Message lengths]).
    # Messages both shorter and longer than their receives.
    v = np.ones((held if r == q else expected) * p, np.float32)
    reductions = [("allreduce", a) for a in ("ring", "recursive_doubling", "rabenseifner", "tree")]
    reductions += [("reduce", a) for a in ("binomial", "rabenseifner")]
    reductions += [("reduce_scatter", a) for a in ("ring", "recursive_halving")]
    reductions += [("alltoall", "pairwise")] + [("scan", a) for a in ("recursive_doubling", "linear")]
    for c in (comm, plain):
        for collective, algorithm in reductions:
            for timeout in (None, None, None, 60):
                try:
                    getattr(c, collective)(v, algorithm=algorithm, timeout=timeout)
                    raised = 0
                except pycoll.MismatchError as exc:
                    assert f"in {collective}({algorithm})" in str(exc), str(exc)
                    raised = 1
                count = int(c.allreduce(np.array([raised]))[0])
                assert count >= 1, f"{collective}({algorithm}): no rank noticed"
                run.count += 1
    # the same communicator, consistent again
    run.check("after wrong lengths", comm.allgather(np.full((1, 3), r + 1, np.float32)), rows)
    plain.free()


def group_timeout(run):
    """The last rank never joins: the others raise CollectiveTimeout within
    the timeout plus one second, one of them naming the missing rank. With
    "lane" after the algorithm, every rank first makes the call's C lane
    (two plain calls), and the timed call must stay on it (Note [Lane
    deadlines] in pycoll/_mpicall.pyx): the general path is made to fail.
    With "default" after that, the call passes no timeout= and the
    deadline comes from PYCOLL_TIMEOUT (1 s, set by the test). The
    algorithm may name the collective too: "reduce_scatter:ring",
    "gather:binomial" (root 0; at p = 2, where the root is the only rank
    left waiting), "allgather:ring", "alltoall:pairwise",
    "broadcast:binomial" and "scatter:linear" (from the missing rank),
    "barrier:dissemination" (else allreduce). With "sends" after it, the
    collective is a gather of 1 MiB a sender to the missing rank (in
    segments larger than MPI sends eagerly: the test sets 64 KiB), so
    each sender times out with sends pending, which it must not cancel
    (Note [Pending sends] in pycoll/_p2p.py). With "large" instead, x
    has 8192 elements: a rank waits on hundreds of segments, tested a
    window at a time (Note [Testing in windows])."""

    comm, p, r = run.comm, run.p, run.r
    algorithm = sys.argv[2] if len(sys.argv) > 2 else "auto"
    collective, _, algorithm = algorithm.rpartition(":")
    collective = collective or "allreduce"
    missing = p - 1
    call = getattr(comm, collective)
    mode = sys.argv[3] if len(sys.argv) > 3 else None     # "lane", "sends", "large" or none
    sends, large, on_lane = mode == "sends", mode == "large", mode == "lane"
    if collective in ("broadcast", "scatter") or sends:
        call = functools.partial(call, root=missing)     # every other rank waits for it
    if collective == "barrier":
        call = lambda x, algorithm, **kwargs: comm.barrier(**kwargs)  # noqa: E731
    # the general path a Communicator method falls back to
    general_name = f"_{collective}" if collective in ("allreduce", "reduce_scatter", "barrier") \
        else collective
    want = {"allreduce": lambda y: y * p,
            "reduce_scatter": lambda y: np.array_split(y * p, p)[r],
            "gather": lambda y: np.concatenate([y] * p) if r == 0 else None,
            "allgather": lambda y: np.concatenate([y] * p),
            "alltoall": lambda y: np.concatenate([np.array_split(y, p)[r]] * p),
            "broadcast": lambda y: y,
            "scatter": lambda y: np.array_split(y, p)[r],
            "barrier": lambda y: None}[collective]
    default = len(sys.argv) > 4 and sys.argv[4] == "default"
    assert not default or comm.settings.timeout == 1.0, comm.settings
    timeout = 1.0
    peer, elapsed = None, 0.0
    # a lane takes messages of one segment (256 B in the tests), a gather's all p blocks
    x = np.ones(1 << 17 if sends else 8192 if large else 64 if not on_lane
                else 4 if collective == "gather" else 16)
    # what a broken communicator must refuse: lanes and kept buckets made
    # before the timeout (a barrier, an allgather, a FusionManager's)
    fm = pycoll.FusionManager(Op.SUM, comm=comm)
    kept = [np.ones(5), np.ones(3)]
    for _ in range(2):
        comm.barrier()
        comm.allgather(np.ones(2))
        fm.reduce_scatter(kept)
        fm.allreduce(kept)
    if on_lane:
        for _ in range(2):
            y = call(x, algorithm=algorithm)
            if want(x) is None:
                assert y is None, y
            else:
                run.check("before the timeout", y, want(x))
    if r != missing:
        start = time.monotonic()
        try:
            with lanes_only((general_name,), "the timed call left its lane", when=on_lane):
                call(x, algorithm=algorithm, **({} if default else {"timeout": timeout}))
        except pycoll.CollectiveTimeout as exc:
            elapsed = time.monotonic() - start
            peer = exc.peer
            assert exc.rank == r and exc.collective == collective, exc
            assert exc.algorithm != "auto" and 1 <= exc.step <= exc.steps, exc
            assert f"rank {r} waited" in str(exc) and f"in {collective}(" in str(exc), str(exc)
            assert isinstance(exc, TimeoutError)
        else:
            raise AssertionError(f"rank {r}: no CollectiveTimeout without rank {missing}")
        assert timeout <= elapsed < timeout + 1.0, elapsed
        # a broken communicator refuses further calls, at once: a barrier
        # and fused calls kept from before once waited for the missing rank
        for refused in (lambda: comm.allreduce(np.ones(2)), comm.barrier,
                        lambda: comm.allgather(np.ones(2)), lambda: call(x, algorithm=algorithm),
                        lambda: fm.reduce_scatter(kept), lambda: fm.allreduce(kept),
                        lambda: comm.allreduce(np.ones(2), async_op=True).wait(5)):
            start = time.monotonic()
            expect(RuntimeError, "broken since a collective timed out", refused)
            assert time.monotonic() - start < 1.0, time.monotonic() - start
        assert comm.broken is not None
    peers = MPI.COMM_WORLD.allgather(peer)
    assert missing in peers, f"no rank named the missing rank {missing}: {peers}"
    # a fresh communicator still works
    with pycoll.Communicator() as fresh:
        run.check("after timeout", fresh.allreduce(np.array([1.0]), timeout=5), np.array([float(p)]))
    run.comm = None
    run.count += 1


def group_large(run):
    """Counts past 2^31 elements and bytes: every message stays under 1 GiB
    (allreduce, broadcast, reduce, reduce_scatter, gather, scatter)."""
    comm, p, r = run.comm, run.p, run.r
    n = (1 << 31) + 8
    x = np.full(n, r + 1, np.int8)
    x[-8:] = np.arange(8, dtype=np.int8) + r
    y = comm.allreduce(x)
    del x
    total = sum(range(1, p + 1))
    assert y.size == n
    assert (y[:-8] == total).all(), "wrong sum before the tail"
    expected_tail = sum(np.arange(8, dtype=np.int64) + i for i in range(p)).astype(np.int8)
    run.check("large allreduce tail", y[-8:], expected_tail)
    del y
    z = np.zeros(n, np.uint8)
    if r == 0:
        z[::1 << 20] = 7
        z[-1] = 9
    comm.broadcast(z, root=0)
    assert z[-1] == 9 and (z[::1 << 20] == 7).all() and z[1] == 0
    del z
    # The rooted collectives and reduce_scatter, each with 2^31 + 8 bytes
    # on one side (0.5-1 s each here): offsets past 2^31 in the root's
    # buffer, and blocks of 2^30 bytes.
    x = np.full(n, 1, np.int8)
    x[-1] = r
    y = comm.reduce(x, root=p - 1)
    if r == p - 1:
        assert y[0] == p and y[-1] == sum(range(p)) % 128, (y[0], y[-1])
    del y
    y = comm.reduce_scatter(x)
    assert y.size == np.array_split(np.empty(n, np.int8), p)[r].size and y[0] == p
    if r == p - 1:
        assert y[-1] == sum(range(p)) % 128, y[-1]
    del x, y
    x = np.full(n // p + 1, r + 1, np.int8)
    x[-1] = 50 + r
    y = comm.gather(x, root=0)
    if r == 0:
        assert y.size == p * x.size and y[-1] == 50 + p - 1 and y[x.size] == 2 % 256
    del x, y
    x = np.full(n, 3, np.int8) if r == 0 else None
    if r == 0:
        x[-1] = 9
    y = comm.scatter(x, root=0)
    assert y[0] == 3 and y[-1] == (9 if r == p - 1 else 3)
    run.count += 1


def group_env_checks(run):
    """PYCOLL_CHECKS=1 (agreed at creation): checks mode without set_checks."""
    comm, p, r = run.comm, run.p, run.r
    assert comm.settings.checks
    if p > 1:
        expect(pycoll.MismatchError, "shape", comm.allreduce, np.ones(2 + (r == 0)))
    run.check("env checks", comm.allreduce(np.ones(2)), np.full(2, float(p)))


def group_abort(run):
    """After a timeout the caller ends the job: comm.abort() (never pycoll)."""
    comm, r = run.comm, run.r
    if r == 0:
        try:
            comm.allreduce(np.ones(4), timeout=0.5)
        except pycoll.CollectiveTimeout:
            comm.abort(3)
    time.sleep(30)                      # the other ranks never join; abort ends them


def group_async_timeout(run):
    comm, p, r = run.comm, run.p, run.r
    if r == p - 1:
        MPI.COMM_WORLD.barrier()
        return
    h = comm.allreduce(np.ones(4), async_op=True, timeout=0.5)
    # queued behind it, with plans made before it timed out (a new
    # signature, a lane's): refused when their turn comes, not run on the
    # broken communicator, where the new one waited for ever
    queued = [comm.allreduce(np.ones(7), async_op=True),
              comm.allgather(np.ones(3), async_op=True)]
    exc = expect(pycoll.CollectiveTimeout, "waited", h.wait)
    assert exc.peer is not None
    for q in queued:
        start = time.monotonic()
        expect(RuntimeError, "broken since a collective timed out", q.wait, 10)
        assert time.monotonic() - start < 1.0, time.monotonic() - start
    MPI.COMM_WORLD.barrier()
    run.comm = None


if __name__ == "__main__":
    main()
