"""Tensor layouts over a device mesh, and redistribution between them.

The seeds' operator-level parallelism (MindSpore's tensor layout and
tensor redistribution; torch's DTensor has the same model): the ranks
form a mesh, an n-dimensional grid of shape ``shape`` numbered row-major
(rank = the mesh coordinate's flat index), and a tensor's layout says,
for each mesh dimension, what its ranks hold of the global tensor:

- ``None``: the same values on every rank along that mesh dimension
  (replicated);
- ``d`` (an int): block ``i`` of ``shape[k]`` equal blocks along tensor
  dimension ``d`` on the rank whose coordinate ``k`` is ``i`` (sharded);
- ``"partial"``: a summand: the global values are the SUM over the ranks
  along that mesh dimension (a matmul whose contraction dimension is
  sharded leaves one).

A layout is a tuple with one such placement per mesh dimension. Several
mesh dimensions may split one tensor dimension, the lower one outside
(Note [Nested splits]); each split must divide evenly (as MindSpore
requires of a strategy). MindSpore's device matrix is the mesh's shape;
its tensor map is the placements read the other way round (for each
tensor dimension, the mesh dimensions splitting it).

Example (4 ranks), the seed's ``Z = (X W) V`` with X split by rows, then
V by columns, on a mesh of shape (4,)::

    mesh = DeviceMesh((4,))
    x = mesh.shard(X, (0,))                  # rank r: rows 2r, 2r+1 of the 8-row X
    y = x @ W                                # rank r: rows 2r, 2r+1 of Y
    y = mesh.redistribute(y, (0,), (None,))  # every rank: all of Y (one allgather)
    z = y @ mesh.shard(V, (1,))              # rank r: column block r of Z

A redistribution is a sequence of collectives over the mesh's groups
(the ranks that differ only in one coordinate), each along one tensor
dimension, plus local slices (``DeviceMesh.plan`` lists them):

- "partial" to replicated: allreduce; to sharded: reduce_scatter;
- sharded to replicated: allgather;
- sharded along d to sharded along e on the same mesh dimension:
  alltoall (when the split can leave d and join e at that point, Note
  [Nested splits]; else allgather, then a slice);
- replicated to sharded: a slice of this rank's block, no message.
"""
from __future__ import annotations

import math
import operator
import time
from typing import TYPE_CHECKING

import numpy as np

from pycoll import _message, api
from pycoll._async import as_seconds
from pycoll._dtypes import Op

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence
    from typing import SupportsIndex

    from pycoll._typing import ArrayIn, CommArg, Placements, Timeout

__all__ = ["DeviceMesh", "PARTIAL"]

PARTIAL = "partial"


class DeviceMesh:
    """The ranks of a communicator as a grid of shape *shape*.

    Creation is collective (a ``comm.split`` per mesh dimension longer
    than 1): every rank calls it with the same shape, whose product must
    be the communicator's size. ``coordinate`` is this rank's place:
    ``np.unravel_index(rank, shape)``.

    Example (4 ranks)::

        mesh = DeviceMesh((2, 2))        # rank 0: (0, 0)  1: (0, 1)  2: (1, 0)  3: (1, 1)
        a = np.arange(16.).reshape(4, 4)
        x = mesh.shard(a, (0, 1))        # rank 1: a[0:2, 2:4]   rank 2: a[2:4, 0:2]
        mesh.redistribute(x, (0, 1), (0, None))   # rank 1: a[0:2]   rank 2: a[2:4]
        mesh.full(x, (0, 1))             # every rank: a
    """

    def __init__(self, shape: Iterable[SupportsIndex], comm: CommArg = None):
        c = api._comm_of(comm)
        try:
            dims = tuple(operator.index(m) for m in shape)
        except TypeError:
            raise TypeError(f"shape must be a sequence of ints, got {shape!r}") from None
        if not dims or min(dims) < 1:
            raise ValueError(f"a mesh needs at least one dimension, each at least 1, got {dims}")
        if math.prod(dims) != c.size:
            raise ValueError(f"a mesh of shape {dims} holds {math.prod(dims)} ranks; "
                             f"the communicator has {c.size}")
        self.comm = c
        self.shape = dims
        self.coordinate = tuple(int(i) for i in np.unravel_index(c.rank, dims))
        strides = [math.prod(dims[k + 1:]) for k in range(len(dims))]
        # group k: the ranks that differ from this one in coordinate k
        # alone, ranked by that coordinate. None where no message is needed.
        self._groups = [c.split(c.rank - i * s, i) if m > 1 else None
                        for m, i, s in zip(dims, self.coordinate, strides)]

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def group(self, k: int):
        """The Communicator of mesh dimension *k* (None when its length is 1):
        this rank's rank there is ``coordinate[k]``."""
        return self._groups[k]

    def free(self) -> None:
        """Free the groups' communicators (collective). Idempotent."""
        for g in self._groups:
            if g is not None:
                g.free()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.free()

    def __repr__(self) -> str:
        return f"<pycoll.DeviceMesh {self.shape}, coordinate {self.coordinate}, on {self.comm}>"

    # -- layouts ----------------------------------------------------------

    def local_shape(self, shape, placements) -> tuple:
        """The shape of this rank's block of a global tensor of *shape*
        laid out by *placements* (ValueError where a dimension does not
        divide)."""
        shape = tuple(shape)
        return self._local(shape, self._placements(placements, len(shape), "placements"))

    def global_shape(self, local_shape, placements) -> tuple:
        """The global tensor's shape, from a block's shape and its placements."""
        shape = tuple(local_shape)
        return self._global(shape, self._placements(placements, len(shape), "placements"))

    def _local(self, shape: tuple, placements: tuple) -> tuple:
        """local_shape, with *placements* checked."""
        local = list(shape)
        for d in range(len(shape)):
            along = _along(placements, d)
            ranks = math.prod(self.shape[k] for k in along)
            if shape[d] % ranks:
                raise ValueError(f"dimension {d} of shape {shape} has length {shape[d]}, which "
                                 f"mesh dimension{'s' * (len(along) > 1)} "
                                 f"{', '.join(map(str, along))} ({ranks} ranks) do"
                                 f"{'es' * (len(along) == 1)} not divide")
            local[d] = shape[d] // ranks
        return tuple(local)

    def _global(self, local_shape: tuple, placements: tuple) -> tuple:
        """global_shape, with *placements* checked."""
        shape = list(local_shape)
        for k, d in enumerate(placements):
            if type(d) is int:
                shape[d] *= self.shape[k]
        return tuple(shape)

    def shard(self, full: ArrayIn, placements: Placements) -> np.ndarray:
        """This rank's block of *full*, a global tensor every rank holds; no
        message. A new array.

        Example (2 ranks, mesh (2,))::

            mesh.shard(np.arange(4), (0,))       # rank 0: [0 1]   rank 1: [2 3]
            mesh.shard(np.arange(4), (None,))    # both: [0 1 2 3]
        """
        a = _message.as_array(full, "full")
        placements = self._placements(placements, a.ndim, "placements")
        if PARTIAL in placements:
            raise ValueError("shard cannot make a 'partial' layout: a tensor every rank holds "
                             "is replicated, not summed")
        self._local(a.shape, placements)            # each sharded dimension divides
        for k, d in enumerate(placements):
            if type(d) is int:
                a = _block(a, d, self.shape[k], self.coordinate[k])
        return np.array(a, order="C")

    def full(self, x: ArrayIn, placements: Placements, timeout: Timeout = None) -> np.ndarray:
        """The global tensor on every rank: ``redistribute`` to a layout
        replicated along every mesh dimension."""
        return self.redistribute(x, placements, (None,) * self.ndim, timeout)

    def plan(self, local_shape: Sequence[SupportsIndex], src: Placements,
             dst: Placements) -> list:
        """The steps of ``redistribute`` for a block of *local_shape* laid
        out by *src*, to *dst*, without sending anything. Each is a tuple:
        ``(collective, mesh dimension, tensor dimension)`` for
        "allreduce" (tensor dimension None), "reduce_scatter",
        "allgather" and "slice"; ``("alltoall", k, d, e)`` moves the split
        of mesh dimension k from tensor dimension d to e.

        Example (mesh (2, 2))::

            mesh.plan((4, 4), (0, None), (1, None))  # [('alltoall', 0, 0, 1)]
            mesh.plan((4, 4), ("partial", 1), (0, 1))  # [('reduce_scatter', 0, 0)]
        """
        ndim = len(local_shape)
        src = self._placements(src, ndim, "src")
        dst = self._placements(dst, ndim, "dst")
        for k, (a, b) in enumerate(zip(src, dst)):
            if b == PARTIAL and a != PARTIAL:
                raise ValueError(f"dst makes mesh dimension {k} 'partial' where src has "
                                 f"{a!r}: a redistribution sums, it does not split a sum")
        self._local(self._global(tuple(local_shape), src), dst)       # dst divides
        current: list = list(src)
        steps: list[tuple] = []
        # Note [Nested splits]: the splits already where dst has them (at
        # first, those of src that stay), outermost first along each dimension
        placed = {k for d in range(ndim) for k in _common_prefix(_along(src, d), _along(dst, d))}

        def may_add(k, e) -> bool:          # k may split dimension e now, innermost
            have = _along(current, e)
            pending = [j for j in _along(dst, e) if j not in have]
            return placed.issuperset(have) and pending[:1] == [k]

        for k, (a, b) in enumerate(zip(src, dst)):     # sums first: they shrink nothing
            if a == PARTIAL and b != PARTIAL:
                if type(b) is int and may_add(k, b):
                    steps.append(("reduce_scatter", k, b))
                    current[k] = b
                    placed.add(k)
                else:
                    steps.append(("allreduce", k, None))
                    current[k] = None
        for k in reversed(range(self.ndim)):           # then splits that go, innermost first
            a, b = current[k], dst[k]
            if type(a) is int and k not in placed:
                if type(b) is int and may_add(k, b):
                    steps.append(("alltoall", k, a, b))
                    current[k] = b
                    placed.add(k)
                else:
                    steps.append(("allgather", k, a))
                    current[k] = None
        for k, b in enumerate(dst):                    # then new splits, locally
            if type(b) is int and current[k] != b:
                steps.append(("slice", k, b))
                current[k] = b
        # Mesh dimensions of length 1 need no message: a step there is the identity.
        return [s for s in steps if self.shape[s[1]] > 1]

    def redistribute(self, x: ArrayIn, src: Placements, dst: Placements,
                     timeout: Timeout = None) -> np.ndarray:
        """This rank's block of the same global tensor, laid out by *dst*
        instead of *src* (collective: every rank calls it with the same
        shapes, dtype and layouts). A new array; *x* is not changed.
        *timeout* covers the whole redistribution.

        Example (2 ranks, mesh (2,), r = mesh.comm.rank, a = np.arange(8.).reshape(2, 4))::

            x = mesh.shard(a, (0,))                 # rank 0: a[0:1]     rank 1: a[1:2]
            mesh.redistribute(x, (0,), (1,))        # rank 0: a[:, 0:2]  rank 1: a[:, 2:4]
            mesh.redistribute(x, (0,), (None,))     # both: a
            mesh.redistribute(a * (r + 1), ("partial",), (None,))   # both: 3 * a
        """
        a = _message.as_array(x, "x")
        steps = self.plan(a.shape, src, dst)        # every check, before any message
        seconds = as_seconds(timeout)
        deadline = None if seconds is None else time.monotonic() + seconds
        fresh = False                       # a is a collective's own result, not x nor a view
        for step in steps:
            kind, k, d = step[0], step[1], step[2]
            g, m = self._groups[k], self.shape[k]
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if kind == "allreduce":
                a = api.allreduce(a, Op.SUM, g, timeout=left)
            elif kind == "reduce_scatter":          # block j of m along d to group rank j
                a = api.reduce_scatter(_split(a, d, m), Op.SUM, g, timeout=left)[0]
            elif kind == "allgather":               # block i along d from group rank i
                whole = np.empty(_joined(a.shape, d, m), a.dtype)
                api.allgather(a[np.newaxis], g, out=_split(whole, d, m), timeout=left)
                a = whole
            elif kind == "alltoall":                # piece j along e to group rank j
                pieces = _split(a, step[3], m)
                whole = np.empty(_joined(pieces.shape[1:], d, m), a.dtype)
                api.alltoall(pieces, g, out=_split(whole, d, m), timeout=left)
                a = whole
            else:
                a = _block(a, d, m, self.coordinate[k])
            fresh = kind != "slice"
        # Copy only a view (of x, or a slice): a new array pays its page
        # faults on every call (a 2 MiB allgather whose result was copied
        # took 2.5 ms, against 0.4 ms without the copy; p = 2).
        return a if fresh and a.flags.c_contiguous else np.array(a, order="C")

    def _placements(self, placements, ndim: int, name: str) -> tuple:
        """*placements* checked against the mesh and a tensor of *ndim*
        dimensions: one per mesh dimension, each None, "partial" or a
        tensor dimension (an int in [0, ndim))."""
        if isinstance(placements, (str, bytes)) or not hasattr(placements, "__iter__"):
            raise TypeError(f"{name} must be a sequence of placements (None, 'partial' or "
                            f"a tensor dimension), got {placements!r}")
        out: list = []
        for k, p in enumerate(placements):
            if p is None or type(p) is str and p == PARTIAL:
                out.append(p)
                continue
            try:
                if isinstance(p, (bool, np.bool_)):
                    raise TypeError
                d = operator.index(p)
            except TypeError:
                raise TypeError(f"{name}[{k}] must be None, 'partial' or a tensor dimension, "
                                f"got {p!r}") from None
            if not 0 <= d < ndim:
                raise ValueError(f"{name}[{k}] is tensor dimension {d}, but the tensor has "
                                 f"{ndim} dimension{'s' * (ndim != 1)}")
            out.append(d)
        if len(out) != self.ndim:
            raise ValueError(f"{name} has {len(out)} placements for a mesh of "
                             f"{self.ndim} dimension{'s' * (self.ndim != 1)} {self.shape}")
        return tuple(out)


# Note [Blocks along a dimension]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# The collectives split and gather along axis 0. Along dimension d, a
# step sends what it has as it lies and receives straight into the new
# block: _split views the m blocks along d as axis 0, as the collective's
# input (which packs it) and as its out= (which unpacks into it from the
# communicator's scratch). At p = 2, a (256, 1024) float32 block gathered
# along dimension 1 took 0.52 ms, against 0.36 ms for the plain allgather
# along dimension 0 (bench/layout.py, two launches). Moving d to the
# front and back (np.moveaxis) packed and copied a transposed block:
# 4.2 ms. Gathering into a new (m, 256, 1024) array and copying it into
# place: 2.4 ms, most of it the page faults of a second new 2 MiB array
# on every call.


# Note [Nested splits]
# ~~~~~~~~~~~~~~~~~~~~
# Several mesh dimensions may split one tensor dimension: the lower mesh
# dimension is the outer split, as the row-major numbering of the ranks
# makes it (on a (2, 4) mesh, (0, 0) splits dimension 0 into 8 blocks and
# rank r holds block r; DTensor orders repeated Shard(d) the same way).
# A step can only take off or put on the innermost split of a dimension:
# an allgather over mesh dimension k joins whole blocks only when no split
# inside k's remains, and a slice, reduce_scatter or alltoall cuts the
# block this rank has. So the splits of dimension d that stay are the
# common prefix of its splits in src and in dst (in mesh-dimension
# order); the others go innermost first and come back outermost first.
# A split that moves from d to e (alltoall) does so only when it is e's
# next split to put on, and e has none left to take off.


def _along(placements, d: int) -> list:
    """The mesh dimensions splitting tensor dimension *d*, outermost first."""
    return [k for k, q in enumerate(placements) if q == d]


def _common_prefix(a: list, b: list) -> list:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return a[:n]


def _split(a: np.ndarray, d: int, m: int) -> np.ndarray:
    """The m equal blocks of *a* along dimension *d*, stacked along a new
    axis 0 (a view where a's layout allows)."""
    s = a.shape
    return np.moveaxis(a.reshape(s[:d] + (m, s[d] // m) + s[d + 1:]), d, 0)


def _joined(shape: tuple, d: int, m: int) -> tuple:
    """The shape of m blocks of *shape* concatenated along dimension *d*."""
    return shape[:d] + (m * shape[d],) + shape[d + 1:]


def _block(a: np.ndarray, d: int, m: int, i: int) -> np.ndarray:
    """Block *i* of *m* equal blocks of *a* along dimension *d* (a view)."""
    n = a.shape[d] // m
    index = [slice(None)] * a.ndim
    index[d] = slice(i * n, (i + 1) * n)
    return a[tuple(index)]
