"""The message normaliser: every kind of input to a contiguous byte view."""
import array

import ml_dtypes
import numpy as np
import pytest

from data import DLPACK_WRITES, ArrayInterface, DLPackOnly, assert_bitwise_equal
from pycoll import _message
from pycoll._dtypes import BY_NAME

F32 = BY_NAME["float32"]


def base(shape=(4, 6), dtype=np.float32):
    return np.arange(int(np.prod(shape)), dtype=np.float64).astype(dtype).reshape(shape)


@pytest.mark.parametrize("name,make,zero_copy", [
    ("contiguous", lambda: base(), True),
    ("fortran", lambda: np.asfortranarray(base()), False),
    ("strided", lambda: base()[:, ::2], False),
    ("negative stride", lambda: base()[::-1], False),
    ("0-d", lambda: np.array(3.5, np.float32), True),
    ("empty", lambda: np.zeros((0, 3), np.float32), True),
    ("bfloat16", lambda: base(dtype=ml_dtypes.bfloat16), True),
    ("bfloat16 strided", lambda: base(dtype=ml_dtypes.bfloat16)[::-1, 1::2], False),
])
def test_inputs(name, make, zero_copy):
    x = make()
    msg = _message.message(x)
    assert msg.shape == x.shape and msg.count == x.size and msg.nbytes == x.nbytes
    assert msg.array.flags.c_contiguous
    assert msg.data.dtype == np.uint8 and msg.data.size == x.nbytes
    assert_bitwise_equal(msg.array, x)
    assert np.shares_memory(msg.array, x) == (zero_copy and x.size > 0)
    assert msg.dtype.numpy == x.dtype


def test_read_only_input_is_fine():
    x = base()
    x.setflags(write=False)
    msg = _message.message(x)
    assert np.shares_memory(msg.array, x)


@pytest.mark.parametrize("scalar", [np.float64(2.5), np.int8(-3), np.bool_(True),
                                    ml_dtypes.bfloat16(1.5), np.complex64(1j)],
                         ids=lambda s: type(s).__name__)
def test_a_numpy_scalar_is_read_but_never_written(scalar):
    # Read as a 0-d view of its own bytes; as out= it is read-only (np.asarray
    # would copy it into a writable array that the caller never sees).
    msg = _message.message(scalar)
    assert msg.shape == () and msg.dtype.numpy == scalar.dtype and msg.array[()] == scalar
    with pytest.raises(ValueError, match=r"out is read-only \(numpy scalars are immutable"):
        _message.output(scalar, (), msg.dtype)


def test_buffer_protocol_and_array_interface():
    msg = _message.message(array.array("d", [1.0, 2.0]))
    assert msg.dtype.name == "float64" and msg.array.tolist() == [1.0, 2.0]
    msg = _message.message(bytearray(b"\x01\x02"))
    assert msg.dtype.name == "uint8" and msg.array.tolist() == [1, 2]
    msg = _message.message(memoryview(np.arange(6, dtype=np.int32))[::2])
    assert msg.array.tolist() == [0, 2, 4]

    x = base()
    msg = _message.message(ArrayInterface(x))
    assert np.shares_memory(msg.array, x)


def test_dlpack_input_and_out_are_zero_copy():
    x = base()
    msg = _message.message(DLPackOnly(x))
    assert np.shares_memory(msg.array, x) and msg.dtype.name == "float32"
    out = np.zeros((4, 6), np.float32)
    if not DLPACK_WRITES:
        # numpy before 2.2.5 imports every DLPack array read-only: the error says so
        with pytest.raises(ValueError, match=r"out is read-only \(it came through DLPack, which "
                                             r"numpy 1\.\S+ imports read-only; numpy 2\.2\.5"):
            _message.output(DLPackOnly(out), (4, 6), F32)
        return
    msg = _message.output(DLPackOnly(out), (4, 6), F32)
    assert np.shares_memory(msg.array, out) and msg.writeback is None


@pytest.mark.skipif(not DLPACK_WRITES, reason="numpy before 2.2.5 has no read-only flag in DLPack")
def test_a_dlpack_export_marked_read_only_is_refused_as_such():
    out = np.zeros(3, np.float32)
    out.flags.writeable = False         # numpy's export of it is read-only
    with pytest.raises(ValueError, match=r"out is read-only \(it came through DLPack"):
        _message.output(DLPackOnly(out), (3,), F32)
    with pytest.raises(ValueError, match=r"^out is read-only$"):
        _message.output(out, (3,), F32)


def test_subclass_becomes_plain_ndarray():
    m = np.ma.masked_array(base())
    assert type(_message.message(m).array) is np.ndarray


@pytest.mark.parametrize("bad,match", [
    ([1.0, 2.0], "got list"),
    (3.0, "got float"),
    (None, "got NoneType"),
    (np.array(["a", "b"]), "dtype <U1"),
    (np.array([object()]), "dtype object"),
    (np.zeros(2, dtype=[("a", "i4"), ("b", "f4")]), "which pycoll does not support"),
    (np.zeros(2, dtype=">f4"), r"dtype >f4 \(not this machine's byte order\), which pycoll "
                                r"does not support; x.astype\('float32'\) converts it"),
    (np.zeros(2, dtype=">c16"), r"x.astype\('complex128'\)"),
    (np.zeros(2, dtype=np.dtype(ml_dtypes.bfloat16).newbyteorder(">")), r"x.astype\('bfloat16'\)"),
    (np.zeros(2, dtype=np.longdouble), "which pycoll does not support"),
])
def test_unsupported_inputs_are_type_errors(bad, match):
    with pytest.raises(TypeError, match=match):
        _message.message(bad)


class TestOutput:
    def test_contiguous_out_is_used_in_place(self):
        out = np.empty((4, 6), np.float32)
        msg = _message.output(out, (4, 6), F32)
        assert msg.array is out and msg.writeback is None

    @pytest.mark.parametrize("view", [lambda a: a[:, ::2], lambda a: a.T, lambda a: a[::-1]])
    def test_non_contiguous_out_writes_back(self, view):
        target = np.zeros((8, 8), np.float32)
        out = view(target)
        msg = _message.output(out, out.shape, F32)
        assert msg.writeback is out
        msg.array[...] = base(out.shape)
        result = msg.finish()
        assert result is out
        assert_bitwise_equal(out, base(out.shape))
        assert np.count_nonzero(target) == np.count_nonzero(base(out.shape))

    def test_errors_name_the_numbers(self):
        with pytest.raises(ValueError, match=r"out has shape \(4, 3\), expected \(8, 3\)"):
            _message.output(np.empty((4, 3), np.float32), (8, 3), F32)
        with pytest.raises(TypeError, match="out has dtype float64, expected float32"):
            _message.output(np.empty((8, 3)), (8, 3), F32)
        ro = np.empty((8, 3), np.float32)
        ro.setflags(write=False)
        with pytest.raises(ValueError, match="out is read-only"):
            _message.output(ro, (8, 3), F32)


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


class TestTorch:
    def test_tensor_is_zero_copy(self, torch):
        t = torch.arange(12, dtype=torch.float32).reshape(3, 4)
        msg = _message.message(t)
        assert msg.shape == (3, 4) and msg.dtype.name == "float32"
        msg.array[0, 0] = 42
        assert t[0, 0].item() == 42

    def test_bfloat16_tensor(self, torch):
        t = torch.tensor([1.5, -2.0, 3.25], dtype=torch.bfloat16)
        msg = _message.message(t)
        assert msg.dtype.name == "bfloat16"
        assert msg.array.astype(np.float32).tolist() == [1.5, -2.0, 3.25]

    def test_non_contiguous_tensor_and_out(self, torch):
        t = torch.arange(12, dtype=torch.float64).reshape(3, 4).t()
        msg = _message.message(t)
        assert msg.array.tolist() == t.tolist()
        out = torch.zeros(4, 3, dtype=torch.float64)
        omsg = _message.output(out, (4, 3), BY_NAME["float64"])
        omsg.array[...] = 7
        omsg.finish()
        assert (out == 7).all()

    def test_requires_grad_tensor_is_read(self, torch):
        t = torch.ones(3, requires_grad=True)
        assert _message.message(t).array.tolist() == [1.0, 1.0, 1.0]

    @pytest.mark.parametrize("name", [
        "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
        "float16", "bfloat16", "float32", "float64", "complex64", "complex128",
    ])
    def test_every_dtype_is_a_zero_copy_view(self, torch, name):
        kind = getattr(torch, name, None)
        if kind is None:
            pytest.skip(f"torch {torch.__version__} has no {name}")
        t = torch.arange(12).reshape(3, 4)[1:].to(kind)
        msg = _message.message(t)
        assert msg.dtype.name == name and msg.shape == (2, 4) and msg.writeback is None
        expected = np.arange(4, 12).reshape(2, 4).astype(BY_NAME[name].numpy)
        assert_bitwise_equal(msg.array, expected)
        msg.array[...] = 0
        assert not t.any().item()

    def test_requires_grad_out_is_written_through(self, torch):
        out = torch.zeros(2, 3, dtype=torch.bfloat16, requires_grad=True)
        msg = _message.output(out, (2, 3), BY_NAME["bfloat16"])
        msg.array[...] = 1.5
        msg.finish()
        assert msg.writeback is None and out.detach().eq(1.5).all().item()

    @pytest.mark.parametrize("make,why", [
        (lambda torch: torch.ones(2, dtype=torch.complex64).conj(), "conjugate bit"),
        (lambda torch: torch.ones(3).to_sparse(), "layout"),
        (lambda torch: torch.ones(3, dtype=torch.bfloat16).to_sparse(), "layout"),
    ])
    def test_unreadable_tensor_is_a_type_error(self, torch, make, why):
        _message.as_array(torch.ones(1))    # torch seen: tensors try Tensor.numpy() first
        assert _message._TENSOR[0] is torch.Tensor
        with pytest.raises(TypeError, match=f"grads cannot be read through DLPack .*{why}"):
            _message.message(make(torch), "grads")
