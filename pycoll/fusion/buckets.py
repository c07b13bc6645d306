"""Bucket assignment: which arrays travel together. A pure function.

    assign_buckets(nbytes, dtypes, bucket_bytes=..., fusion=None, split_indices=None)
        -> list of buckets, each a list of array indices

Three ways to group, as in the seeds and the frameworks that followed them:

- ``fusion=[ids]`` (MindSpore's ``fusion`` attribute): arrays with the same
  id > 0 share a bucket; id 0 never fuses (a bucket of its own). Equal ids
  on different dtypes are an error.
- ``split_indices=[20, 35]`` (``all_reduce_fusion_config``): arrays [0, 20)
  form one group, [20, 35) the next, the rest a third. A group holding
  several dtypes splits into one bucket per dtype.
- neither: per dtype, consecutive arrays fill a bucket up to
  ``bucket_bytes`` (Horovod's fusion threshold, DDP's bucket cap). The
  first array of a bucket counts against the cap, so an array over the cap
  travels alone; thresholds are bytes, never elements.

Ids and split indices override the cap, as in the seeds; giving both is an
error. Every bucket holds one dtype; buckets are ordered by their first
array's index, and inside a bucket arrays keep their order.

Note [Bucket determinism]: the result depends only on the arguments (sizes,
dtypes, ids, indices, cap), never on memory addresses or timing, so every
rank that passes the same list gets the same buckets, which the collectives
then run in the same order.
"""
from __future__ import annotations

import numbers
import operator
from collections import OrderedDict


def assign_buckets(nbytes, dtypes, bucket_bytes: int = 64 << 20, fusion=None,
                   split_indices=None) -> list[list[int]]:
    """Group arrays into buckets (see the module docstring).

    Args:
        nbytes: each array's size in bytes.
        dtypes: each array's dtype (anything comparable: numpy dtypes, names).
        bucket_bytes: the cap when neither fusion nor split_indices is given.
        fusion: one id per array (ints >= 0), or None.
        split_indices: increasing indices in (0, len) that cut the list, or None.

    Returns:
        Buckets of array indices, ordered by first index.

    Raises ValueError (wrong lengths, negative ids or sizes, unordered or
    out-of-range indices, both fusion and split_indices, a cap below 1 or
    not a whole number) and TypeError (mixed dtypes under one fusion id;
    ids or indices not ints; a cap that is not a number).
    """
    nbytes = [operator.index(n) for n in nbytes]
    dtypes = list(dtypes)
    count = len(nbytes)
    if len(dtypes) != count:
        raise ValueError(f"{len(dtypes)} dtypes for {count} arrays")
    if any(n < 0 for n in nbytes):
        raise ValueError(f"array sizes must be >= 0, got {min(nbytes)}")
    if fusion is not None and split_indices is not None:
        raise ValueError("give fusion ids or split_indices, not both")
    if fusion is not None:
        return _by_fusion(_ints(fusion, "fusion"), dtypes, count)
    if split_indices is not None:
        return _by_split(_ints(split_indices, "split_indices"), dtypes, count)
    return _by_cap(nbytes, dtypes, byte_cap(bucket_bytes))


def byte_cap(bucket_bytes) -> int:
    """A bucket's byte cap as an int: an int, or a float holding a whole
    number (``25e6``); at least 1.

    Raises TypeError (not a number) and ValueError (a fraction of a byte,
    below 1).
    """
    try:
        cap = operator.index(bucket_bytes)
    except TypeError:
        if not isinstance(bucket_bytes, numbers.Real):
            raise TypeError(f"bucket_bytes must be a number of bytes, "
                            f"got {bucket_bytes!r}") from None
        if not float(bucket_bytes).is_integer():
            raise ValueError(f"bucket_bytes must be a whole number of bytes, "
                             f"got {bucket_bytes!r}") from None
        cap = int(float(bucket_bytes))     # a whole float (an int went above)
    if cap < 1:
        raise ValueError(f"bucket_bytes must be at least 1, got {bucket_bytes!r}")
    return cap


def _ints(values, name: str) -> list[int]:
    try:
        return [operator.index(v) for v in values]
    except TypeError:
        raise TypeError(f"{name} must be a sequence of ints, got {values!r}") from None


def _by_fusion(ids: list[int], dtypes: list, count: int) -> list[list[int]]:
    if len(ids) != count:
        raise ValueError(f"fusion has {len(ids)} ids for {count} arrays")
    if any(i < 0 for i in ids):
        bad = next(i for i in ids if i < 0)
        raise ValueError(f"fusion ids must be >= 0 (0 = never fuse), got {bad}")
    groups: OrderedDict = OrderedDict()       # key -> indices, in order of first index
    for index, (fid, dtype) in enumerate(zip(ids, dtypes)):
        if fid == 0:
            groups[("alone", index)] = [index]
            continue
        members = groups.setdefault(("id", fid), [])
        if members and dtypes[members[0]] != dtype:
            raise TypeError(f"fusion id {fid} holds arrays of dtypes {dtypes[members[0]]} "
                            f"(array {members[0]}) and {dtype} (array {index}); a bucket holds "
                            f"one dtype")
        members.append(index)
    return list(groups.values())


def _by_split(indices: list[int], dtypes: list, count: int) -> list[list[int]]:
    for a, b in zip([0] + indices, indices):
        if not a < b:
            raise ValueError(f"split_indices must increase from above 0, got {indices}")
    if indices and indices[-1] >= count:
        raise ValueError(f"split index {indices[-1]} is out of range for {count} arrays")
    buckets: list = []
    for lo, hi in zip([0] + indices, indices + [count]):
        by_dtype: OrderedDict = OrderedDict()
        for index in range(lo, hi):
            by_dtype.setdefault(dtypes[index], []).append(index)
        buckets += by_dtype.values()
    return sorted(buckets, key=lambda b: b[0])


def _by_cap(nbytes: list[int], dtypes: list, cap: int) -> list[list[int]]:
    open_buckets: dict = {}                   # dtype -> (indices, bytes) being filled
    buckets = []
    for index, (size, dtype) in enumerate(zip(nbytes, dtypes)):
        current = open_buckets.get(dtype)
        if current is not None and current[1] + size <= cap:
            current[0].append(index)
            open_buckets[dtype] = (current[0], current[1] + size)
            continue
        members = [index]
        buckets.append(members)
        open_buckets[dtype] = (members, size)
    return buckets                            # created in order of first index
