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


def _round_bf16(array: np.ndarray) -> np.ndarray:
    a = np.array(array, dtype=np.float32, copy=True)
    bits = a.view(np.uint32)
    lsb = (bits >> np.uint32(16)) & np.uint32(1)
    rounded = ((bits + np.uint32(0x7FFF) + lsb) & np.uint32(0xFFFF0000)).view(np.float32)
    return np.where(np.isnan(a), a, rounded).astype(np.float32)


def round_to(dtype: DType | str, array) -> np.ndarray:
    """Round ``array`` to ``dtype`` precision and return it in that dtype's storage type."""
    dtype = DType(dtype)
    if dtype is DType.fp16:
        return np.asarray(array).astype(np.float16)
    if dtype is DType.bf16:
        return _round_bf16(array)
    if dtype is DType.fp32:
        return np.asarray(array).astype(np.float32)
    return np.asarray(array).astype(np.int32)


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
