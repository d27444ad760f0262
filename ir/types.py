"""Element types, tensor roles and the tensor model.

Storage conventions (what arrays of the reference interpreter hold):

* ``fp16``  -> ``np.float16`` arrays.
* ``bf16``  -> ``np.float32`` arrays whose values are exactly representable in bfloat16
  (numpy has no bfloat16; :func:`round_to` rounds to nearest-even on the top 16 bits).
* ``fp32``  -> ``np.float32``; ``int32`` -> ``np.int32``.
"""

from __future__ import annotations

import math
from enum import Enum

import numpy as np
from pydantic import BaseModel, ConfigDict, field_validator


class DType(str, Enum):
    fp16 = "fp16"
    bf16 = "bf16"
    fp32 = "fp32"
    int32 = "int32"

    def __str__(self) -> str:
        return self.value


FLOAT_DTYPES = frozenset({DType.fp16, DType.bf16, DType.fp32})

_ITEMSIZE = {DType.fp16: 2, DType.bf16: 2, DType.fp32: 4, DType.int32: 4}
_NUMPY = {DType.fp16: np.float16, DType.bf16: np.float32, DType.fp32: np.float32, DType.int32: np.int32}


def itemsize(dtype: DType | str) -> int:
    """Bytes per element in memory (bf16 is 2 even though numpy stores it as float32)."""
    return _ITEMSIZE[DType(dtype)]


def to_numpy_dtype(dtype: DType | str) -> type[np.generic]:
    """The numpy dtype of reference arrays holding ``dtype`` values."""
    return _NUMPY[DType(dtype)]


_CHUNK = 1 << 20  # elements per step of the whole-array passes below (bounded temporaries)


def _round_bf16(array: np.ndarray, copy: bool = True) -> np.ndarray:
    """``array`` rounded to bfloat16 (nearest even; NaN kept as it is) in a float32 array: a copy,
    or ``array`` itself (``copy=False`` and a float32 array), rounded in place chunk by chunk, so
    a large weight costs one copy at most, not five."""
    a = np.asarray(array)
    if copy or a.dtype != np.float32 or not a.flags.c_contiguous:
        a = np.array(a, dtype=np.float32, copy=True)
    flat = a.reshape(-1)
    bits = flat.view(np.uint32)
    for s in range(0, bits.size, _CHUNK):
        b = bits[s : s + _CHUNK]
        nan = np.isnan(flat[s : s + _CHUNK])
        kept = b[nan]
        lsb = (b >> np.uint32(16)) & np.uint32(1)
        lsb += np.uint32(0x7FFF)
        b += lsb
        b &= np.uint32(0xFFFF0000)
        b[nan] = kept
    return a


def _is_bf16(a: np.ndarray) -> bool:
    """Every element of the float32 array ``a`` exactly a bfloat16 (low 16 bits zero)."""
    bits = np.ascontiguousarray(a).reshape(-1).view(np.uint32)
    return not any((bits[s : s + _CHUNK] & np.uint32(0xFFFF)).any() for s in range(0, bits.size, _CHUNK))


def round_to(dtype: DType | str, array, copy: bool = True) -> np.ndarray:
    """Round ``array`` to ``dtype`` precision and return it in that dtype's storage type: a new
    array, or with ``copy=False`` ``array`` itself (rounded in place) where its numpy dtype is
    already the storage type (for arrays the caller owns and no longer needs unrounded)."""
    dtype = DType(dtype)
    if dtype is DType.bf16:
        return _round_bf16(array, copy=copy)
    return np.asarray(array).astype(_NUMPY[dtype], copy=copy)


def as_stored(dtype: DType | str, array) -> np.ndarray:
    """``array`` itself when it already is in ``dtype``'s storage form, else :func:`round_to`'s
    copy. For read-only uses of large weights (the references, frozen host tensors): no copy."""
    dtype = DType(dtype)
    a = np.asarray(array)
    if a.dtype == _NUMPY[dtype] and (dtype is not DType.bf16 or _is_bf16(a)):
        return a
    return round_to(dtype, a)


class Role(str, Enum):
    weight = "weight"  # resident in banks for the whole run
    kv_cache = "kv_cache"  # resident, grows by one token per decode step
    activation = "activation"  # transient

    def __str__(self) -> str:
        return self.value


class Tensor(BaseModel):
    """A named, typed array. Values live outside the IR (state, inputs, reference results)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    shape: tuple[int, ...]
    dtype: DType
    role: Role

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not v or v != v.strip() or any(c in v for c in " ,()[]\t\n"):
            raise ValueError(f"tensor name {v!r}: must be non-empty, no spaces, commas or brackets")
        return v

    @field_validator("shape")
    @classmethod
    def _shape(cls, v: tuple[int, ...]) -> tuple[int, ...]:
        if any(d < 1 for d in v):
            raise ValueError(f"shape {v}: every dimension must be >= 1")
        return v

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.numel * itemsize(self.dtype)

    @property
    def resident(self) -> bool:
        return self.role is not Role.activation
