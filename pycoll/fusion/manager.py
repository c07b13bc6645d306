"""FusionManager: many arrays, few collectives.

    fm = pycoll.FusionManager(op=pycoll.AVG, bucket_bytes=64 << 20)
    fm.allreduce(grads)                        # in place; returns grads
    h = fm.allreduce_async(grads); ...; h.wait()
    fm.register(grads)                         # data-parallel: once
    for i in reversed(range(len(grads))):      # as backward produces each one
        fm.mark_ready(i)
    fm.wait()                                  # every bucket reduced, in place

Buckets come from buckets.assign_buckets. Each bucket goes out one of four
ways, whichever the cost model (pycoll/tuning.py) rates fastest for its
sizes; ``strategy=`` fixes one:

    "pack"    pack the members into a persistent buffer with one kernel
              call, one allreduce of the buffer, unpack in place. Two
              copies of every byte: cheap for small members, whose
              allreduces would each pay the per-call latency.
    "split"   "pack" for the small members and "each" for the members
              large enough to run at full bandwidth alone, in place: those
              the model rates cheaper alone than the copies and bytes they
              add to the pack (DESIGN.md: copying is fusion's cost).
              ``plan()`` lists the two parts: one "pack" entry, then one
              "each" entry per member sent alone.
    "pieces"  one allreduce of the members as one vector, where they lie
              (pycoll/_pieces.py): no copy, but every member boundary cuts
              the messages. For buckets of large arrays on huge pages;
              needs C-contiguous members, no accumulate, an algorithm
              marked PIECES.
    "each"    one in-place allreduce per member: not fusing, when that is
              cheapest (and always for a one-array bucket).

Note [Same layout everywhere]: every rank must send a bucket the same way,
with the same algorithm and, for "pieces", messages cut at the same
places, or the messages do not match. So the choice may depend only on
what every rank shares (shapes, dtypes, fusion ids, the Communicator's
settings) and on the arrays' layout as agreed by all ranks: the first time
a manager sees a list of shapes, one small allreduce (MIN) tells whether
every rank's members are C-contiguous and aligned, and which neighbours
are adjacent views of one buffer on every rank (they make one piece),
and which lie on huge pages on every rank (Note [Pieces on small pages]
in pycoll/tuning.py).
The agreement is kept per list of shapes (the same calls on every rank,
so the same cache hits), which makes ``plan()`` of new shapes collective.
A rank whose later arrays of the same shapes lie differently (reallocated
gradients) still sends the agreed messages: where its arrays cannot, it
packs the bucket and cuts the copy into the agreed pieces.

``autotune=True`` measures instead of trusting the model, as Horovod's
HOROVOD_AUTOTUNE does: the first blocking allreduce calls on one list of
arrays try the model's plan and every bucket at each fixed strategy,
AUTOTUNE_ROUNDS times each in turn; the ranks then agree (one allreduce of
the median times, the slowest rank's counting) on the fastest plan and keep
it for as long as the same arrays come back. Every trial is a complete,
exact allreduce, but trials of different plans may round floats
differently.

Every way is exact: a "pack" or "pieces" bucket is bitwise the result of
its algorithm on the packed vector, an "each" member the result of an
allreduce of that member alone, and a "split" bucket is both: its packed
members' result is the algorithm's on their packed vector. ``plan(arrays)``
tells which way each bucket takes. Buffers, PackPlans and the checked arrays are kept, so a
repeated call with the same arrays allocates nothing and checks little.

Buckets run as collectives of the communicator's progress thread (Note
[Issue order] in _async.py): the caller packs bucket k+1 while bucket k is
on the wire, and data-parallel mode overlaps the caller's compute. Small
buckets of arrays that come back call after call skip all that (Note
[Inline buckets]).

Fused reduce_scatter and allgather (the ZeRO pattern) lay a bucket out by
rank: region j holds block j (``np.array_split`` along axis 0) of every
array, so one reduce-scatter (or allgather) of the buffer with per-rank
byte counts serves every array of the bucket (_ZeroBucket). Their buckets
run as a blocking allreduce's do (queued only while the next one packs
much), the reduce-scatter on its C lane where its messages fit, the
allgather in place (this rank's region is its own block) on its lane; the
shards reduce_scatter returns are views of one new array per bucket, the
region the reduction lands in. Members the model rates cheaper on their
own than copied go on their own (zero_ways, _ZeroAlone). A bucket is
kept, as an allreduce's calls are, while the same arrays come back.

This module runs public collectives, so it sits above api.py (DESIGN.md
draws fusion/ below it): a bucket's allreduce is exactly the call a user
would make on the flat buffer.
"""
from __future__ import annotations

import collections
import functools
import math
import numbers
import operator
import time
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from pycoll import _message, api, tuning
from pycoll._async import Handle, as_seconds
from pycoll._comm import flag
from pycoll._plan import accumulate_of
from pycoll._dtypes import Op, check_op, dtype_of, op_of
from pycoll._kernels.copy import PackPlan, block, first_overlap
from pycoll._memory import empty
from pycoll._resources import huge_page_bytes
from pycoll._pieces import follows, joined_views
from pycoll._trials import Trials
from pycoll.fusion.buckets import assign_buckets, byte_cap

if TYPE_CHECKING:
    from pycoll._typing import Accumulate, ArrayIn, CommArg, Ids, OpArg

_BASE = operator.attrgetter("base")

STRATEGIES = ("pack", "split", "pieces", "each")
ORDERS = ("backward", "forward")
AUTOTUNE_ROUNDS = 3


class FusionManager:
    """Fused collectives over lists of arrays (see the module docstring).

    Args:
        op: the reduction: AVG by default (gradients averaged, as the
            seeds' gradients_mean, DDP and Horovod do), SUM, or any op
            allreduce takes. AVG needs floating or complex arrays.
        comm: a Communicator, an mpi4py communicator, or None.
        bucket_bytes: the byte cap of a bucket when no fusion ids or split
            indices are given.
        algorithm: the allreduce algorithm of every bucket ("auto": the
            model's choice for the bucket's size and strategy).
        accumulate: "float32" reduces float16/bfloat16 buckets in float32
            (gradient_fp32_sync).
        strategy: "pack", "split", "pieces" or "each" for every bucket of
            more than one array, instead of the model's choice ("pieces"
            falls back to "pack" where it cannot run; "split" sends alone
            the members the model would, and is "pack" where there are
            none). reduce_scatter and allgather take "pack" and "each";
            under the others, the model's choice (zero_ways).
        autotune: measure the ways on the first blocking allreduce calls
            and keep the fastest (see the module docstring); ignored when
            *strategy* is given.
    """

    def __init__(self, op: OpArg = Op.AVG, comm: CommArg = None, bucket_bytes: int = 64 << 20,
                 algorithm: str = "auto", accumulate: Accumulate = None,
                 strategy: str | None = None, autotune: bool = False):
        self.comm = api._comm_of(comm)
        self.op = op_of(op)
        self.bucket_bytes = byte_cap(bucket_bytes)
        self.algorithm = api._check_algorithm("allreduce", algorithm)
        self.accumulate = accumulate_of(accumulate)
        if strategy is not None and strategy not in STRATEGIES:
            raise ValueError(f"strategy must be one of {', '.join(STRATEGIES)} or None, "
                             f"got {strategy!r}")
        self.strategy = strategy
        self.autotune = flag(autotune, "autotune") and strategy is None
        # signature -> its agreed layouts (_agree); and, under autotune, its Trials
        self._layouts: collections.OrderedDict = collections.OrderedDict()
        self._trials: collections.OrderedDict = collections.OrderedDict()
        self._buffers: dict = {}        # (kind, dtype, nbytes, slot) -> persistent uint8 buffer
        self._packs: dict = {}          # bucket key -> (arrays, PackPlan)
        self._last: tuple | None = None     # (arrays, (fusion, split), _Planned): the last call
        # kind -> (arrays, (fusion, split), units, inline): the last call
        self._zero: dict = {}
        self._zero_shards: tuple | None = None  # (units, shards, their parts) of the last allgather
        # the shards the last reduce_scatter returned (None where one went
        # alone), those sent alone as (index, weak reference), their owners
        self._fresh: tuple = ((), (), frozenset())
        # allgather units, ids of their out arrays and bases
        self._out_ids: tuple = (None, frozenset())
        self._inline: _Inline | None = None     # _Inline of the last blocking allreduce's arrays
        self._registered: dict | None = None

    def __repr__(self) -> str:
        return (f"<pycoll.FusionManager {self.op.value}, buckets of {self.bucket_bytes} B, "
                f"on {self.comm!r}>")

    # -- allreduce ------------------------------------------------------

    def allreduce(self, arrays: Sequence[ArrayIn], fusion: Ids = None,
                  split_indices: Ids = None) -> list:
        """Allreduce every array in place, one collective per bucket; returns
        the list.

        Example (2 ranks, op=SUM)::

            arrays = [np.full(2, rank), np.full(3, 10 * rank)]   # rank 0: [0 0], [0 0 0]
                                                                # rank 1: [1 1], [10 10 10]
            fm.allreduce(arrays)                                # both:   [1 1], [10 10 10]
            fm.allreduce(arrays, fusion=[1, 0])                 # ids: array 1 travels alone
        """
        self.comm._live()                   # freed or broken: its error, no message
        inline = self._inline
        if inline is not None and inline.ran(arrays, fusion, split_indices):
            return list(arrays)
        arrays = list(arrays)
        last = self._last
        planned = self._buckets(arrays, fusion, split_indices)
        trials = self._trials.get(planned.key)
        if self.autotune and trials is None:
            trials = self._trials[planned.key] = Trials(self._candidates(planned), AUTOTUNE_ROUNDS)
            _bound(self._trials)
        if trials is None or trials.chosen is not None:
            result = self._allreduce(arrays, fusion, split_indices, False, planned).wait()
            if not self.autotune and last is not None and last[2] is planned:
                self._inline = _Inline.make(self, last, planned)
            return result
        # Autotune: every rank makes the same calls with the same arrays, so
        # every rank is at the same trial (Note [Same layout everywhere]).
        k = trials.next()
        start = time.perf_counter()
        self._allreduce(arrays, fusion, split_indices, False,
                        planned._replace(ways=trials.candidates[k])).wait()
        trials.record(k, time.perf_counter() - start)
        if trials.finished():                       # Note [Tuning online] in _trials.py
            trials.decide(lambda medians: self.comm.allreduce(medians, Op.MAX))
        return arrays

    def allreduce_async(self, arrays: Sequence[ArrayIn], fusion: Ids = None,
                        split_indices: Ids = None) -> "FusedHandle":
        """As allreduce, returning at once; ``wait()`` returns the list."""
        self.comm._live()                   # freed or broken: its error, no message
        return self._allreduce(list(arrays), fusion, split_indices, True)

    def _allreduce(self, arrays, fusion, split_indices, async_op, planned=None) -> "FusedHandle":
        # A blocking call queues a bucket only when the next one is packed,
        # so that the packing happens while it is on the wire; the others
        # run on this thread, in their turn (Note [Issue order]), without a
        # hand-over to the progress thread.
        planned = planned or self._buckets(arrays, fusion, split_indices)
        views, buckets, ways, layouts = planned.views, planned.buckets, planned.ways, planned.layouts
        last = len(buckets) - 1
        handles = [h for k, b in enumerate(buckets)
                   for h in self._launch(views, b, k, ways[k], layouts[k],
                                         async_op or (k < last and ways[k + 1].packs))]
        return FusedHandle(handles, arrays)

    def plan(self, arrays: Sequence[ArrayIn], fusion: Ids = None,
             split_indices: Ids = None) -> list:
        """How allreduce(arrays, ...) would send them: one (array indices,
        strategy, algorithm) per bucket, in the order they go out; a "split"
        bucket as its packed part, ("pack", algorithm), then each member
        sent alone, ([i], "each", None). Collective for a list of arrays of
        new shapes (Note [Same layout everywhere])."""
        planned = self._buckets(list(arrays), fusion, split_indices)
        entries = []
        for b, way in zip(planned.buckets, planned.ways):
            if way.strategy != "split":
                entries.append((list(b), way.strategy, way.algorithm))
                continue
            packed, alone = way.parts(list(b))
            entries.append((packed, "pack", way.algorithm))
            entries += [([i], "each", None) for i in alone]
        return entries

    def _check(self, arrays, written: bool = True, name: str = "arrays") -> list:
        """Each array as a writable numpy array of a dtype the op accepts,
        and, where the call writes them (*written*), no two sharing memory
        (Note [Arrays that share memory]); raised before any message, naming
        the arrays as the caller's argument *name*."""
        checked, seen = [], set()
        for i, x in enumerate(arrays):
            a = x if type(x) is np.ndarray else _message.as_array(x, f"{name}[{i}]")
            if a.dtype not in seen:
                dt = dtype_of(a.dtype, f"{name}[{i}]")
                check_op(self.op, dt)
                api._work_dtype(dt, self.accumulate)
                seen.add(a.dtype)
            _message.check_writable(a, f"{name}[{i}]", ": fused collectives work in place")
            checked.append(a)
        # Note [Arrays that share memory]: each array's result is written
        # into it, by a bucket's unpack, a piece reduced where it lies, or
        # an allreduce of its own, in an order that depends on the sizes
        # (and, with buckets in flight, on timing). Two arrays sharing an
        # element leave in it whichever write came last, or feed one
        # array's partial result into the other's reduction: an array of
        # ones passed twice (p = 3, SUM) came back 3 at 1,000 elements,
        # 5 at 100,000 and 4 at 1,000,000, where two allreduces in turn
        # would give 9. So they are refused before any message; one array
        # twice in the list (tied weights) is the likely way to get here.
        # reduce_scatter only reads its arrays.
        pair = first_overlap(checked, np.shares_memory) if written and len(checked) > 1 else None
        if pair is not None:
            i, j = pair
            raise ValueError(f"{name}[{i}] and {name}[{j}] share memory: a fused collective "
                             f"writes each array's result into it, so each needs its own")
        return checked

    def _buckets(self, arrays, fusion, split_indices) -> "_Planned":
        """The arrays' numpy views, buckets, ways and agreed layouts; raises
        before any message. The ways are autotune's choice once it has made
        one for these shapes, else the model's."""
        planned = self._planned(arrays, fusion, split_indices)
        trials = self._trials.get(planned.key)
        if trials is None or trials.chosen is None:
            return planned
        return planned._replace(ways=trials.chosen)

    def _planned(self, arrays, fusion, split_indices) -> "_Planned":
        """_buckets with the model's ways. The same arrays as the last call
        (the same objects, with the same shapes and dtypes) reuse all of it."""
        try:
            how = (_frozen(fusion), _frozen(split_indices))
        except TypeError:
            how = None                      # assign_buckets names the problem
        last = self._last
        if last is not None and how is not None and last[1] == how and _kept(arrays, last[0]):
            return last[2]                  # (a read-only array misses: _check names it)
        views = self._check(arrays)
        buckets = assign_buckets([a.nbytes for a in views], [a.dtype for a in views],
                                 self.bucket_bytes, fusion, split_indices)
        key = (how, tuple((a.shape, a.dtype.str) for a in views))
        layouts = self._layouts.get(key) if how is not None else None
        if layouts is None:
            layouts = self._agree(views, buckets)
            if how is not None:
                self._layouts[key] = layouts
                _bound(self._layouts)
        ways = [self._way([views[i] for i in b], layout) for b, layout in zip(buckets, layouts)]
        planned = _Planned(views, buckets, ways, layouts, key)
        if how is not None and all(type(a) is np.ndarray for a in arrays):
            self._last = ([(a, a.shape, a.dtype) for a in arrays], how, planned)
        return planned

    def _agree(self, views, buckets) -> list:
        """Per bucket, the layout every rank's arrays share (Note [Same
        layout everywhere]): None where some rank's members cannot be
        reduced where they lie, else the Joins of its non-empty members:
        one flag per member after the first, True if it follows the one
        before in memory (a view of the same buffer, adjacent) on every
        rank, so the two make one piece; and the bytes of the members that
        lie on small pages on some rank (Note [Pieces on small pages] in
        pycoll/tuning.py). One small allreduce (MIN) of those flags."""
        local, shape = [], []
        for b in buckets:
            members = [views[i] for i in b if views[i].nbytes]
            ours = [all(a.flags.c_contiguous and a.flags.aligned for a in members)]
            ours += [follows(x, y) for x, y in zip(members, members[1:])]
            ours += [_on_huge_pages(a) for a in members]
            local += ours
            shape.append((len(ours), [a.nbytes for a in members]))
        flags = np.array(local, np.uint8)
        if self.comm.size > 1 and len(flags):
            flags = self.comm.allreduce(flags, Op.MIN)
        layouts, at = [], 0
        for count, sizes in shape:
            agreed = [bool(f) for f in flags[at:at + count]]
            at += count
            n = len(sizes)
            lying, joins, huge = agreed[0], agreed[1:n], agreed[n:]
            small = sum(k for k, on_huge in zip(sizes, huge) if not on_huge)
            layouts.append(Joins(joins, small) if lying and self.accumulate is None else None)
        return layouts

    def _way(self, members: list, layout) -> "Way":
        """How one bucket goes out: the cheapest way by the cost model, or
        the manager's fixed strategy."""
        if len(members) == 1:
            return Way("each", None)
        costs = self.costs(members, layout)
        if self.strategy is not None:
            chosen = self.strategy if self.strategy in costs else "pack"
        else:
            chosen = min(costs, key=lambda k: costs[k][0])
        return costs[chosen][1]

    def costs(self, members: list, layout) -> dict:
        """The model's (seconds, Way) of each way that can send this bucket
        of arrays, given its agreed *layout* (_agree; None: it cannot go
        unpacked). The algorithm of "each" is None: every member's own
        "auto". "split" is there when some members are cheaper alone and at
        least two non-empty ones are not: alone, a member of k bytes costs
        its own call and allreduce; packed, its two copies and k bytes more
        of the bucket's allreduce (at the bucket's seconds per byte).
        Depends only on what every rank shares."""
        c = self.comm
        dtype = dtype_of(members[0].dtype)
        widen = api._work_dtype(dtype, self.accumulate).itemsize // dtype.itemsize
        sizes = [a.nbytes * widen for a in members]
        n = sum(sizes)
        params = c.settings.params or tuning.DEFAULT_PARAMS
        call = params.get("call_alpha", tuning.CALL_ALPHA)

        def best(nbytes, pieces=False):
            return tuning.best("allreduce", nbytes, c.size, c.settings, dtype.name,
                               self.algorithm, pieces)

        def alone(k):
            # One member's own allreduce runs what "auto" picks for its size,
            # on data as cold as the whole bucket's (tuning.modelled_time).
            return call + tuning.modelled_time("allreduce", best(k)[0], k, c.size, params,
                                               dtype.name, footprint=n)

        def packed(nbytes):
            algorithm, t = best(nbytes)
            return call + t + 2 * nbytes * tuning.pack_beta(params, nbytes), algorithm

        seconds, algorithm = packed(n)
        singles = [alone(k) for k in sizes]
        costs = {"pack": (seconds, Way("pack", algorithm)),
                 "each": (sum(singles), Way("each", None))}
        per_byte = seconds / n if n else 0.0
        go = tuple(j for j, (k, t) in enumerate(zip(sizes, singles)) if t < k * per_byte)
        packing = sum(1 for j, k in enumerate(sizes) if k and j not in go)
        if go and packing > 1:
            seconds, algorithm = packed(n - sum(sizes[j] for j in go))
            costs["split"] = (seconds + sum(singles[j] for j in go), Way("split", algorithm, go))
        if layout is not None:
            algorithm, t = best(n, pieces=True)
            if algorithm is not None:
                pieces = 1 + layout.count(False)
                t += pieces * params.get("piece_alpha", tuning.PIECE_ALPHA)
                if layout.small and n > tuning.HUGE:    # Note [Pieces on small pages] in tuning.py
                    wire = tuning.REGISTRY["allreduce"][algorithm].bytes_on_wire(n, c.size)
                    t += wire * layout.small / n * params.get("small_page_beta",
                                                              tuning.SMALL_PAGE_BETA)
                costs["pieces"] = (call + t, Way("pieces", algorithm))
        return costs

    def _candidates(self, planned) -> list:
        """The plans autotune tries: the model's, then every bucket of more
        than one array at each strategy (where "pieces" or "split" cannot
        run, "pack"); each plan once."""
        views, ways = planned.views, planned.ways
        plans = [list(ways)]
        costs = [self.costs([views[i] for i in b], layout) if len(b) > 1 else None
                 for b, layout in zip(planned.buckets, planned.layouts)]
        for strategy in STRATEGIES:
            plan = [way if c is None else c[strategy if strategy in c else "pack"][1]
                    for way, c in zip(ways, costs)]
            if plan not in plans:
                plans.append(plan)
        return plans

    def _launch(self, views, bucket: list, slot: int, way: "Way", layout,
                async_op: bool = True) -> list:
        """Issue one bucket *way*'s way: queued (*async_op*) or on this
        thread in its turn. Packing happens here, on the caller's thread,
        while earlier buckets are on the wire. Returns Handles."""
        pack, send = self._calls(views, bucket, slot, way, layout)
        if pack is not None:
            pack()
        c = self.comm
        if async_op:
            return [c._progress_call(send, "fused allreduce")]
        handle = Handle("fused allreduce")
        handle._finish(c._progress.call(send, "fused allreduce", False))
        return [handle]

    def _calls(self, views, bucket: list, slot: int, way: "Way", layout) -> tuple:
        """One bucket's calls, *way*'s way, as (pack, send): functions of no
        arguments; pack (None where nothing is packed) copies the members
        into the bucket's buffer, send makes its allreduces and unpacks."""
        members = [views[i] for i in bucket]
        strategy, algorithm, _ = way
        c, op, accumulate = self.comm, self.op, self.accumulate

        def each(arrays):
            for a in arrays:
                c.allreduce(a, op, self.algorithm, out=a, accumulate=accumulate)
        if strategy == "each":
            return None, functools.partial(each, members)
        if strategy == "pieces":
            assert algorithm is not None        # (only "each" has none)
            dtype = dtype_of(members[0].dtype)
            pieces = joined_views(members, layout)
            if pieces is not None:
                return None, functools.partial(api._fused_allreduce, c, pieces, dtype, op, algorithm)
            # This rank's arrays no longer lie as agreed (new arrays of the
            # same shapes): reduce a packed copy cut into the agreed pieces,
            # so that the messages are the other ranks'.
            plan = self._pack_plan(("allreduce", slot), members)
            buf = self._buffer(("allreduce", members[0].dtype.str, plan.nbytes, slot), plan.nbytes)
            cut = _cut(buf, members, layout)

            def send_cut():
                api._fused_allreduce(c, cut, dtype, op, algorithm)
                plan.unpack(buf)
            return functools.partial(plan.pack, buf), send_cut
        members, singles = way.parts(members)
        plan = self._pack_plan(("allreduce", slot), members)
        buf = self._buffer(("allreduce", members[0].dtype.str, plan.nbytes, slot), plan.nbytes)
        flat = buf.view(members[0].dtype)

        def send_packed():
            c.allreduce(flat, op, algorithm, out=flat, accumulate=accumulate)
            plan.unpack(buf)
            each(singles)
        return functools.partial(plan.pack, buf), send_packed

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
            buf = self._buffers[key] = empty(nbytes, np.uint8)   # Note [Huge pages] in _memory.py
        return buf

    # -- data-parallel mode ----------------------------------------------

    def register(self, arrays: Sequence[ArrayIn], fusion: Ids = None, split_indices: Ids = None,
                 order: str = "backward") -> None:
        """Fix the arrays of the data-parallel mode and their buckets.

        Buckets go out as soon as all their members are marked ready, in a
        fixed order the same on every rank whatever order the ranks mark
        in: *order* "backward" (the default) sends the bucket of the last
        arrays first, as a backward pass produces gradients from the last
        layer to the first (DDP's bucket order); "forward" the first.
        """
        self.comm._live()                   # freed or broken: its error, no message
        if order not in ORDERS:
            raise ValueError(f"order must be one of {', '.join(ORDERS)}, got {order!r}")
        planned = self._buckets(list(arrays), fusion, split_indices)
        sequence = list(range(len(planned.buckets)))
        if order == "backward":
            sequence.reverse()
        self._registered = {"arrays": planned.views, "buckets": planned.buckets,
                            "ways": planned.ways, "layouts": planned.layouts, "sequence": sequence,
                            "ready": [False] * len(planned.views), "next": 0, "handles": []}

    def mark_ready(self, i: int) -> None:
        """Array *i* holds its final value: send every bucket whose members
        are all ready and whose turn it is."""
        self.comm._live()                   # freed or broken: its error, no message
        reg = self._require_registered()
        if isinstance(i, bool) or not isinstance(i, numbers.Integral):
            raise TypeError(f"mark_ready takes an array's index (an int), got {i!r}")
        if not 0 <= i < len(reg["ready"]):
            raise ValueError(f"array {i} is not one of the {len(reg['ready'])} registered arrays")
        if reg["ready"][i]:
            raise ValueError(f"array {i} was already marked ready in this round")
        reg["ready"][i] = True
        buckets, sequence = reg["buckets"], reg["sequence"]
        while reg["next"] < len(sequence):
            k = sequence[reg["next"]]
            if not all(reg["ready"][j] for j in buckets[k]):
                break
            reg["handles"] += self._launch(reg["arrays"], buckets[k], k, reg["ways"][k],
                                           reg["layouts"][k])
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

    def reduce_scatter(self, arrays: Sequence[ArrayIn], fusion: Ids = None,
                       split_indices: Ids = None) -> list:
        """Rank r gets block r (np.array_split along axis 0) of the reduction
        of each array, one reduce-scatter per bucket. Returns new arrays
        (views of one new buffer per bucket).

        Example (2 ranks, op=SUM)::

            arrays = [np.full(4, rank), np.full(2, 10 * rank)]  # rank 0: [0 0 0 0], [0 0]
                                                               # rank 1: [1 1 1 1], [10 10]
            fm.reduce_scatter(arrays)                          # rank 0: [1 1], [10]
                                                               # rank 1: [1 1], [10]
        """
        self.comm._live()                   # freed or broken: its error, no message
        if type(arrays) is not list:
            arrays = list(arrays)
        units, inline = self._zero_units("reduce_scatter", arrays, fusion, split_indices)
        shards = [None] * len(arrays)
        if inline and self.comm._progress.in_turn():
            for u in units:                 # Note [Inline buckets]
                u.reduce_scatter_now(shards)
        else:
            self._by_turns([u.reduce_scatter_step(shards) for u in units], "fused reduce_scatter")
        owners, kept, alone = set(), list(shards), []
        for u in units:                     # what holds the shards' memory
            if type(u) is _ZeroBucket:
                owners.add(u.region)
            else:                           # held weakly: the caller's to free
                i = u.indices[0]
                x, kept[i] = shards[i], None
                alone.append((i, weakref.ref(x)))
                owners.update((id(x), id(x.base)))
        owners.discard(id(None))
        self._fresh = (tuple(kept), tuple(alone), owners)
        return shards

    def allgather(self, shards: Sequence[ArrayIn], out: Sequence[ArrayIn]) -> list:
        """The inverse: rank r holds block r of each array of *out* (the
        full arrays, written in place on every rank). Returns out.

        A shard may be its own array's block (in place) or lie elsewhere in
        that array, but not in another array of *out* (a ValueError).
        """
        self.comm._live()                   # freed or broken: its error, no message
        out, shards = list(out), list(shards)
        if len(out) != len(shards):
            raise ValueError(f"{len(shards)} shards for {len(out)} arrays")
        units, inline = self._zero_units("allgather", out, None, None)
        parts = self._shard_parts(units, shards, out)
        if inline and self.comm._progress.in_turn():
            for u, part in zip(units, parts):     # Note [Inline buckets]
                u.allgather_now(part)
        else:
            self._by_turns([u.allgather_step(part) for u, part in zip(units, parts)],
                           "fused allgather")
        return out

    def _shard_parts(self, units: list, shards: list, out: list) -> list:
        """The shards of each unit, checked against its members' blocks
        (shape and dtype) and against the other arrays of *out*; raises
        before any message. The same shards (objects, shapes, dtypes,
        strides) as the last allgather with these units give the same lists
        back."""
        last = self._zero_shards
        if last is not None and last[0] is units and len(last[1]) == len(shards):
            for a, (b, shape, dtype, strides) in zip(shards, last[1]):
                if a is not b or a.shape != shape or a.dtype is not dtype or a.strides != strides:
                    break
            else:
                return last[2]
        mine = [s if type(s) is np.ndarray else _message.as_array(s, f"shards[{i}]")
                for i, s in enumerate(shards)]
        for u in units:
            for i, (lo, hi, shape) in zip(u.indices, u.own):
                if mine[i].shape != (shape or (hi - lo,)):
                    raise ValueError(f"shard {i} has shape {mine[i].shape}, "
                                     f"expected {shape or (hi - lo,)}")
                if mine[i].dtype != u.dtype:
                    raise TypeError(f"shard {i} has dtype {mine[i].dtype}, expected {u.dtype}")
        if not self._only_fresh(units, shards, out):
            # Note [Shards in another array]
            n = len(mine)
            outs = [o if type(o) is np.ndarray else _message.as_array(o, f"out[{i}]")
                    for i, o in enumerate(out)]
            pair = first_overlap(outs + mine, np.shares_memory,
                                 lambda i, j: j < n or i >= n or j - n == i)
            if pair is not None:
                i, j = pair[0], pair[1] - n
                raise ValueError(f"shards[{j}] shares memory with out[{i}], which the allgather "
                                 f"writes: a shard may lie only in its own array (copy it first)")
        parts = [[mine[i] for i in u.indices] for u in units]
        if all(type(s) is np.ndarray for s in shards):
            self._zero_shards = (units, [(a, a.shape, a.dtype, a.strides) for a in shards], parts)
        return parts

    def _only_fresh(self, units: list, shards: list, out: list) -> bool:
        """Whether *shards* are those the last reduce_scatter returned and
        no array of *out* (the arrays of *units*) is a numpy view of their
        memory (Note [Shards in another array])."""
        fresh, alone, owners = self._fresh
        if len(fresh) != len(shards):
            return False
        if alone:
            shards = list(shards)
            for i, ref in alone:
                if ref() is not shards[i]:
                    return False
                shards[i] = None
        if not all(map(operator.is_, shards, fresh)):
            return False
        kept, ids = self._out_ids
        if kept is not units:
            if set(map(type, out)) != {np.ndarray}:
                return False
            ids = frozenset(map(id, out)) | frozenset(map(id, map(_BASE, out)))
            self._out_ids = (units, ids)
        return ids.isdisjoint(owners)

    # Note [Shards in another array]
    # ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
    # A fused allgather's units write their arrays of out whole, one after
    # another, and a later unit may still have its shards to read. A shard
    # lying in another array of out was read after that array had been
    # gathered over it: the other rank's block where its own values had
    # been (p = 2, strategy "each"). So a shard may share memory with its
    # own array only (its block: in place), and anything else is refused
    # before any message. The check (first_overlap over out and shards) costs
    # about 0.35 us an array, 30% of a fused reduce_scatter and allgather
    # of 64 arrays of 256 B, paid on every call of the ZeRO loop, whose
    # shards are new each step. Those shards, the ones reduce_scatter just
    # returned, lie in buffers it made: an array of out can reach them
    # only as a view of a shard or of its buffer, and numpy sets a view's
    # base to the array that owns the memory (or to the view's source when
    # that owner is no ndarray: a shard over huge pages). So they are
    # checked by identity instead: the shards against those returned, and
    # what owns their memory (a bucket's region, a shard sent alone and its
    # base) against the arrays of out and their bases, kept while out is.
    # A shard sent alone is a new array of reduce_scatter's, the caller's to
    # keep or drop: it is held by a weak reference, so that the last step's
    # shards of the large arrays do not live on into the next step.

    def _zero_units(self, kind: str, arrays, fusion, split_indices) -> tuple:
        """How a fused reduce_scatter or allgather of *arrays* goes out: per
        bucket, a _ZeroBucket of its packed members, if any, then a
        _ZeroAlone per member sent on its own (zero_ways); and whether they
        all run on the caller's thread (no bucket after the first packs
        more than INLINE_PACK_BYTES, _by_turns). Raises before any message.
        The same arrays as the last call of *kind* (the same objects,
        shapes and dtypes) reuse them, and arrays of the same shapes and
        dtypes reuse their buckets and ways."""
        try:
            how = NO_HOW if fusion is None and split_indices is None else (
                _frozen(fusion), _frozen(split_indices))
        except TypeError:
            how = None                      # assign_buckets names the problem
        last = self._zero.get(kind)
        if last is not None and how is not None and last[1] == how and _kept(arrays, last[0]):
            return last[2:]
        arrays = list(arrays)
        name = "arrays" if kind == "reduce_scatter" else "out"
        for i, a in enumerate(arrays):
            api._rows(np.shape(a), f"{name}[{i}] in {kind}")
        views = self._check(arrays, kind != "reduce_scatter", name)
        key = (kind, how, tuple((a.shape, a.dtype.str) for a in views))
        ways = self._layouts.get(key) if how is not None else None
        if ways is None:
            buckets = assign_buckets([a.nbytes for a in views], [a.dtype for a in views],
                                     self.bucket_bytes, fusion, split_indices)
            ways = [(bucket, self.zero_ways(kind, [views[i] for i in bucket]))
                    for bucket in buckets]
            if how is not None:
                self._layouts[key] = ways
                _bound(self._layouts)
        made: list = []
        for slot, (bucket, alone) in enumerate(ways):
            packed = [i for k, i in enumerate(bucket) if k not in alone]
            if packed:
                made.append(_ZeroBucket(self, kind, slot, packed, [views[i] for i in packed]))
            made += [_ZeroAlone(self, bucket[k], views[bucket[k]]) for k in alone]
        inline = all(u.nbytes <= INLINE_PACK_BYTES for u in made[1:])
        if how is not None and all(type(a) is np.ndarray for a in arrays):
            self._zero[kind] = ([(a, a.shape, a.dtype) for a in arrays], how, made, inline)
        return made, inline

    def zero_ways(self, kind: str, members: list) -> tuple:
        """The members of one bucket of a fused reduce_scatter or allgather
        (*kind*) that go on their own, by position: those the model rates
        cheaper alone (their own call and collective) than their share of
        the packed bucket (its call, collective and copies: reduce_scatter
        packs every byte once and the result lands where it stays;
        allgather packs this rank's block and unpacks every byte), provided
        two members that hold data stay packed; every member where that is
        cheaper still ("each"), none where packing them all is ("pack"),
        as an allreduce's bucket chooses its way (costs). Depends only on
        what every rank shares. ``strategy="pack"`` or ``"each"`` fixes it."""
        everyone = tuple(range(len(members)))
        if self.strategy == "pack" and len(members) > 1:
            return ()
        if self.strategy == "each" or len(members) == 1:
            return everyone
        c, p = self.comm, self.comm.size
        dtype = dtype_of(members[0].dtype)
        widen = 1 if kind == "allgather" else (
            api._work_dtype(dtype, self.accumulate).itemsize // dtype.itemsize)
        sizes = [a.nbytes for a in members]
        n = sum(sizes)
        params = c.settings.params or tuning.DEFAULT_PARAMS
        call = params.get("call_alpha", tuning.CALL_ALPHA)
        # PACK_BETA at every size, unlike an allreduce's bucket (Note
        # [Copies in the caches]): the cached cost would pack members of
        # 256 KiB, where packed reduce-scatters and allgathers took
        # 0.82-1.07x one call per array in the host's fast mode and an
        # allgather 3.3-3.5x in its slow one (bench/NOTES.md, "Copies in
        # the caches").
        copy = params.get("pack_beta", tuning.PACK_BETA) * (1 if kind == "reduce_scatter" else 1 + 1 / p)

        def collective(k, footprint=0):
            # n of reduce_scatter and allgather is one rank's block
            block = -(-k * widen // p)
            algorithm, _ = tuning.best(kind, block, p, c.settings, dtype.name)
            return tuning.modelled_time(kind, algorithm, block, p, params, dtype.name,
                                        footprint=-(-footprint * widen // p))

        def packed(k):
            return call + collective(k) + k * copy
        seconds = packed(n)
        singles = [call + collective(k, footprint=n) for k in sizes]
        costs = {(): seconds, everyone: sum(singles)}
        per_byte = seconds / n if n else 0.0
        go = tuple(j for j, (k, t) in enumerate(zip(sizes, singles)) if t < k * per_byte)
        if go and sum(1 for j, k in enumerate(sizes) if k and j not in go) > 1:
            costs[go] = packed(n - sum(sizes[j] for j in go)) + sum(singles[j] for j in go)
        return min(costs, key=costs.__getitem__)

    def _by_turns(self, steps: list, name: str) -> None:
        """Run a blocking fused call's buckets, (pack, send, bytes packed)
        each, in order. A bucket is queued on the progress thread when the
        next one packs more than INLINE_PACK_BYTES, so that the packing
        happens while it is on the wire; the others run on this thread in
        their turn (Note [Inline buckets]: two thread hand-overs cost more
        than a small pack)."""
        c, handles, last = self.comm, [], len(steps) - 1
        for k, (pack, send, _) in enumerate(steps):
            pack()
            if k < last and steps[k + 1][2] > INLINE_PACK_BYTES:
                handles.append(c._progress_call(send, name))
            else:
                c._progress.call(send, name, False)
        for h in handles:
            h.wait()


# (fusion, split_indices) when neither is given.
NO_HOW = (None, None)


# Signatures of arrays remembered (agreed layouts, autotune results): the
# oldest is forgotten first, at the same call on every rank.
REMEMBERED = 64


# A bucket after the first that packs at most this many bytes is packed
# after the bucket before it is back (Note [Inline buckets]).
INLINE_PACK_BYTES = 256 << 10


class _Inline:
    """Note [Inline buckets]: a blocking allreduce of small arrays makes
    the same calls each time the same arrays come back, and going through
    _launch, a Handle per bucket, the progress queue and a FusedHandle
    cost about 19 µs a call: 4 arrays of 8 B fused took 23 µs against
    16 µs for their own 4 allreduces (p = 2, MPICH; DESIGN.md: fusion
    must never be slower than not fusing). So the second call with the
    same arrays (_planned's cache hit) keeps those calls, and later calls
    with the same arrays, shapes, dtypes and fusion arguments, writeable,
    with nothing queued on the communicator, make them directly on the
    caller's thread: the same packs, allreduces (the public call on the
    flat buffer, so its lane) and unpacks, in the same order, so the same
    messages and bits. _allreduce queues bucket k on the progress thread
    when bucket k+1 packs, to pack while k is on the wire; a pack of up
    to INLINE_PACK_BYTES (with its unpack, 11 µs in the caches and 36 from
    memory: Note [Copies in the caches] in tuning.py) costs about what the
    two thread hand-overs would, so where every later packing bucket is
    that small all of them run here, and otherwise none does."""

    __slots__ = ("rows", "how", "steps", "progress")
    rows: tuple                         # (array, shape, dtype) of each array
    how: tuple                          # (fusion, split_indices), frozen
    steps: tuple                        # the calls, in order
    progress: Any                       # the communicator's progress queue

    @classmethod
    def make(cls, fm: "FusionManager", last, planned: "_Planned") -> "_Inline | None":
        """The calls of *planned* (the arrays of *last*, _planned's cache),
        or None where a later bucket packs too much to wait for the one
        before it."""
        views, buckets, ways, layouts = planned.views, planned.buckets, planned.ways, planned.layouts
        if any(way.packs and sum(views[i].nbytes for i in bucket) > INLINE_PACK_BYTES
               for bucket, way in zip(buckets[1:], ways[1:])):
            return None
        self = cls()
        calls = [fm._calls(views, bucket, slot, way, layout)
                 for slot, (bucket, way, layout) in enumerate(zip(buckets, ways, layouts))]
        self.steps = tuple(call for pair in calls for call in pair if call is not None)
        self.rows = tuple(last[0])      # (array, shape, dtype)
        self.how = last[1]
        self.progress = fm.comm._progress
        return self

    def ran(self, arrays, fusion, split_indices) -> bool:
        """Make the calls, if *arrays* (and the fusion arguments) are the
        ones they were made for, as _planned's cache decides, all
        writeable, and nothing is queued (Note [Issue order])."""
        if not self.progress.in_turn() or not _kept(arrays, self.rows):
            return False
        if (fusion is not None or split_indices is not None or self.how != (None, None)) \
                and not self._same_how(fusion, split_indices):
            return False
        for step in self.steps:
            step()
        return True

    def _same_how(self, fusion, split_indices) -> bool:
        try:
            return (_frozen(fusion), _frozen(split_indices)) == self.how
        except TypeError:
            return False


class Way(NamedTuple):
    """How one bucket goes out: its strategy, the algorithm of its one
    allreduce (None for "each": every member's own "auto") and, for
    "split", the positions in the bucket of the members sent alone."""
    strategy: str
    algorithm: str | None
    alone: tuple = ()

    @property
    def packs(self) -> bool:
        return self.strategy in ("pack", "split")

    def parts(self, items: list) -> tuple:
        """A bucket's *items* (members or their indices) as (those packed,
        those sent alone): all packed, but for "split"."""
        if not self.alone:
            return items, []
        alone = set(self.alone)
        return ([x for j, x in enumerate(items) if j not in alone],
                [items[j] for j in self.alone])


class Joins(tuple):
    """A bucket's agreed layout (FusionManager._agree): one flag per
    non-empty member after the first, True where it follows the one before
    in memory on every rank; *small*: the bucket's bytes on small pages on
    some rank."""

    small: int

    def __new__(cls, joins, small: int = 0):
        self = super().__new__(cls, joins)
        self.small = small
        return self


def _on_huge_pages(a: np.ndarray) -> bool:
    """Whether most of *a*'s bytes lie on huge pages; True where the kernel
    cannot tell (the model then prices pages as it did before)."""
    huge = huge_page_bytes(a) if a.flags.c_contiguous else None
    return huge is None or 2 * huge >= a.nbytes


class _Planned(NamedTuple):
    """How one list of arrays goes out: their numpy views, buckets, each
    bucket's Way and agreed layout, and the signature (fusion, split
    indices, shapes and dtypes) every rank shares."""
    views: list
    buckets: list
    ways: list
    layouts: list
    key: tuple


def _kept(arrays, rows) -> bool:
    """Whether *arrays* (a list) are the ones *rows* ((array, shape, dtype)
    each) were kept for: the same objects, shapes and dtypes, writeable."""
    if type(arrays) is not list or len(arrays) != len(rows):
        return False
    for a, (b, shape, dtype) in zip(arrays, rows):
        if a is not b or a.shape != shape or a.dtype is not dtype or not a.flags.writeable:
            return False
    return True


def _bound(remembered) -> None:
    while len(remembered) > REMEMBERED:
        remembered.popitem(last=False)


def _cut(buf, members, layout) -> list:
    """Byte views of a packed bucket cut where the agreed *layout* cuts the
    members (the pieces another rank's arrays make): the members' places in
    the buffer, joined as the layout says."""
    places, at = [], 0
    for a in members:
        places.append(buf[at:at + a.nbytes])
        at += a.nbytes
    views = joined_views(places, layout)
    assert views is not None                # places one after another join as agreed
    return views


def _frozen(values):
    """A list argument (fusion ids, split indices) as a comparable tuple of
    ints; TypeError for anything else. (A tuple of floats would compare
    equal to the last call's ints, and skip assign_buckets' checks: Note
    [Equal keys] in api.py.)"""
    if values is None:
        return None
    frozen = tuple(values)
    if all(type(v) is int for v in frozen):
        return frozen
    return tuple(operator.index(v) for v in frozen)


class _ZeroBucket:
    """One bucket of a fused reduce_scatter or allgather (the ZeRO pattern),
    laid out by rank: region j of its buffer holds block j
    (np.array_split along axis 0) of every member, in member order, so that
    one reduce-scatter (or allgather) with per-rank byte counts serves
    them all. Made for one list of arrays and kept while it comes back.

        counts[j]      bytes of region j
        offsets        where this rank's block of each member starts
        own            (start, stop, shape) of this rank's block of each
                       member in its region, in elements (shape None: 1-d)
        pack()         reduce_scatter: every member's blocks into the buffer
        allgather()    the buffer's allgather, then every block unpacked
                       into the members
    """

    __slots__ = ("indices", "dtype", "counts", "offsets", "nbytes", "elements", "own", "buf",
                 "pack", "comm", "plan", "unpack", "flat", "mine", "rows", "shards", "region")

    def __init__(self, fm: "FusionManager", kind: str, slot: int, indices: list, members: list):
        c = fm.comm
        p, r = c.size, c.rank
        self.indices, self.dtype, self.comm = tuple(indices), members[0].dtype, c
        item = self.dtype.itemsize
        blocks, places, counts, at = [], [], [], 0
        for j in range(p):
            start = at
            for a in members:
                lo, n = block(a.shape[0], p, j)
                blocks.append(a[lo:lo + n])
                places.append(at)
                at += blocks[-1].nbytes
            counts.append(at - start)
        self.counts, self.nbytes = tuple(counts), at
        self.offsets = places[r * len(members):(r + 1) * len(members)]
        mine = blocks[r * len(members):(r + 1) * len(members)]
        start = sum(counts[:r])
        self.own = tuple(((at - start) // item, (at - start) // item + b.size,
                          b.shape if b.ndim > 1 else None) for at, b in zip(self.offsets, mine))
        self.elements = counts[r] // item
        self.buf = fm._buffer((kind, self.dtype.str, self.nbytes, slot), self.nbytes)
        plan = PackPlan(blocks, places)
        self.flat = self.buf.view(self.dtype)
        if kind == "reduce_scatter":
            self.pack = functools.partial(plan.pack, self.buf)
            self.plan = api._fused_reduce_scatter_plan(c, self.counts, dtype_of(self.dtype),
                                                       fm.op, fm.accumulate)
        else:
            self.unpack = functools.partial(plan.unpack, self.buf)
            self.rows = tuple(k // item for k in counts)
            self.mine = self.flat[start // item:start // item + self.rows[r]]
            self.shards: tuple | None = None    # (the part last packed, its PackPlan)

    def pack_own(self, part: list) -> None:
        """allgather: this rank's shards (*part*, a list from _shard_parts,
        the same list while the same shards come back) into its region."""
        last = self.shards
        if last is None or last[0] is not part:
            last = self.shards = (part, PackPlan(part, self.offsets))
        last[1].pack(self.buf)

    def reduce_scatter_step(self, shards: list) -> tuple:
        """(pack, send, bytes packed) of this bucket's part of a
        reduce_scatter; the members' shards, views of the region the
        reduction will land in, go into *shards*."""
        region = self._region(shards)
        return self.pack, functools.partial(self.reduce_scatter, region), self.nbytes

    def reduce_scatter_now(self, shards: list) -> None:
        region = self._region(shards)
        self.pack()
        self.reduce_scatter(region)

    def _region(self, shards: list) -> np.ndarray:
        region = np.empty(self.elements, self.dtype)
        self.region = id(region)            # (FusionManager._only_fresh)
        for i, (lo, hi, shape) in zip(self.indices, self.own):
            shards[i] = region[lo:hi] if shape is None else region[lo:hi].reshape(shape)
        return region

    def allgather_step(self, part: list) -> tuple:
        return functools.partial(self.pack_own, part), self.allgather, self.nbytes

    def allgather_now(self, part: list) -> None:
        self.pack_own(part)
        self.allgather()

    def reduce_scatter(self, region: np.ndarray) -> None:
        api._fused_reduce_scatter(self.comm, self.plan, self.flat, region)

    def allgather(self) -> None:
        # in place (x its own block of out), so on the allgather's lane
        self.comm.allgather(self.mine, sizes=self.rows, out=self.flat)
        self.unpack()


class _ZeroAlone:
    """A member of a fused reduce_scatter or allgather that goes on its own
    (FusionManager.zero_ways): the public collective on the array where it
    lies, the allgather with the array as out (in place where the shard is
    its own block), no copy."""

    __slots__ = ("indices", "own", "dtype", "array", "fm", "rows")
    nbytes = 0                              # packs nothing

    def __init__(self, fm: "FusionManager", index: int, array: np.ndarray):
        p, r = fm.comm.size, fm.comm.rank
        self.indices, self.dtype, self.array, self.fm = (index,), array.dtype, array, fm
        self.rows = tuple(block(array.shape[0], p, j)[1] for j in range(p))
        shape = (self.rows[r], *array.shape[1:])
        self.own = ((0, math.prod(shape), shape if len(shape) > 1 else None),)

    def reduce_scatter_step(self, shards: list) -> tuple:
        return _nothing, functools.partial(self.reduce_scatter_now, shards), 0

    def reduce_scatter_now(self, shards: list) -> None:
        fm = self.fm
        shards[self.indices[0]] = fm.comm.reduce_scatter(self.array, fm.op,
                                                         accumulate=fm.accumulate)

    def allgather_step(self, part: list) -> tuple:
        return _nothing, functools.partial(self.allgather_now, part), 0

    def allgather_now(self, part: list) -> None:
        self.fm.comm.allgather(part[0], sizes=self.rows, out=self.array)


def _nothing() -> None:
    pass


class FusedHandle:
    """The buckets of one fused call: ``wait()`` returns the arrays once every
    bucket is back in place; ``done()`` whether all have finished."""

    def __init__(self, handles: list, arrays: list):
        self._handles, self._arrays = handles, arrays

    def done(self) -> bool:
        return all(h.done() for h in self._handles)

    def wait(self, timeout=None) -> list:
        """The arrays, once every bucket is reduced; TimeoutError if
        *timeout* (seconds, or a timedelta) passes first, for all of them."""
        seconds = as_seconds(timeout)
        deadline = None if seconds is None else time.monotonic() + seconds
        for h in self._handles:
            h.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
        return self._arrays


__all__ = ["FusionManager", "FusedHandle", "Handle"]
