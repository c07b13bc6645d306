"""Seeded test data and numpy oracles, shared by the serial and MPI tests."""
import numpy as np

from pycoll._dtypes import BY_NAME, DType, Op

ALL_DTYPES = list(BY_NAME)
HALF = ("float16", "bfloat16")


def bf16() -> np.dtype:
    """ml_dtypes' bfloat16, imported on first use as pycoll does (Note
    [Importing ml_dtypes]): a launch whose cases have none saves 1.1 s a rank."""
    return BY_NAME["bfloat16"].numpy


def __getattr__(name):
    """BF16 (bf16()) for the serial tests, made on first use."""
    if name == "BF16":
        return bf16()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# Unsigned views of each itemsize, for bitwise comparisons.
BITS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64, 16: np.uint64}


class ArrayInterface:
    """An array-like that offers nothing but __array_interface__."""

    def __init__(self, a):
        self.a = a
        self.__array_interface__ = a.__array_interface__


class DLPackOnly:
    """An array-like that offers nothing but DLPack (as JAX's CPU arrays do)."""

    def __init__(self, a):
        self.a = a

    def __dlpack__(self, **kwargs):
        return self.a.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


def _torch_view(a):
    import torch
    return torch.from_numpy(a)


# The forms a test offers an array in, each over the same memory (None:
# the numpy array itself).
ARRAY_LIKES = {"numpy": None, "memoryview": memoryview, "array_interface": ArrayInterface,
               "dlpack": DLPackOnly, "torch": _torch_view}

# numpy before 2.2.5 imports every DLPack array read-only, so there a
# DLPack-only object can be read but not written (out=, broadcast's x).
DLPACK_WRITES = np.from_dlpack(DLPackOnly(np.zeros(1))).flags.writeable


def writes_through(kind: str) -> bool:
    """Whether pycoll can write into an array offered as *kind* (ARRAY_LIKES)."""
    return kind != "dlpack" or DLPACK_WRITES


def sample(dtype: str, n, rng: np.random.Generator, special: bool = False) -> np.ndarray:
    """n values of *dtype*: the full range for integers, a spread of
    magnitudes for floats; *special* mixes in NaN, +-inf and +-0.0."""
    dt = BY_NAME[dtype]
    shape = (n,) if np.isscalar(n) else tuple(n)
    size = int(np.prod(shape))
    if dt.kind == "b":
        x = rng.integers(0, 2, size).astype(bool)
    elif dt.kind in "iu":
        info = np.iinfo(dt.numpy)
        x = rng.integers(info.min, info.max, size, dtype=dt.numpy, endpoint=True)
    else:
        real = np.float32 if dt.half else dt.numpy
        real = np.finfo(real).dtype if dt.kind == "c" else real
        x = _floats(size, rng, real)
        if dt.kind == "c":
            x = x + 1j * _floats(size, rng, real)
            x = x.astype(dt.numpy)
        else:
            x = x.astype(dt.numpy)
        if special and size:
            x = _specials(x, dt, rng)
    return x.reshape(shape)


def _floats(size, rng, dtype):
    # Values with a spread of magnitudes, small enough that half types keep
    # most of them finite and products of two stay in range.
    return (rng.standard_normal(size) * np.exp2(rng.integers(-6, 6, size))).astype(dtype)


def _specials(x, dt: DType, rng):
    specials = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0], dtype=np.float64)
    pick = rng.random(x.size) < 0.2
    values = specials[rng.integers(0, len(specials), x.size)]
    if dt.kind == "c":
        values = values.astype(np.complex128)
        values.imag = specials[rng.integers(0, len(specials), x.size)]
    x = x.copy()
    x[pick] = values[pick].astype(dt.numpy)
    return x


def bits(x: np.ndarray) -> np.ndarray:
    """The raw bits of x as unsigned integers (complex: two words each)."""
    x = np.ascontiguousarray(x)
    return x.reshape(-1).view(BITS[x.dtype.itemsize]) if x.size else np.zeros(0, np.uint8)


def assert_bitwise_equal(actual, expected, msg=""):
    """Same dtype, shape and bits (NaN payloads and signed zeros included)."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.dtype == expected.dtype, f"{msg}: dtype {actual.dtype} != {expected.dtype}"
    assert actual.shape == expected.shape, f"{msg}: shape {actual.shape} != {expected.shape}"
    a, e = bits(actual), bits(expected)
    if not np.array_equal(a, e):
        bad = np.flatnonzero(a != e)
        raise AssertionError(f"{msg}: {bad.size} of {a.size} elements differ, first at "
                             f"{bad[0]}: {actual.reshape(-1)[bad[0] // (a.size // max(actual.size, 1))]!r} "
                             f"vs {expected.reshape(-1)[bad[0] // (a.size // max(actual.size, 1))]!r}")


def assert_same_values(actual, expected, msg=""):
    """Equal as values: NaN matches NaN (any payload), -0.0 must match -0.0."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.dtype == expected.dtype and actual.shape == expected.shape, msg
    if actual.dtype.kind in "biu":
        np.testing.assert_array_equal(actual, expected, err_msg=msg)
        return
    wide = np.complex128 if actual.dtype.kind == "c" else np.float64
    with np.errstate(invalid="ignore"):      # ml_dtypes warns when it widens a NaN
        actual, expected = actual.astype(wide), expected.astype(wide)
    for part in ((lambda v: v.real), (lambda v: v.imag)) if actual.dtype.kind == "c" else (lambda v: v,):
        a, e = part(actual), part(expected)
        same = (a == e) & (np.signbit(a) == np.signbit(e)) | (np.isnan(a) & np.isnan(e))
        if not same.all():
            i = np.flatnonzero(~same)[0]
            raise AssertionError(f"{msg}: {np.count_nonzero(~same)} values differ, first at {i}: "
                                 f"{a.reshape(-1)[i]!r} vs {e.reshape(-1)[i]!r}")


def combine(op: Op, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a <op> b elementwise, the way pycoll defines it, computed by numpy.

    The oracle for kernels and collectives. Half types are computed in
    float32 and rounded once; MAX/MIN follow numpy.maximum's rule (a if
    a > b or a is NaN, else b) on the exact values, returning the operand's
    bits; complex PROD multiplies component-wise with each product rounded.
    """
    dt = a.dtype
    with np.errstate(all="ignore"):
        if op in (Op.MAX, Op.MIN):
            af, bf = (a.astype(np.float32), b.astype(np.float32)) if dt.name in HALF else (a, b)
            if dt.kind == "f" or dt.name == "bfloat16":
                wins = (af > bf) if op is Op.MAX else (af < bf)
                wins = wins | np.isnan(af)
                return np.where(wins, a, b)
            return (np.maximum if op is Op.MAX else np.minimum)(a, b)
        if op in (Op.SUM, Op.PROD, Op.AVG) and dt.name in HALF:
            f = np.add if op is not Op.PROD else np.multiply
            return f(a.astype(np.float32), b.astype(np.float32)).astype(dt)
        if op is Op.PROD and dt.kind == "c":
            out = np.empty_like(a)
            out.real = a.real * b.real - a.imag * b.imag
            out.imag = a.real * b.imag + a.imag * b.real
            return out
        f = {Op.SUM: np.add, Op.AVG: np.add, Op.PROD: np.multiply, Op.BAND: np.bitwise_and,
             Op.BOR: np.bitwise_or, Op.BXOR: np.bitwise_xor, Op.MAX: np.maximum,
             Op.MIN: np.minimum}[op]
        return f(a, b)
