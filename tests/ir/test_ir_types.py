import numpy as np
import pytest

from ir import DType, Role, Tensor, itemsize, round_to, to_numpy_dtype


def test_itemsize_and_numpy_dtype():
    assert [itemsize(d) for d in DType] == [2, 2, 4, 4]
    assert to_numpy_dtype("fp16") is np.float16
    assert to_numpy_dtype(DType.bf16) is np.float32
    assert to_numpy_dtype("int32") is np.int32


def test_bf16_rounding_nearest_even():
    one = np.float32(1.0)
    ulp = np.float32(2.0**-7)  # bf16 has 8 significant bits
    x = np.array([1.0, one + ulp / 4, one + ulp / 2, one + 3 * ulp / 2, -2.5, np.inf, np.nan], dtype=np.float32)
    r = round_to("bf16", x)
    assert r.dtype == np.float32
    assert r[0] == 1.0 and r[1] == 1.0
    assert r[2] == 1.0  # tie -> even
    assert r[3] == one + 2 * ulp  # tie -> even (up)
    assert r[4] == -2.5 and np.isinf(r[5]) and np.isnan(r[6])
    bits = r[np.isfinite(r)].view(np.uint32)
    assert np.all(bits & 0xFFFF == 0)


def test_round_to_other_dtypes():
    x = np.array([1.0001, 2.5], dtype=np.float64)
    assert round_to("fp16", x).dtype == np.float16
    assert round_to("fp32", x).dtype == np.float32
    assert round_to("int32", np.array([3, 4])).dtype == np.int32


def test_tensor_sizes_and_validation():
    t = Tensor(name="w", shape=(3, 4), dtype="bf16", role="weight")
    assert t.numel == 12 and t.nbytes == 24 and t.resident
    assert not Tensor(name="a", shape=(2,), dtype="fp32", role=Role.activation).resident
    with pytest.raises(ValueError, match="dimension"):
        Tensor(name="w", shape=(0, 4), dtype="fp16", role="weight")
    with pytest.raises(ValueError, match="name"):
        Tensor(name="a b", shape=(1,), dtype="fp16", role="weight")


@pytest.mark.parametrize("dtype", ["fp16", "bf16", "fp32"])
def test_round_to_in_place_and_as_stored_without_copy(dtype):
    """copy=False rounds the caller's array itself where it is already the storage type; as_stored
    hands back a value already in storage form untouched (no copy of a large weight), and rounds
    anything else exactly as round_to does."""
    from ir import as_stored

    x = np.linspace(-3, 3, 1001, dtype=np.float32) * np.float32(1.001)
    want = round_to(dtype, x)
    y = x.copy()
    got = round_to(dtype, y, copy=False)
    assert np.array_equal(got, want) and got.dtype == want.dtype
    assert (got is y) == (to_numpy_dtype(dtype) is np.float32)  # rounded in place, no new array
    assert as_stored(dtype, want) is want
    assert np.array_equal(as_stored(dtype, x), want)
    if dtype == "bf16":  # a float32 array that is not exactly bf16 is rounded, not passed through
        assert as_stored(dtype, x) is not x


def test_bf16_rounding_in_chunks_equals_whole(monkeypatch):
    import ir.types as types

    x = np.random.default_rng(1).standard_normal(10_001).astype(np.float32)
    x[[3, 700]] = np.nan
    whole = round_to("bf16", x)
    monkeypatch.setattr(types, "_CHUNK", 64)
    chunked = round_to("bf16", x)
    assert np.array_equal(whole.view(np.uint32), chunked.view(np.uint32))
