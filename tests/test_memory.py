"""pycoll.empty: arrays on huge pages from HUGE_FROM bytes (Note [Huge
pages] in pycoll/_memory.py); run without MPI."""
import mmap

import ml_dtypes
import numpy as np
import pytest

import pycoll
from pycoll._memory import HUGE_FROM, HUGE_PAGE


def anon_huge_kib() -> int:
    with open("/proc/self/smaps_rollup") as f:
        for line in f:
            if line.startswith("AnonHugePages:"):
                return int(line.split()[1])
    return 0


@pytest.mark.parametrize("shape, dtype", [
    ((HUGE_FROM // 4,), np.float32), ((3, 1 << 17), ml_dtypes.bfloat16), (1 << 20, np.complex128),
    ((2, 3), np.float64), ((), np.int32), ((0,), np.float16), ((4, 0), np.uint8),
])
def test_empty_is_a_writable_array_of_that_shape_and_dtype(shape, dtype):
    a = pycoll.empty(shape, dtype)
    want = np.empty(shape, dtype)
    assert type(a) is np.ndarray and a.shape == want.shape and a.dtype == want.dtype
    assert a.flags.c_contiguous and a.flags.writeable and a.flags.aligned
    a[...] = 3
    assert np.all(a == 3)
    if a.nbytes >= HUGE_FROM and hasattr(mmap, "MADV_HUGEPAGE"):
        assert a.ctypes.data % HUGE_PAGE == 0          # starts a huge page


def test_object_arrays_are_numpy_arrays_whatever_their_size():
    # numpy cannot view a mapping's bytes as object references: a large
    # object array raised numpy's "Cannot change data-type for array of references"
    for make in (pycoll.empty, pycoll._memory.empty_small_pages):
        a = make((HUGE_FROM,), object)
        assert a.dtype == object and a.shape == (HUGE_FROM,) and a[0] is None


def test_small_arrays_are_numpy_arrays_of_their_own():
    a = pycoll.empty(HUGE_FROM // 8 - 1, np.float64)
    assert a.base is None and a.nbytes < HUGE_FROM


@pytest.mark.parametrize("shape, dtype", [
    ((-1, HUGE_FROM), np.float64), (HUGE_FROM, "no such dtype"), (3.5, np.float64),
    ("abc", np.float64), ((HUGE_FROM, "x"), np.float64), ((1 << 62,), np.float64),
    ((1 << 40, 1 << 40), np.float32),
])
def test_bad_shapes_raise_as_numpy_does(shape, dtype):
    # the same exception and message: a float shape once said "'float'
    # object is not iterable", 2**62 elements raised an OverflowError
    with pytest.raises(Exception) as theirs:
        np.empty(shape, dtype)
    for make in (pycoll.empty, pycoll._memory.empty_small_pages):
        with pytest.raises(type(theirs.value)) as ours:
            make(shape, dtype)
        assert str(ours.value) == str(theirs.value)


def test_shapes_are_any_integers():
    a = pycoll.empty([np.int32(HUGE_FROM // 64), np.int64(16)], np.float32)
    assert a.shape == (HUGE_FROM // 64, 16)
    assert pycoll.empty(np.array([3, 4]), np.int8).shape == (3, 4)
    assert pycoll.empty(np.int64(HUGE_FROM), np.uint8).shape == (HUGE_FROM,)


@pytest.mark.skipif(not hasattr(mmap, "MADV_HUGEPAGE"), reason="no MADV_HUGEPAGE here")
def test_large_arrays_get_huge_pages_where_the_system_gives_them():
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            mode = f.read()
    except OSError:
        pytest.skip("no transparent huge pages")
    if "[never]" in mode:
        pytest.skip("transparent huge pages are off")
    before = anon_huge_kib()
    a = pycoll.empty(4 * HUGE_PAGE, np.uint8)
    a[...] = 1                                          # touch: the pages are made now
    # The kernel may refuse a huge page when memory is fragmented; it
    # gives at least one of four on any machine these tests run on.
    assert anon_huge_kib() - before >= HUGE_PAGE >> 10
