"""Fusion: many arrays, few collectives (pycoll.FusionManager).

buckets.py   assign_buckets, the pure function that groups arrays
manager.py   FusionManager, which owns the pack buffers and runs the buckets
"""
import math

import numpy as np

from pycoll._memory import empty
from pycoll.fusion.buckets import assign_buckets


def flat_buffer(shapes, dtype=np.float32) -> tuple:
    """(buffer, arrays): one array per shape, all views of one flat buffer,
    back to back in order.

    Gradients kept this way (as DDP's ``gradient_as_bucket_view`` and
    MindSpore's contiguous gradient memory do) cost a FusionManager no copy
    and no extra message: a bucket of adjacent views is one piece, reduced
    as fast as one allreduce of the buffer. The buffer is zeroed, and on
    huge pages from 256 KiB (pycoll.empty; Note [Huge pages] in
    pycoll/_memory.py).

        >>> buf, grads = flat_buffer([(64, 3, 7, 7), (64,)])
        >>> np.shares_memory(grads[1], buf) and grads[1].shape
        (64,)
    """
    shapes = [tuple(s) if np.ndim(s) else (int(s),) for s in shapes]
    counts = [math.prod(s) for s in shapes]
    buffer = empty(sum(counts), dtype)
    buffer[...] = 0
    arrays, at = [], 0
    for shape, count in zip(shapes, counts):
        arrays.append(buffer[at:at + count].reshape(shape))
        at += count
    return buffer, arrays


__all__ = ["assign_buckets", "flat_buffer"]
