"""FusionManager: many arrays, one collective per bucket.

    fm = pycoll.FusionManager(op=pycoll.AVG, bucket_bytes=64 << 20)
    fm.allreduce(grads)                        # in place; returns grads
    h = fm.allreduce_async(grads); ...; h.wait()
    fm.register(grads)                         # data-parallel: once
    for i in reversed(range(len(grads))):      # as backward produces each one
        fm.mark_ready(i)
    fm.wait()                                  # every bucket reduced, in place

A bucket (buckets.assign_buckets) is packed into a persistent buffer with
one kernel call (a PackPlan, made once per set of arrays), reduced with one
allreduce on the communicator's progress thread (Note [Issue order] in
_async.py), and unpacked in place. The buffer and the plan are kept, so a
call after the first allocates nothing. Copying is the cost of fusion, so a
member of at least ``inplace_bytes`` (an array big enough to run at full
bandwidth alone) is reduced where it lies, and a bucket is packed on the
caller's thread while the bucket before it is on the wire.

Each bucket's allreduce is a public allreduce of the packed buffer, with
the manager's op, algorithm and accumulate: a fused result is bitwise the
result of that algorithm on the flat buffer.

Fused reduce_scatter and allgather (the ZeRO pattern) lay a bucket out by
rank: region j holds block j (``np.array_split`` along axis 0) of every
array, so one reduce-scatter (or allgather) of the buffer with per-rank
byte counts serves every array of the bucket.

This module runs public collectives, so it sits above api.py (DESIGN.md
draws fusion/ below it): a bucket's allreduce is exactly the call a user
would make on the flat buffer.
"""
from __future__ import annotations

import numpy as np

from pycoll import _message, api
from pycoll._async import Handle
from pycoll._dtypes import Op, check_op, dtype_of, op_of
from pycoll._kernels.copy import PackPlan, block, concat_copy, split_copy
from pycoll.fusion.buckets import assign_buckets

INPLACE_BYTES = 4 << 20


class FusionManager:
    """Fused collectives over lists of arrays (see the module docstring).

    Args:
        op: the reduction (SUM, AVG for gradients_mean, ...).
        comm: a Communicator, an mpi4py communicator, or None.
        bucket_bytes: the byte cap of a bucket when no fusion ids or split
            indices are given.
        algorithm: the collective algorithm each bucket runs ("auto").
        accumulate: "float32" reduces float16/bfloat16 buckets in float32
            (gradient_fp32_sync).
        inplace_bytes: members at least this large skip the pack buffer.
    """

    def __init__(self, op=Op.SUM, comm=None, bucket_bytes: int = 64 << 20, algorithm="auto",
                 accumulate=None, inplace_bytes: int = INPLACE_BYTES):
        self.comm = api._comm_of(comm)
        self.op = op_of(op)
        self.bucket_bytes = int(bucket_bytes)
        if self.bucket_bytes < 1:
            raise ValueError(f"bucket_bytes must be at least 1, got {bucket_bytes}")
        self.algorithm = api._check_algorithm("allreduce", algorithm)
        self.accumulate = accumulate
        self.inplace_bytes = int(inplace_bytes)
        self._buffers: dict = {}        # (kind, dtype, nbytes, slot) -> persistent uint8 buffer
        self._packs: dict = {}          # bucket key -> (arrays, PackPlan)
        self._registered = None

    # -- allreduce ------------------------------------------------------

    def allreduce(self, arrays, fusion=None, split_indices=None) -> list:
        """Allreduce every array in place, one collective per bucket; returns
        the list."""
        return self.allreduce_async(arrays, fusion, split_indices).wait()

    def allreduce_async(self, arrays, fusion=None, split_indices=None) -> "FusedHandle":
        """As allreduce, returning at once; ``wait()`` returns the list."""
        arrays = list(arrays)
        views, buckets = self._buckets(arrays, fusion, split_indices)
        handles = [h for slot, b in enumerate(buckets) for h in self._launch(views, b, slot)]
        return FusedHandle(handles, arrays)

    def _check(self, arrays) -> list:
        """Each array as a writable numpy array of a dtype the op accepts;
        raised before any message."""
        checked = []
        for i, x in enumerate(arrays):
            a = _message.as_array(x, f"arrays[{i}]")
            dt = dtype_of(a.dtype, f"arrays[{i}]")
            check_op(self.op, dt)
            api._work_dtype(dt, self.accumulate)
            if not a.flags.writeable:
                raise ValueError(f"arrays[{i}] is read-only: fused collectives work in place")
            checked.append(a)
        return checked

    def _buckets(self, arrays, fusion, split_indices) -> tuple:
        """(numpy views of the arrays, their buckets); raises before any message."""
        views = self._check(arrays)
        return views, assign_buckets([a.nbytes for a in views], [a.dtype for a in views],
                                     self.bucket_bytes, fusion, split_indices)

    def _launch(self, views, bucket: list, slot: int) -> list:
        """Queue one bucket: big contiguous members in place, the rest packed
        (on this thread, while earlier buckets are on the wire)."""
        alone = [i for i in bucket if views[i].nbytes >= self.inplace_bytes
                 and views[i].flags.c_contiguous and views[i].flags.aligned]
        packed = [i for i in bucket if i not in alone]
        handles = [self._allreduce_async(views[i]) for i in alone]
        if packed:
            members = [views[i] for i in packed]
            plan = self._pack_plan(("allreduce", slot), members)
            dtype = members[0].dtype
            buf = self._buffer(("allreduce", dtype.str, plan.nbytes, slot), plan.nbytes)
            plan.pack(buf)
            flat = buf.view(dtype)
            handles.append(self.comm._progress_call(
                lambda: (self.comm.allreduce(flat, self.op, self.algorithm, out=flat,
                                             accumulate=self.accumulate), plan.unpack(buf)),
                "fused allreduce"))
        return handles

    def _allreduce_async(self, array):
        return self.comm._progress_call(
            lambda: self.comm.allreduce(array, self.op, self.algorithm, out=array,
                                        accumulate=self.accumulate), "fused allreduce")

    def _pack_plan(self, key, members) -> PackPlan:
        """The PackPlan of these arrays: kept while the same arrays come back."""
        hit = self._packs.get(key)
        if hit is not None and len(hit[0]) == len(members) and all(
                a is b for a, b in zip(hit[0], members)):
            return hit[1]
        plan = PackPlan(members)
        self._packs[key] = (tuple(members), plan)
        return plan

    def _buffer(self, key, nbytes: int) -> np.ndarray:
        buf = self._buffers.get(key)
        if buf is None:
            buf = self._buffers[key] = np.empty(nbytes, np.uint8)
        return buf

    # -- data-parallel mode ----------------------------------------------

    def register(self, arrays, fusion=None, split_indices=None) -> None:
        """Fix the arrays of the data-parallel mode and their buckets."""
        views, buckets = self._buckets(list(arrays), fusion, split_indices)
        self._registered = {"arrays": views, "buckets": buckets,
                            "bucket_of": {i: k for k, b in enumerate(buckets) for i in b},
                            "ready": [False] * len(arrays), "next": 0, "handles": []}

    def mark_ready(self, i: int) -> None:
        """Array *i* holds its final value: send every bucket whose members
        are all ready, in bucket order (so every rank sends in one order)."""
        reg = self._require_registered()
        if not 0 <= i < len(reg["ready"]):
            raise ValueError(f"array {i} is not one of the {len(reg['ready'])} registered arrays")
        if reg["ready"][i]:
            raise ValueError(f"array {i} was already marked ready in this round")
        reg["ready"][i] = True
        buckets = reg["buckets"]
        while reg["next"] < len(buckets) and all(reg["ready"][j] for j in buckets[reg["next"]]):
            reg["handles"] += self._launch(reg["arrays"], buckets[reg["next"]], reg["next"])
            reg["next"] += 1

    def wait(self) -> list:
        """Finish the round: every bucket reduced in place. Returns the arrays."""
        reg = self._require_registered()
        missing = [i for i, r in enumerate(reg["ready"]) if not r]
        for h in reg["handles"]:
            h.wait()
        reg["ready"] = [False] * len(reg["ready"])
        reg["next"], reg["handles"] = 0, []
        if missing:
            raise ValueError(f"arrays {missing} were never marked ready; their buckets were not sent")
        return reg["arrays"]

    def _require_registered(self):
        if self._registered is None:
            raise ValueError("call register(arrays) before mark_ready/wait")
        return self._registered

    # -- fused reduce_scatter and allgather (ZeRO) ------------------------

    def reduce_scatter(self, arrays, fusion=None, split_indices=None) -> list:
        """Rank r gets block r (np.array_split along axis 0) of the reduction
        of each array, one reduce-scatter per bucket. Returns new arrays."""
        arrays = list(arrays)
        for i, a in enumerate(arrays):
            api._rows(np.shape(a), f"arrays[{i}] in reduce_scatter")
        views, buckets = self._buckets(arrays, fusion, split_indices)
        c = self.comm
        shards = [None] * len(views)
        handles = []
        for slot, bucket in enumerate(buckets):
            members = [views[i] for i in bucket]
            counts, offsets = _layout(members, c.size)
            dtype = dtype_of(members[0].dtype)
            buf = self._buffer(("reduce_scatter", members[0].dtype.str, sum(counts), slot), sum(counts))
            for k, a in enumerate(members):
                for j in range(c.size):
                    lo = offsets[j][k]
                    n = _block_bytes(a, c.size, j)
                    split_copy(a, buf[lo:lo + n], 0, c.size, j)
            own = [np.empty((block(a.shape[0], c.size, c.rank)[1], *a.shape[1:]), a.dtype)
                   for a in members]
            for i, s in zip(bucket, own):
                shards[i] = s

            def run(buf=buf, counts=counts, offsets=offsets, own=own, dtype=dtype):
                region = api._fused_reduce_scatter(c, buf, counts, dtype, self.op, self.accumulate)
                start = offsets[c.rank][0] if own else 0
                for k, s in enumerate(own):
                    lo = offsets[c.rank][k] - start
                    s.reshape(-1).view(np.uint8)[:] = region[lo:lo + s.nbytes]
            handles.append(c._progress_call(run, "fused reduce_scatter"))
        for h in handles:
            h.wait()
        return shards

    def allgather(self, shards, out) -> list:
        """The inverse: rank r holds block r of each array of *out* (the
        full arrays, written in place on every rank). Returns out."""
        out, shards = list(out), list(shards)
        if len(out) != len(shards):
            raise ValueError(f"{len(shards)} shards for {len(out)} arrays")
        full = self._check(out)
        c = self.comm
        for i, (s, a) in enumerate(zip(shards, full)):
            expected = (block(a.shape[0], c.size, c.rank)[1], *a.shape[1:]) if a.ndim else None
            if expected is None or np.shape(s) != expected:
                raise ValueError(f"shard {i} has shape {np.shape(s)}, expected {expected}")
        buckets = assign_buckets([a.nbytes for a in full], [a.dtype for a in full], self.bucket_bytes)
        handles = []
        for slot, bucket in enumerate(buckets):
            members = [full[i] for i in bucket]
            counts, offsets = _layout(members, c.size)
            buf = self._buffer(("allgather", members[0].dtype.str, sum(counts), slot), sum(counts))
            for k, i in enumerate(bucket):
                lo = offsets[c.rank][k]
                src = np.ascontiguousarray(_message.as_array(shards[i], f"shards[{i}]"))
                buf[lo:lo + src.nbytes] = src.reshape(-1).view(np.uint8)

            def run(buf=buf, counts=counts, offsets=offsets, members=members):
                api._fused_allgather(c, buf, counts, dtype_of(members[0].dtype))
                for k, a in enumerate(members):
                    for j in range(c.size):
                        lo = offsets[j][k]
                        concat_copy(buf[lo:lo + _block_bytes(a, c.size, j)], a, 0, c.size, j)
            handles.append(c._progress_call(run, "fused allgather"))
        for h in handles:
            h.wait()
        return out


def _block_bytes(a: np.ndarray, p: int, j: int) -> int:
    return block(a.shape[0], p, j)[1] * (a.nbytes // a.shape[0] if a.shape[0] else 0)


def _layout(members, p: int) -> tuple:
    """Per-rank byte counts of a bucket laid out by rank, and the offset of
    each member's block in each rank's region: offsets[j][k]."""
    counts, offsets, start = [], [], 0
    for j in range(p):
        row = []
        for a in members:
            row.append(start)
            start += _block_bytes(a, p, j)
        offsets.append(row)
        counts.append(start - (row[0] if row else start))
    return counts, offsets


class FusedHandle:
    """The buckets of one fused call: ``wait()`` returns the arrays once every
    bucket is back in place; ``done()`` whether all have finished."""

    def __init__(self, handles: list, arrays: list):
        self._handles, self._arrays = handles, arrays

    def done(self) -> bool:
        return all(h.done() for h in self._handles)

    def wait(self, timeout=None) -> list:
        for h in self._handles:
            h.wait(timeout)
        return self._arrays


__all__ = ["FusionManager", "FusedHandle", "Handle"]
