"""The Cython kernels against numpy (and ml_dtypes for bfloat16), no MPI."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

from data import ALL_DTYPES, BF16, assert_bitwise_equal, assert_same_values, bits, combine, sample
from pycoll._dtypes import BY_NAME, Op
from pycoll._kernels import copy as kcopy
from pycoll._kernels import reduce as kreduce

KERNEL_OPS = [op for op in Op if op is not Op.AVG]
PAIRS = [(op, dt) for op in KERNEL_OPS for dt in ALL_DTYPES
         if kreduce.supports(op.kernel, BY_NAME[dt].code)]
LENGTHS = [0, 1, 7, 1000, (1 << 20) + 3]


HALF_ISAS = kreduce.half_isas()


@pytest.fixture
def half_isa(request):
    """Run a test at one float16/bfloat16 instruction-set level."""
    before = kreduce.half_isa()
    kreduce._set_half_isa(request.param)
    yield request.param
    kreduce._set_half_isa(before)


def run(op, a, b, out):
    kreduce.reduce(op.kernel, BY_NAME[a.dtype.name].code, out, a, b)
    return out


def test_every_pair_is_tabled():
    # The table is the contract: exactly the pairs DESIGN.md defines.
    expected = set()
    for dt in ALL_DTYPES:
        kind = BY_NAME[dt].kind
        for op in KERNEL_OPS:
            if op in (Op.BAND, Op.BOR, Op.BXOR) and kind not in "biu":
                continue
            if op in (Op.MAX, Op.MIN) and kind == "c":
                continue
            expected.add((op, dt))
    assert set(PAIRS) == expected


@pytest.mark.parametrize("n", LENGTHS)
@pytest.mark.parametrize("op,dtype", PAIRS, ids=[f"{o.value}-{d}" for o, d in PAIRS])
def test_reduce_matches_numpy(op, dtype, n):
    rng = np.random.default_rng([n, ALL_DTYPES.index(dtype), op.kernel])
    a, b = sample(dtype, n, rng), sample(dtype, n, rng)
    expected = combine(op, a, b)
    assert_bitwise_equal(run(op, a, b, np.empty_like(a)), expected, "out of place")
    assert_bitwise_equal(_inplace(op, a, b, "a"), expected, "out is a")
    assert_bitwise_equal(_inplace(op, a, b, "b"), expected, "out is b")


def _inplace(op, a, b, which):
    a, b = a.copy(), b.copy()
    out = a if which == "a" else b
    kreduce.reduce(op.kernel, BY_NAME[a.dtype.name].code, out, a, b)
    return out


@pytest.mark.parametrize("op,dtype", [(o, d) for o, d in PAIRS if BY_NAME[d].kind in "fc"],
                         ids=lambda v: getattr(v, "value", v))
def test_special_values(op, dtype):
    """NaN, inf and signed zeros: the same values as numpy's definition,
    and exactly numpy's bits where numpy is deterministic (MAX/MIN)."""
    rng = np.random.default_rng(7)
    a, b = sample(dtype, 4099, rng, special=True), sample(dtype, 4099, rng, special=True)
    got = run(op, a, b, np.empty_like(a))
    assert_same_values(got, combine(op, a, b), f"{op.value} {dtype}")
    if op in (Op.MAX, Op.MIN) and dtype in ("float32", "float64"):
        assert_bitwise_equal(got, (np.maximum if op is Op.MAX else np.minimum)(a, b))


def test_max_min_rules_on_zeros_and_nans():
    """numpy.maximum's rule: a if a > b or a is NaN, else b."""
    nan1 = np.array([0x7FC00001], np.uint32).view(np.float32)[0]
    nan2 = np.array([0x7FC00002], np.uint32).view(np.float32)[0]
    a = np.array([-0.0, 0.0, nan1, 1.0, nan1], np.float32)
    b = np.array([0.0, -0.0, 1.0, nan2, nan2], np.float32)
    got = run(Op.MAX, a, b, np.empty_like(a))
    expected = np.array([0.0, -0.0, nan1, nan2, nan1], np.float32)
    assert_bitwise_equal(got, expected)
    for dtype in ("float16", "bfloat16"):
        ah, bh = a.astype(BY_NAME[dtype].numpy), b.astype(BY_NAME[dtype].numpy)
        got = run(Op.MAX, ah, bh, np.empty_like(ah))
        # Each result is one operand's bits, untouched.
        assert_bitwise_equal(got, np.array([bh[0], bh[1], ah[2], bh[3], ah[4]]))


def test_integer_wraparound():
    a = np.array([127, -128, 100], np.int8)
    b = np.array([1, -1, 100], np.int8)
    assert run(Op.SUM, a, b, np.empty_like(a)).tolist() == [-128, 127, -56]
    u = np.array([65535, 300], np.uint16)
    assert run(Op.PROD, u, u, np.empty_like(u)).tolist() == [1, 24464]   # no C int overflow
    big = np.array([2**62, -2**63], np.int64)
    assert run(Op.SUM, big, big, np.empty_like(big)).tolist() == [-2**63, 0]


def test_bool_ops_on_noncanonical_bytes():
    """Bools other than 0/1 (a uint8 view) still reduce as truth values."""
    a = np.array([0, 2, 0, 255], np.uint8).view(bool)
    b = np.array([0, 0, 3, 1], np.uint8).view(bool)
    assert bits(run(Op.SUM, a, b, np.empty_like(a))).tolist() == [0, 1, 1, 1]
    assert bits(run(Op.PROD, a, b, np.empty_like(a))).tolist() == [0, 0, 0, 1]
    assert bits(run(Op.BXOR, a, b, np.empty_like(a))).tolist() == [0, 1, 1, 0]


@pytest.mark.parametrize("op,dtype", PAIRS, ids=[f"{o.value}-{d}" for o, d in PAIRS])
def test_result_independent_of_address(op, dtype):
    """Note [Operand order]: the bits depend only on the values, not on where
    the buffers sit or where a vector body ends."""
    rng = np.random.default_rng(3)
    n = 45
    a, b = sample(dtype, n, rng, special=True), sample(dtype, n, rng, special=True)
    item = a.itemsize
    reference = run(op, a, b, np.empty_like(a))
    for shift in range(1, 9):
        # Copies of a and b at other (still naturally aligned) addresses.
        store = np.zeros(3 * (n + 16) * item + 64, np.uint8)
        base = -store.ctypes.data % 64
        def at(k, src):
            start = base + (k * (n + 16) + shift) * item
            view = store[start:start + n * item].view(a.dtype)
            view[...] = src
            return view
        out = at(2, np.zeros_like(a))
        run(op, at(0, a), at(1, b), out)
        assert_bitwise_equal(out, reference, f"shift {shift}")


@pytest.mark.parametrize("half_isa", HALF_ISAS, indirect=True)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("op", [Op.SUM, Op.PROD])
def test_half_levels_agree_bitwise(half_isa, dtype, op):
    """Every instruction-set level gives the same bits on every 16-bit pattern
    (NaNs included), and matches numpy / ml_dtypes on non-NaN results; also
    with a tail (65,531 values: not a whole number of blocks)."""
    all_bits = np.arange(1 << 16, dtype=np.uint16)
    rng = np.random.default_rng(11)
    a = all_bits.view(BY_NAME[dtype].numpy)
    b = rng.permutation(all_bits).view(BY_NAME[dtype].numpy)
    got = {n: run(op, a[:n], b[:n], np.empty(n, a.dtype)) for n in (a.size, a.size - 5)}
    kreduce._set_half_isa("baseline")
    for n, result in got.items():
        reference = run(op, a[:n], b[:n], np.empty(n, a.dtype))
        assert_bitwise_equal(result, reference, f"{half_isa} vs baseline, n = {n}")
        assert_same_values(result, combine(op, a[:n], b[:n]), f"n = {n}")


@pytest.mark.parametrize("half_isa", HALF_ISAS, indirect=True)
def test_half_arithmetic_matches_reference_libraries(half_isa):
    """float16 against numpy's own float16 add and multiply, bfloat16 against
    ml_dtypes' (whose NaN is canonical: match it bit for bit)."""
    rng = np.random.default_rng(5)
    n = 10007
    for dtype in (np.float16, BF16):
        a = rng.integers(0, 1 << 16, n, dtype=np.uint16).view(dtype)
        b = rng.integers(0, 1 << 16, n, dtype=np.uint16).view(dtype)
        with np.errstate(all="ignore"):
            for op, f in ((Op.SUM, np.add), (Op.PROD, np.multiply)):
                got = run(op, a, b, np.empty_like(a))
                if dtype is BF16:
                    assert_bitwise_equal(got, f(a, b))
                else:
                    assert_same_values(got, f(a, b))


@pytest.mark.parametrize("half_isa", HALF_ISAS, indirect=True)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_convert(half_isa, dtype):
    half = BY_NAME[dtype]
    f32 = BY_NAME["float32"]
    # Widening every 16-bit pattern is exact (NaN stays NaN).
    h = np.arange(1 << 16, dtype=np.uint16).view(half.numpy)
    wide = np.empty(h.size, np.float32)
    kreduce.convert(half.code, f32.code, wide, h)
    assert_same_values(wide, h.astype(np.float32))
    # Narrowing rounds to nearest even: random bit patterns, ties, overflow,
    # subnormals, compared bit for bit with the reference conversion.
    rng = np.random.default_rng(9)
    x = rng.integers(0, 1 << 32, 200003, dtype=np.uint64).astype(np.uint32).view(np.float32)
    ties = (np.arange(-70000, 70000, dtype=np.int64).astype(np.float32) + 0.5) * np.float32(2.0 ** -14)
    edges = np.array([65504, 65519.99, 65520, 65536, 2.0 ** -24, 2.0 ** -25, 3 * 2.0 ** -26,
                      1e-45, -0.0, np.inf, -np.inf, 3.4e38], np.float32)
    x = np.concatenate([x, ties, edges])
    narrow = np.empty(x.size, half.numpy)
    kreduce.convert(f32.code, half.code, narrow, x)
    with np.errstate(all="ignore"):
        reference = x.astype(half.numpy)
    if dtype == "bfloat16":
        assert_bitwise_equal(narrow, reference)
    else:
        # numpy keeps a signalling NaN signalling; pycoll, like F16C, quiets it.
        assert_same_values(narrow, reference)
        finite = ~np.isnan(x)
        assert_bitwise_equal(narrow[finite], reference[finite])


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64", "complex64", "complex128"])
@pytest.mark.parametrize("n", [0, 1, 7, 1000, 65539])
def test_scale(dtype, n):
    dt = BY_NAME[dtype]
    rng = np.random.default_rng(n)
    x = sample(dtype, n, rng, special=True)
    out = np.empty_like(x)
    kreduce.scale(dt.code, out, x, 3.0)
    if dt.half:
        expected = (x.astype(np.float32) / np.float32(3)).astype(dt.numpy)
    elif dt.kind == "c":
        expected = np.empty_like(x)
        expected.real, expected.imag = x.real / 3, x.imag / 3
    else:
        expected = x / dt.numpy.type(3)
    assert_bitwise_equal(out, expected)
    kreduce.scale(dt.code, x, x, 3.0)               # in place
    assert_bitwise_equal(x, expected)


@pytest.mark.parametrize("half_isa", HALF_ISAS, indirect=True)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_scale_at_every_level(half_isa, dtype):
    """AVG's division at every instruction-set level, in place or not, with
    tails of every length a 16- or 32-value block leaves."""
    dt = BY_NAME[dtype]
    rng = np.random.default_rng(17)
    for n in (1, 15, 17, 31, 33, 1000):
        x = sample(dtype, n, rng, special=True)
        expected = (x.astype(np.float32) / np.float32(3)).astype(dt.numpy)
        out = np.empty_like(x)
        kreduce.scale(dt.code, out, x, 3.0)
        assert_bitwise_equal(out, expected, f"{half_isa}, n = {n}")
        kreduce.scale(dt.code, x, x, 3.0)
        assert_bitwise_equal(x, expected, f"{half_isa}, n = {n}, in place")


class TestKernelErrors:
    """Bad input raises before anything is written."""

    def test_undefined_pairs_are_type_errors(self):
        x = np.ones(4, np.complex64)
        before = x.copy()
        with pytest.raises(TypeError, match="MAX is not defined for complex64"):
            kreduce.reduce(Op.MAX.kernel, BY_NAME["complex64"].code, x, x, x)
        f = np.ones(4, np.float32)
        with pytest.raises(TypeError, match="BXOR is not defined for float32"):
            kreduce.reduce(Op.BXOR.kernel, BY_NAME["float32"].code, f, f, f)
        with pytest.raises(TypeError, match="scale is not defined for int32"):
            kreduce.scale(BY_NAME["int32"].code, f, f, 2.0)
        assert_bitwise_equal(x, before)

    def test_unknown_codes_are_value_errors(self):
        f = np.ones(4, np.float32)
        with pytest.raises(ValueError, match="unknown op code 99"):
            kreduce.reduce(99, BY_NAME["float32"].code, f, f, f)
        with pytest.raises(ValueError, match="unknown dtype code 77"):
            kreduce.reduce(0, 77, f, f, f)

    def test_mismatched_lengths(self):
        a, b, out = np.ones(4, np.float32), np.ones(5, np.float32), np.zeros(4, np.float32)
        with pytest.raises(ValueError, match="b has 20 bytes, expected 16"):
            kreduce.reduce(0, BY_NAME["float32"].code, out, a, b)
        with pytest.raises(ValueError, match="not a multiple"):
            kreduce.reduce(0, BY_NAME["float32"].code, out[:3].view(np.uint8)[:10], a.view(np.uint8)[:10],
                           a.view(np.uint8)[:10])
        assert not out.any()

    def test_read_only_out(self):
        a = np.ones(4, np.float32)
        out = np.zeros(4, np.float32)
        out.setflags(write=False)
        with pytest.raises(ValueError, match="out is read-only"):
            kreduce.reduce(0, BY_NAME["float32"].code, out, a, a)
        assert not out.any()

    def test_partial_overlap(self):
        buf = np.zeros(10, np.float32)
        with pytest.raises(ValueError, match="partly overlaps"):
            kreduce.reduce(0, BY_NAME["float32"].code, buf[1:9], buf[:8], buf[2:])

    def test_non_contiguous_and_non_buffers(self):
        a = np.ones(8, np.float32)
        with pytest.raises(ValueError, match="a must be C-contiguous"):
            kreduce.reduce(0, BY_NAME["float32"].code, a[:4], a[::2], a[:4])
        with pytest.raises(TypeError, match="does not support the buffer protocol"):
            kreduce.reduce(0, BY_NAME["float32"].code, a, [1.0] * 8, a)

    def test_convert_pairs(self):
        with pytest.raises(TypeError, match="between float32 and float16/bfloat16"):
            kreduce.convert(BY_NAME["float64"].code, BY_NAME["float32"].code,
                            np.empty(2, np.float32), np.ones(2))


# ---------------------------------------------------------------------------
# split / concat / pack


LAYOUTS = {
    "c": lambda x: x,
    "fortran": np.asfortranarray,
    "strided": lambda x: np.repeat(x, 2, axis=-1)[..., ::2],
    "reversed": lambda x: x[::-1],
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("dtype", ["bool", "int16", "bfloat16", "float32", "complex128"])
@pytest.mark.parametrize("shape,axis", [((10,), 0), ((7, 3), 0), ((7, 3), 1), ((4, 5, 6), 1),
                                        ((4, 5, 6), -1), ((2, 0, 3), 0), ((3, 1, 5), 2)])
def test_split_and_concat_match_array_split(layout, dtype, shape, axis):
    rng = np.random.default_rng(1)
    x = LAYOUTS[layout](sample(dtype, shape, rng))
    for parts in (1, 2, 3, 4, 11):
        blocks = np.array_split(x, parts, axis=axis)
        rebuilt = LAYOUTS[layout](np.zeros_like(np.ascontiguousarray(x)))
        for i, expected in enumerate(blocks):
            out = np.empty(expected.shape, x.dtype)
            assert kcopy.split_copy(x, out, axis, parts, i) == expected.nbytes
            assert_bitwise_equal(out, expected, f"block {i} of {parts}")
            assert kcopy.concat_copy(out, rebuilt, axis, parts, i) == expected.nbytes
            assert kcopy.block(x.shape[axis], parts, i)[1] == expected.shape[axis]
        assert_bitwise_equal(rebuilt, x)


def test_split_errors():
    x = np.arange(12.0).reshape(3, 4)
    out = np.empty(4)
    with pytest.raises(ValueError, match="axis 2 is out of range for 2 dimensions"):
        kcopy.split_copy(x, out, 2, 3, 0)
    with pytest.raises(ValueError, match="block 3 of 3 does not exist"):
        kcopy.split_copy(x, out, 0, 3, 3)
    with pytest.raises(ValueError, match="out has 32 bytes, block 0 of 2 along axis 0 has 64"):
        kcopy.split_copy(x, out, 0, 2, 0)
    with pytest.raises(ValueError, match="0-d"):
        kcopy.split_copy(np.float64(1.0), out, 0, 1, 0)


def test_pack_unpack_round_trip_any_layout():
    rng = np.random.default_rng(2)
    arrays = [sample("float32", (5, 4), rng).T, sample("bfloat16", 9, rng)[::-3],
              sample("int8", 3, rng), sample("complex128", (2, 2), rng), sample("bool", (), rng),
              sample("float64", 0, rng)]
    plan = kcopy.PackPlan(arrays)
    assert len(plan) == len(arrays)
    # Default offsets are consecutive, each aligned to its itemsize.
    assert all(off % a.itemsize == 0 for off, a in zip(plan.offsets, arrays))
    buf = np.zeros(plan.nbytes, np.uint8)
    plan.pack(buf)
    for off, a in zip(plan.offsets, arrays):
        assert_bitwise_equal(buf[off:off + a.nbytes].view(a.dtype).reshape(a.shape), a)
    copies = [np.zeros_like(a) for a in arrays]
    kcopy.unpack(buf, copies, plan.offsets)
    for a, c in zip(arrays, copies):
        assert_bitwise_equal(c, a)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 23), st.integers(0, 24),
                          st.sampled_from([1, 2, 3, -1, -2])), max_size=6),
       st.booleans())
def test_first_overlap_agrees_with_numpy(slices, two_d):
    """first_overlap finds a pair that shares memory exactly when one
    exists (numpy.shares_memory over every pair), for strided, reversed,
    empty and interleaved views of one buffer, beside arrays of their own."""
    base = np.zeros(48, BF16)
    grid = base.reshape(2, 24) if two_d else base[:24]
    views = [np.ones(3)]
    for lo, hi, step in slices:
        views.append(grid[..., lo:hi:step] if step > 0 else grid[..., hi:lo:step])
    pairs = [(i, j) for i in range(len(views)) for j in range(i + 1, len(views))
             if np.shares_memory(views[i], views[j])]
    got = kcopy.first_overlap(views, np.shares_memory)
    if pairs:
        assert got in pairs
    else:
        assert got is None


def test_first_overlap_examples():
    a = np.arange(12.0)
    assert kcopy.first_overlap([a[::2], a[1::2]], np.shares_memory) is None
    assert kcopy.first_overlap([a[:6], np.ones(2), a[5:]], np.shares_memory) == (0, 2)
    assert kcopy.first_overlap([a[6:], a[:6]], np.shares_memory) is None      # adjacent
    assert kcopy.first_overlap([a, a[:0], a[:0]], np.shares_memory) is None   # empty
    assert kcopy.first_overlap([a.reshape(3, 4).T, a[::-1][3:5]], np.shares_memory) == (0, 1)
    assert kcopy.first_overlap([], np.shares_memory) is None


def test_pack_errors():
    a = np.ones(4, np.float32)
    with pytest.raises(ValueError, match="overlap"):
        kcopy.PackPlan([a, a], offsets=[0, 8])
    with pytest.raises(ValueError, match="2 offsets for 1 arrays"):
        kcopy.PackPlan([a], offsets=[0, 16])
    with pytest.raises(ValueError, match="out has 8 bytes, the plan needs 16"):
        kcopy.pack([a], np.zeros(8, np.uint8))
    ro = np.ones(4, np.float32)
    ro.setflags(write=False)
    with pytest.raises(ValueError, match="read-only"):
        kcopy.unpack(np.zeros(16, np.uint8), [ro])
    assert (ro == 1).all()


def test_pack_ranges():
    """pack/unpack of byte ranges [start, stop) of the layout: pieces of a
    large bucket, cut anywhere inside a contiguous array."""
    rng = np.random.default_rng(3)
    arrays = [rng.random(n).astype(np.float32) for n in (5, 1, 17, 8)]
    arrays.append(rng.random((6, 4))[:, ::2])              # strided: never cut
    plan = kcopy.PackPlan(arrays)
    whole = np.zeros(plan.nbytes, np.uint8)
    plan.pack(whole)
    cuts = [0, 3, 20, 24, 100, plan.offsets[4], plan.nbytes]
    pieces = np.zeros(plan.nbytes, np.uint8)
    for lo, hi in zip(cuts, cuts[1:]):
        piece = np.zeros(hi - lo, np.uint8)
        plan.pack(piece, lo, hi)
        pieces[lo:hi] = piece
    assert_bitwise_equal(pieces, whole)
    targets = [np.zeros_like(a) for a in arrays]
    back = kcopy.PackPlan(targets)
    for lo, hi in zip(cuts, cuts[1:]):
        back.unpack(whole[lo:hi].copy(), lo, hi)
    for t, a in zip(targets, arrays):
        assert_bitwise_equal(t, a)
    with pytest.raises(ValueError, match="cuts through array 4"):
        plan.pack(np.zeros(plan.nbytes, np.uint8), plan.offsets[4] + 8, plan.nbytes)
    with pytest.raises(ValueError, match="outside the plan"):
        plan.pack(np.zeros(plan.nbytes, np.uint8), 8, plan.nbytes + 1)
    with pytest.raises(ValueError, match=r"out has 4 bytes, bytes \[0, 8\) need 8"):
        plan.pack(np.zeros(4, np.uint8), 0, 8)


# ---------------------------------------------------------------------------
# Properties

FLOATS = st.sampled_from([np.float16, np.float32, np.float64])


@settings(max_examples=200, deadline=None)
@given(data=st.data(), dtype=FLOATS, op=st.sampled_from([Op.SUM, Op.PROD, Op.MAX, Op.MIN]))
def test_property_float_reduce(data, dtype, op):
    n = data.draw(st.integers(0, 300))
    a = data.draw(hnp.arrays(dtype, n))
    b = data.draw(hnp.arrays(dtype, n))
    got = run(op, a, b, np.empty_like(a))
    assert_same_values(got, combine(op, a, b))


@settings(max_examples=200, deadline=None)
@given(x=hnp.arrays(np.float32, st.integers(0, 200), elements=st.floats(width=32)))
def test_property_bf16_narrow_is_ml_dtypes(x):
    out = np.empty(x.size, BF16)
    kreduce.convert(BY_NAME["float32"].code, BY_NAME["bfloat16"].code, out, x)
    assert_bitwise_equal(out, x.astype(BF16))


@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_property_split_concat_round_trip(data):
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=4, min_side=0, max_side=6))
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    parts = data.draw(st.integers(1, 9))
    dtype = data.draw(st.sampled_from(["uint8", "float16", "int32", "float64", "complex128"]))
    x = sample(dtype, shape, np.random.default_rng(0))
    view = data.draw(st.sampled_from(list(LAYOUTS)))
    x = LAYOUTS[view](x)
    out = np.zeros_like(np.ascontiguousarray(x))
    for i in range(parts):
        length = kcopy.block(x.shape[axis], parts, i)[1]
        block_shape = list(x.shape)
        block_shape[axis] = length
        buf = np.empty(block_shape, x.dtype)
        kcopy.split_copy(x, buf, axis, parts, i)
        kcopy.concat_copy(buf, out, axis, parts, i)
    assert_bitwise_equal(out, x)


@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_property_pack_round_trip(data):
    count = data.draw(st.integers(0, 12))
    rng = np.random.default_rng(count)
    arrays = []
    for _ in range(count):
        dtype = data.draw(st.sampled_from(["bool", "int8", "uint16", "bfloat16", "float32", "complex64"]))
        shape = data.draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=5))
        arrays.append(LAYOUTS[data.draw(st.sampled_from(list(LAYOUTS)))](sample(dtype, shape, rng))
                      if shape else sample(dtype, shape, rng))
    plan = kcopy.PackPlan(arrays)
    buf = np.zeros(plan.nbytes, np.uint8)
    plan.pack(buf)
    copies = [np.zeros_like(a) for a in arrays]
    kcopy.PackPlan(copies).unpack(buf)
    for a, c in zip(arrays, copies):
        assert_bitwise_equal(c, a)


@pytest.mark.parametrize("offset", [0, 1, 7, 16])
@pytest.mark.parametrize("nbytes", [0, 1, 15, 63, 64, 65, 1000, (1 << 20) + 3])
def test_stream_copy_copies_every_byte_at_any_alignment(nbytes, offset):
    """The non-temporal copy of a staged send (stream.c): head bytes to a
    16-byte boundary, 64-byte blocks, tail."""
    src = np.random.default_rng(nbytes).integers(0, 256, nbytes + 32, dtype=np.uint8)
    dst = np.zeros(nbytes + 32, np.uint8)
    assert kcopy.stream_copy(dst[offset:offset + nbytes], src[3:3 + nbytes]) == nbytes
    assert np.array_equal(dst[offset:offset + nbytes], src[3:3 + nbytes])
    assert not dst[:offset].any() and not dst[offset + nbytes:].any()


def test_stream_copy_errors():
    with pytest.raises(ValueError, match="buffer has 4 bytes, out has 8"):
        kcopy.stream_copy(np.zeros(8, np.uint8), np.zeros(4, np.uint8))
    with pytest.raises(ValueError):
        kcopy.stream_copy(np.zeros(8, np.uint8)[::2], np.zeros(4, np.uint8))
    with pytest.raises(ValueError):
        kcopy.stream_copy(np.zeros(8, np.uint8).view(), np.zeros(8, np.uint8)[::-1])
