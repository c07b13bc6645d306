"""Data-parallel training helpers for numpy models.

Two ways to train one model on P ranks, each rank holding 1/P of every
batch (``shard``):

DataParallel, the seeds' data parallelism with ``gradients_mean``: every
rank keeps all parameters and the optimizer state, and averages the
gradients (a FusionManager) before the same update everywhere.

    dp = DataParallel(params)                 # rank 0's parameters on every rank
    for x, y in batches:
        grads = backward(params, dp.shard(x), dp.shard(y))
        dp.sync(grads)                         # averaged in place
        for p, g in zip(params, grads):
            p -= lr * g                        # the same update on every rank

ShardedOptimizer, the seeds' parallel optimizer (``enable_parallel_optimizer``,
ZeRO): rank r owns block r (``np.array_split`` along axis 0) of every
parameter. Gradients are reduce-scattered, so each rank receives only the
averaged gradient of its blocks; it updates those blocks with an optimizer
whose state exists only for them; the parameters are then allgathered.
Bytes on the wire equal one allreduce; optimizer memory is 1/P.

    opt = ShardedOptimizer(params, sgd(lr=0.1, momentum=0.9))
    for x, y in batches:
        grads = backward(params, opt.shard(x), opt.shard(y))
        opt.step(grads)                        # params updated in place on every rank

Averaging assumes the ranks' shards of a batch have equal sizes (then the
mean of the ranks' mean gradients is the full batch's); pass
``mean=False`` to sum instead, for losses already divided by the global
batch size, which is exact for any split.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from pycoll import _message, api
from pycoll._comm import flag
from pycoll._dtypes import Op
from pycoll._kernels.copy import block, first_overlap
from pycoll.fusion.manager import FusionManager

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pycoll._typing import Accumulate, ArrayIn, CommArg, Update

__all__ = ["DataParallel", "ShardedOptimizer", "sgd"]


class DataParallel:
    """Replicated parameters, gradients averaged over the ranks.

    Args:
        params: the parameters (arrays, updated in place), broadcast from
            *root* so every rank starts from the same values; or None.
        comm: a Communicator, an mpi4py communicator, or None.
        mean: average the gradients (True) or sum them.
        bucket_bytes, accumulate: as FusionManager's (accumulate="float32"
            is the seeds' gradient_fp32_sync).
    """

    def __init__(self, params: Sequence[ArrayIn] | None = None, comm: CommArg = None,
                 mean: bool = True, bucket_bytes: int = 25 << 20, accumulate: Accumulate = None,
                 root: int = 0):
        self.comm = api._comm_of(comm)
        self.fusion = FusionManager(_mean_op(mean), self.comm, bucket_bytes,
                                    accumulate=accumulate)
        if params is not None:
            for p in params:
                api.broadcast(p, root, self.comm)

    def shard(self, batch: ArrayIn, axis: int = 0):
        """This rank's part of a global batch: block rank of
        ``np.array_split(batch, size, axis)``."""
        return _block(batch, self.comm, axis)

    def sync(self, grads: Sequence[ArrayIn]) -> list:
        """Average (or sum) the gradients over the ranks, in place; returns them.

        Example (2 ranks)::

            grads = [np.full(2, rank + 1.0)]   # rank 0: [[1, 1]]   rank 1: [[2, 2]]
            dp.sync(grads)                     # both:   [[1.5, 1.5]]   (mean=False: [[3, 3]])
        """
        return self.fusion.allreduce(grads)


class ShardedOptimizer:
    """ZeRO-style sharded update (see the module docstring).

    Args:
        params: the parameters (numpy arrays, torch tensors or other
            array-likes), each writable with at least one dimension, no two
            sharing memory (a tied parameter once, its gradients summed);
            updated in place on every rank.
        update: ``update(params, grads, state)``, called with lists of this
            rank's blocks of the parameters (numpy views: update them in place)
            and of the averaged gradients, and a dict that persists between
            steps for the optimizer's state of those blocks (``sgd`` makes one).
        comm, mean, bucket_bytes: as DataParallel's.
    """

    def __init__(self, params: Sequence[ArrayIn], update: Update, comm: CommArg = None,
                 mean: bool = True, bucket_bytes: int = 25 << 20, root: int = 0):
        self.comm = api._comm_of(comm)
        self.params: list = list(params)
        views = _checked_params(self.params)
        self.fusion = FusionManager(_mean_op(mean), self.comm, bucket_bytes)
        for param in self.params:
            api.broadcast(param, root, self.comm)
        self.update = update
        self.state: dict = {}
        p, r = self.comm.size, self.comm.rank
        # numpy views, whatever the parameters are (torch tensors): update's
        # "p -= lr * g" with a tensor's block and a numpy gradient rebound
        # p to a new numpy array and left the parameter as it was.
        self._blocks = [_axis0_block(a, p, r) for a in views]

    def shard(self, batch: ArrayIn, axis: int = 0):
        """This rank's part of a global batch (as DataParallel.shard)."""
        return _block(batch, self.comm, axis)

    def step(self, grads: Sequence[ArrayIn]) -> list:
        """Reduce-scatter *grads*, update this rank's blocks, allgather the
        parameters. Returns the parameters.

        Example (2 ranks, update = sgd(lr=1.0))::

            params = [np.zeros(4)]               # both: [[0, 0, 0, 0]]
            grads = [np.full(4, rank + 1.0)]     # rank 0: [[1, 1, 1, 1]]  rank 1: [[2, 2, 2, 2]]
            opt.step(grads)                      # rank 0 updates params[0][0:2], rank 1 [2:4]
            params                               # both: [[-1.5, -1.5, -1.5, -1.5]]
        """
        given: list = list(grads)
        if len(given) != len(self.params):
            raise ValueError(f"{len(given)} gradients for {len(self.params)} parameters")
        for i, (g, p) in enumerate(zip(given, self.params)):
            if np.shape(g) != np.shape(p):
                raise ValueError(f"grads[{i}] has shape {np.shape(g)}, params[{i}] {np.shape(p)}")
        shards = self.fusion.reduce_scatter(given)
        self.update(self._blocks, shards, self.state)
        self.fusion.allgather(self._blocks, self.params)
        return self.params


def _mean_op(mean) -> Op:
    """The gradients' reduction: AVG for mean=True, SUM for False."""
    return Op.AVG if flag(mean, "mean") else Op.SUM


def _checked_params(params: list) -> list:
    """The numpy views of ShardedOptimizer's parameters, checked on every
    rank before the first broadcast, so that a bad list fails the
    constructor everywhere rather than a step halfway, after its blocks
    were updated and before the allgather that would make the ranks agree.
    A parameter twice (tied weights) or two overlapping views are refused
    as FusionManager.allgather refuses them (Note [Arrays that share
    memory] in pycoll/fusion/manager.py)."""
    arrays = []
    for i, p in enumerate(params):
        if np.ndim(p) == 0:
            raise ValueError(f"params[{i}] is 0-d: a sharded parameter needs an axis to split")
        a = _message.as_array(p, f"params[{i}]")
        _message.check_writable(a, f"params[{i}]", ": the optimizer updates it in place")
        arrays.append(a)
    pair = first_overlap(arrays, np.shares_memory)
    if pair is not None:
        i, j = pair
        raise ValueError(f"params[{i}] and params[{j}] share memory: pass a tied parameter "
                         f"once, with its gradients summed")
    return arrays


def sgd(lr: float, momentum: float = 0.0) -> Update:
    """An ``update`` for ShardedOptimizer: SGD with momentum, its buffers
    kept for this rank's blocks only (``state["momentum"]``)."""
    def update(params, grads, state):
        if momentum:
            buffers = state.setdefault("momentum", [np.zeros_like(g) for g in grads])
            for p, g, b in zip(params, grads, buffers):
                b *= momentum
                b += g
                p -= lr * b
        else:
            for p, g in zip(params, grads):
                p -= lr * g
    return update


def _axis0_block(a: np.ndarray, p: int, r: int) -> np.ndarray:
    start, length = block(a.shape[0], p, r)
    return a[start:start + length]


def _block(batch, comm, axis: int):
    return np.array_split(np.asarray(batch), comm.size, axis=axis)[comm.rank]
