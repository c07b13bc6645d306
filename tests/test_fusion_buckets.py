"""assign_buckets: the pure bucket assignment, without MPI."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from pycoll.fusion import assign_buckets

F32, F16 = np.dtype(np.float32), np.dtype(np.float16)


def test_fusion_ids_group_equal_ids_and_zero_stands_alone():
    got = assign_buckets([4] * 6, [F32] * 6, fusion=[1, 2, 1, 0, 2, 0])
    assert got == [[0, 2], [1, 4], [3], [5]]


def test_fusion_ids_ignore_the_cap():
    assert assign_buckets([100, 100], [F32, F32], bucket_bytes=10, fusion=[3, 3]) == [[0, 1]]


def test_split_indices_cut_the_list():
    assert assign_buckets([4] * 6, [F32] * 6, split_indices=[2, 4]) == [[0, 1], [2, 3], [4, 5]]
    assert assign_buckets([4] * 3, [F32] * 3, split_indices=[]) == [[0, 1, 2]]


def test_split_group_with_two_dtypes_becomes_two_buckets():
    got = assign_buckets([4] * 4, [F32, F16, F32, F32], split_indices=[3])
    assert got == [[0, 2], [1], [3]]


def test_cap_fills_consecutive_arrays():
    assert assign_buckets([40, 30, 50, 10], [F32] * 4, bucket_bytes=100) == [[0, 1], [2, 3]]
    assert assign_buckets([40, 60, 1], [F32] * 3, bucket_bytes=100) == [[0, 1], [2]]


def test_the_first_array_counts_against_the_cap():
    # 150 > cap: alone; then 150 + 10 > cap: the next starts a new bucket
    assert assign_buckets([150, 10, 10], [F32] * 3, bucket_bytes=100) == [[0], [1, 2]]


def test_one_huge_array_over_the_cap_travels_alone():
    assert assign_buckets([10, 1000, 10], [F32] * 3, bucket_bytes=100) == [[0], [1], [2]]


def test_mixed_dtypes_fill_separate_buckets_in_order_of_first_index():
    got = assign_buckets([40, 40, 40, 40], [F32, F16, F32, F16], bucket_bytes=100)
    assert got == [[0, 2], [1, 3]]


def test_empty_arrays():
    assert assign_buckets([0, 0, 10], [F32] * 3, bucket_bytes=10) == [[0, 1, 2]]
    assert assign_buckets([], [], bucket_bytes=10) == []
    assert assign_buckets([0], [F32], fusion=[0]) == [[0]]


@pytest.mark.parametrize("kwargs,error,match", [
    (dict(fusion=[1, 1, 2]), ValueError, "fusion has 3 ids for 2 arrays"),
    (dict(fusion=[1, -1]), ValueError, "fusion ids must be >= 0"),
    (dict(fusion=[1, "a"]), TypeError, "fusion must be a sequence of ints"),
    (dict(split_indices=[1, 1]), ValueError, "split_indices must increase"),
    (dict(split_indices=[0]), ValueError, "split_indices must increase"),
    (dict(split_indices=[2]), ValueError, "split index 2 is out of range for 2 arrays"),
    (dict(fusion=[1, 1], split_indices=[1]), ValueError, "not both"),
    (dict(bucket_bytes=0), ValueError, "bucket_bytes must be at least 1"),
    (dict(bucket_bytes=0.0), ValueError, "bucket_bytes must be at least 1, got 0.0"),
    (dict(bucket_bytes=1.5), ValueError, "bucket_bytes must be a whole number of bytes, got 1.5"),
    (dict(bucket_bytes=float("nan")), ValueError, "bucket_bytes must be a whole number"),
    (dict(bucket_bytes="64"), TypeError, "bucket_bytes must be a number of bytes, got '64'"),
    (dict(bucket_bytes=None), TypeError, "bucket_bytes must be a number of bytes, got None"),
])
def test_bad_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        assign_buckets([4, 4], [F32, F32], **kwargs)


def test_a_cap_may_be_a_float_holding_a_whole_number():
    sizes, pairs = [10_000_000] * 6, [[0, 1], [2, 3], [4, 5]]
    assert assign_buckets(sizes, [F32] * 6, bucket_bytes=25e6) == pairs
    assert assign_buckets(sizes, [F32] * 6, bucket_bytes=np.float32(2e7)) == pairs


def test_mixed_dtypes_under_one_id_are_an_error():
    with pytest.raises(TypeError, match=r"fusion id 7 holds arrays of dtypes float32 \(array 0\) "
                                        r"and float16 \(array 2\)"):
        assign_buckets([4, 4, 4], [F32, F32, F16], fusion=[7, 0, 7])


def test_bad_sizes():
    with pytest.raises(ValueError, match="2 dtypes for 3 arrays"):
        assign_buckets([1, 2, 3], [F32, F32])
    with pytest.raises(ValueError, match="sizes must be >= 0"):
        assign_buckets([1, -2], [F32, F32])


ARRAYS = st.lists(st.tuples(st.integers(0, 300), st.sampled_from(["f4", "f2", "i8"])), max_size=40)


@settings(max_examples=300, deadline=None)
@given(arrays=ARRAYS, cap=st.integers(1, 600), data=st.data())
def test_properties(arrays, cap, data):
    sizes = [s for s, _ in arrays]
    dtypes = [d for _, d in arrays]
    mode = data.draw(st.sampled_from(["cap", "fusion", "split"]))
    kwargs = {"bucket_bytes": cap}
    if mode == "fusion":
        ids = data.draw(st.lists(st.integers(0, 4), min_size=len(arrays), max_size=len(arrays)))
        ids = [i if i == 0 else i * 10 + ["f4", "f2", "i8"].index(d) for i, d in zip(ids, dtypes)]
        kwargs = {"fusion": ids}
    elif mode == "split" and len(arrays) > 1:
        cuts = sorted(data.draw(st.sets(st.integers(1, len(arrays) - 1), max_size=4)))
        kwargs = {"split_indices": cuts}
    buckets = assign_buckets(sizes, dtypes, **kwargs)
    # every array once, one dtype per bucket, order of first index, order inside
    assert sorted(i for b in buckets for i in b) == list(range(len(arrays)))
    assert all(len({dtypes[i] for i in b}) == 1 for b in buckets)
    assert [b[0] for b in buckets] == sorted(b[0] for b in buckets)
    assert all(b == sorted(b) for b in buckets)
    if mode == "cap":
        assert all(len(b) == 1 or sum(sizes[i] for i in b) <= cap for b in buckets)
    # Note [Bucket determinism]: the same arguments, the same buckets
    assert assign_buckets(list(sizes), list(dtypes), **kwargs) == buckets
