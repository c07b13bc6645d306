"""What the benchmark needs to know about each collective (nccl-tests'
``struct testColl``): thin descriptions, the harness does the rest.

Each op says how a size in bytes becomes element counts, its bus-bandwidth
factor, whether it has an in-place form, how to fill its inputs, what the
result must be, and how to call it through pycoll and through mpi4py's own
MPI collective ("native").

Sizes follow nccl-tests: *size* is the larger of what one rank sends and
receives; ops that cut the data into p blocks round it down to a multiple
of p elements. *count* is the element count the op's argument describes
(the vector, or one rank's block for gather/scatter/allgather/
reduce_scatter/alltoall).

The input values are small integers (or powers of two for PROD) chosen by
rank and index, so every result is exact in every dtype and the expected
result is arithmetic, not a second reduction.
"""
from __future__ import annotations

import numpy as np

from pycoll._dtypes import Op
from pycoll._memory import empty, empty_small_pages

F32 = np.float32


def values(dtype, n: int, rank: int, op: Op = Op.SUM) -> np.ndarray:
    """Rank *rank*'s input of n elements."""
    i = np.arange(n, dtype=np.int64)
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return ((i + rank) % 3 == 0)
    if op is Op.PROD:
        return (1 + (i + rank) % 2).astype(dt)
    if op in (Op.BAND, Op.BOR, Op.BXOR):
        return ((i * 7 + rank * 13) % 127).astype(dt)
    base = (i * 7 + rank * 13) % 17
    return (base if dt.kind == "u" else base - 8).astype(dt)


def reduce_values(dtype, n: int, p: int, op: Op) -> np.ndarray:
    """The reduction of ranks 0 .. p-1's values (exact: no rounding anywhere)."""
    dt = np.dtype(dtype)
    kernel = {Op.SUM: np.add, Op.AVG: np.add, Op.PROD: np.multiply, Op.MAX: np.maximum,
              Op.MIN: np.minimum, Op.BAND: np.bitwise_and, Op.BOR: np.bitwise_or,
              Op.BXOR: np.bitwise_xor}[op]
    wide = np.float64 if dt.kind in "fV" or dt.name == "bfloat16" else dt
    acc = values(wide, n, 0, op) if dt.kind != "b" else values(dt, n, 0, op)
    for r in range(1, p):
        acc = kernel(acc, values(wide, n, r, op) if dt.kind != "b" else values(dt, n, r, op))
    if op is Op.AVG:
        # pycoll divides once in the dtype (float32 for the half types)
        work = np.dtype(F32) if dt.name in ("float16", "bfloat16") else dt
        acc = acc.astype(work)
        if dt.kind == "c":
            # component-wise, as pycoll divides: numpy's complex division by
            # p + 0j rounds differently (5 / 3 -> 1.6666667 in complex64)
            out = np.empty_like(acc)
            out.real, out.imag = acc.real / acc.real.dtype.type(p), acc.imag / acc.imag.dtype.type(p)
            return out
        return (acc / work.type(p)).astype(dt)
    return acc.astype(dt)


# How the benchmark's buffers are allocated (-M): numpy's allocator, whose
# pages depend on what the process allocated before (numpy advises huge
# pages from 4 MiB and glibc reuses freed memory with its advice), or
# every buffer on huge pages from 256 KiB, or every one on 4 KiB pages
# (Note [Huge pages] in pycoll/_memory.py).
def _zeroed(allocate):
    def zeros(count, dtype):
        a = allocate(count, dtype)
        a[...] = 0
        return a
    return zeros


MEMORY = {"numpy": np.zeros, "huge": _zeroed(empty), "small": _zeroed(empty_small_pages)}


class Bench:
    """The buffers of one (op, dtype, size) on one rank, zeroed, from one
    of MEMORY's allocators."""

    def __init__(self, spec, dtype, count, p, rank, root, redop, memory="numpy"):
        self.spec, self.dtype, self.count = spec, np.dtype(dtype), count
        self.p, self.rank, self.root, self.redop = p, rank, root, redop
        send, recv = spec.elements(count, p)
        zeros = MEMORY[memory]
        self.send, self.recv = zeros(send, self.dtype), zeros(recv, self.dtype)

    def fill(self):
        self.spec.fill(self)
        self.recv[...] = 0


class Spec:
    """Defaults shared by the descriptions below."""

    name = ""
    rooted = False
    reduces = False
    has_inplace = False

    def factor(self, p: int) -> float:
        return (p - 1) / p

    def blocks(self, size: int, itemsize: int, p: int) -> int:
        """count for *size* bytes (a block op: size rounded to p elements)."""
        return size // itemsize // p

    def size(self, count: int, itemsize: int, p: int) -> int:
        return count * itemsize * p

    def elements(self, count, p):
        """(send, recv) elements per rank."""
        raise NotImplementedError

    def fill(self, b: Bench):
        b.send[...] = values(b.dtype, b.send.size, b.rank, b.redop)

    def native_supported(self, dtype, redop) -> bool:
        return True


class AllReduce(Spec):
    """Also the shape of scan: one vector in, one out, in place or not."""

    name, reduces, has_inplace = "allreduce", True, True
    mpi_name = "Allreduce"

    def factor(self, p):
        return 2 * (p - 1) / p

    def blocks(self, size, itemsize, p):
        return size // itemsize

    def size(self, count, itemsize, p):
        return count * itemsize

    def elements(self, count, p):
        return count, count

    def expected(self, b):
        return reduce_values(b.dtype, b.count, b.p, b.redop)

    def result(self, b, inplace):
        return b.send if inplace else b.recv

    def run(self, b, comm, algorithm, inplace):
        getattr(comm, self.name)(b.send, b.redop, algorithm=algorithm,
                                 out=b.send if inplace else b.recv)

    def native(self, b, mpi, MPI, inplace):
        getattr(mpi, self.mpi_name)(MPI.IN_PLACE if inplace else b.send,
                                    b.send if inplace else b.recv, op=mpi_op(MPI, b))

    def native_supported(self, dtype, redop):
        return native_reducible(dtype, redop)


class Reduce(AllReduce):
    name, rooted = "reduce", True

    def factor(self, p):
        return 1.0

    def result(self, b, inplace):
        if b.rank != b.root:
            return None
        return b.send if inplace else b.recv

    def run(self, b, comm, algorithm, inplace):
        comm.reduce(b.send, b.redop, b.root, algorithm=algorithm, out=b.send if inplace else b.recv)

    def native(self, b, mpi, MPI, inplace):
        if inplace:
            send = MPI.IN_PLACE if b.rank == b.root else b.send
            mpi.Reduce(send, b.send, op=mpi_op(MPI, b), root=b.root)
        else:
            mpi.Reduce(b.send, b.recv, op=mpi_op(MPI, b), root=b.root)


class Broadcast(AllReduce):
    """In place by nature: both columns measure the same call."""

    name, rooted, reduces = "broadcast", True, False

    def factor(self, p):
        return 1.0

    def fill(self, b):
        b.send[...] = values(b.dtype, b.count, b.root) if b.rank == b.root else 0

    def expected(self, b):
        return values(b.dtype, b.count, b.root)

    def result(self, b, inplace):
        return b.send

    def run(self, b, comm, algorithm, inplace):
        comm.broadcast(b.send, b.root, algorithm=algorithm)

    def native(self, b, mpi, MPI, inplace):
        mpi.Bcast(_bytes(b.send), root=b.root)

    def native_supported(self, dtype, redop):
        return True


class Scan(AllReduce):
    """Inclusive prefix reduction (MPI_Scan): rank r gets x_0 op ... op x_r.
    nccl-tests has no scan; its factor here is 1, as for reduce: a chain
    carries each rank's n bytes over one link once, and a perfect scan moves
    n bytes into and out of each rank."""

    name, mpi_name = "scan", "Scan"

    def factor(self, p):
        return 1.0

    def expected(self, b):
        return reduce_values(b.dtype, b.count, b.rank + 1, b.redop)


class AllGather(Spec):
    name = "allgather"

    def elements(self, count, p):
        return count, count * p

    def expected(self, b):
        return np.concatenate([values(b.dtype, b.count, r) for r in range(b.p)])

    def result(self, b, inplace):
        return b.recv

    def run(self, b, comm, algorithm, inplace):
        comm.allgather(b.send, algorithm=algorithm, out=b.recv)

    def native(self, b, mpi, MPI, inplace):
        mpi.Allgather(_bytes(b.send), _bytes(b.recv))


class Gather(AllGather):
    name, rooted = "gather", True

    def result(self, b, inplace):
        return b.recv if b.rank == b.root else None

    def run(self, b, comm, algorithm, inplace):
        comm.gather(b.send, b.root, algorithm=algorithm, out=b.recv)

    def native(self, b, mpi, MPI, inplace):
        mpi.Gather(_bytes(b.send), _bytes(b.recv), root=b.root)


class ReduceScatter(Spec):
    name, reduces = "reduce_scatter", True

    def elements(self, count, p):
        return count * p, count

    def expected(self, b):
        whole = reduce_values(b.dtype, b.count * b.p, b.p, b.redop)
        return whole[b.rank * b.count:(b.rank + 1) * b.count]

    def result(self, b, inplace):
        return b.recv

    def run(self, b, comm, algorithm, inplace):
        comm.reduce_scatter(b.send, b.redop, algorithm=algorithm, out=b.recv)

    def native(self, b, mpi, MPI, inplace):
        mpi.Reduce_scatter_block(b.send, b.recv, op=mpi_op(MPI, b))

    def native_supported(self, dtype, redop):
        return native_reducible(dtype, redop)


class Scatter(Spec):
    name, rooted = "scatter", True

    def elements(self, count, p):
        return count * p, count

    def fill(self, b):
        b.send[...] = values(b.dtype, b.send.size, b.root) if b.rank == b.root else 0

    def expected(self, b):
        return values(b.dtype, b.count * b.p, b.root)[b.rank * b.count:(b.rank + 1) * b.count]

    def result(self, b, inplace):
        return b.recv

    def run(self, b, comm, algorithm, inplace):
        comm.scatter(b.send if b.rank == b.root else None, b.root, algorithm=algorithm, out=b.recv)

    def native(self, b, mpi, MPI, inplace):
        mpi.Scatter(_bytes(b.send), _bytes(b.recv), root=b.root)


class AllToAll(Spec):
    name = "alltoall"

    def elements(self, count, p):
        return count * p, count * p

    def fill(self, b):
        # block j of rank r: values of "rank" r * p + j
        b.send[...] = np.concatenate([values(b.dtype, b.count, b.rank * b.p + j)
                                      for j in range(b.p)])

    def expected(self, b):
        return np.concatenate([values(b.dtype, b.count, r * b.p + b.rank) for r in range(b.p)])

    def result(self, b, inplace):
        return b.recv

    def run(self, b, comm, algorithm, inplace):
        comm.alltoall(b.send, algorithm=algorithm, out=b.recv)

    def native(self, b, mpi, MPI, inplace):
        mpi.Alltoall(_bytes(b.send), _bytes(b.recv))


SPECS = {s.name: s for s in (AllReduce(), Broadcast(), Reduce(), Gather(), Scatter(),
                             AllGather(), ReduceScatter(), AllToAll(), Scan())}


def _bytes(a: np.ndarray) -> np.ndarray:
    """A byte view: data movement works for every dtype, bfloat16 included."""
    return a.view(np.uint8)


def mpi_op(MPI, b):
    """The MPI op that computes b.redop on b's dtype. MPI defines only its
    logical ops on C bool, and pycoll's bool ops are numpy's (SUM and MAX
    are OR, PROD and MIN are AND): those map to MPI.LOR, MPI.LAND, and BXOR
    to MPI.LXOR."""
    if np.dtype(b.dtype) == np.bool_:
        return {Op.SUM: MPI.LOR, Op.MAX: MPI.LOR, Op.BOR: MPI.LOR, Op.PROD: MPI.LAND,
                Op.MIN: MPI.LAND, Op.BAND: MPI.LAND, Op.BXOR: MPI.LXOR}[b.redop]
    return {Op.SUM: MPI.SUM, Op.PROD: MPI.PROD, Op.MAX: MPI.MAX, Op.MIN: MPI.MIN,
            Op.BAND: MPI.BAND, Op.BOR: MPI.BOR, Op.BXOR: MPI.BXOR}[b.redop]


def native_reducible(dtype, redop: Op) -> bool:
    """MPI reduces the standard C types; it has no AVG and no float16 or
    bfloat16 (through mpi4py's numpy buffers)."""
    return redop is not Op.AVG and np.dtype(dtype).name not in ("float16", "bfloat16")
