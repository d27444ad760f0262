"""Numpy semantics of the ATen ops the importer folds or probes (keyword arguments by their
schema names, as the exported graph gives them).

Two uses: constant folding (masks, RoPE tables: arrays in their torch dtypes, torch's type
promotion being numpy's for these cases) and probing a module's nodes on random data in float64
(``exact=True``: float casts are identities), to check which pimsat op they compute. The layout
ops (view, transpose, slice, cat, expand, ...) also move the importer's index maps.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ir.pt2.archive import BFLOAT16, NUMPY_DTYPES
from ir.types import round_to

_erf = np.vectorize(math.erf, otypes=[np.float64])
_FLOATS = {6, 7, 8, BFLOAT16}


def cast(x: np.ndarray, dtype: int | None, exact: bool) -> np.ndarray:
    """``x`` in torch dtype ``dtype`` (a ScalarType number; bfloat16 held as float32)."""
    if dtype is None:
        return x
    if exact and dtype in _FLOATS:
        return np.asarray(x, dtype=np.float64)
    if dtype == BFLOAT16:
        return round_to("bf16", x)
    return np.asarray(x).astype(NUMPY_DTYPES[dtype])


def _dim(d: int, ndim: int) -> int:
    return d + ndim if d < 0 else d


def _shape(x: np.ndarray, size: list[int]) -> list[int]:
    return list(size)


def _slice(a):
    x, d = a["self"], _dim(a.get("dim", 0), a["self"].ndim)
    start, end, step = a.get("start") or 0, a.get("end"), a.get("step", 1) or 1
    n = x.shape[d]
    end = n if end is None or end > n else end
    idx = [slice(None)] * x.ndim
    idx[d] = slice(start, end, step)
    return x[tuple(idx)]


def _expand(a):
    x, size = a["self"], list(a["size"])
    lead = len(size) - x.ndim
    full = [size[i] if size[i] != -1 else x.shape[i - lead] for i in range(len(size))]
    return np.broadcast_to(x, full)


def _split(a):
    x, size, d = a["self"], a["split_size"], _dim(a.get("dim", 0), a["self"].ndim)
    return [x.take(range(i, min(i + size, x.shape[d])), axis=d) for i in range(0, x.shape[d], size)]


def _split_sizes(a):
    x, d = a["self"], _dim(a.get("dim", 0), a["self"].ndim)
    cuts = np.cumsum(a["split_sizes"])[:-1]
    return np.split(x, cuts, axis=d)


def _mean(a):
    dims = tuple(a.get("dim") or range(a["self"].ndim))
    return a["self"].mean(axis=dims, keepdims=bool(a.get("keepdim", False)))


def _sum(a):
    dims = tuple(a.get("dim") or range(a["self"].ndim))
    return a["self"].sum(axis=dims, keepdims=bool(a.get("keepdim", False)))


def _layer_norm(a):
    x = a["input"]
    dims = tuple(range(x.ndim - len(a["normalized_shape"]), x.ndim))
    mean = x.mean(axis=dims, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=dims, keepdims=True)
    y = (x - mean) / np.sqrt(var + a.get("eps", 1e-5))
    if a.get("weight") is not None:
        y = y * a["weight"]
    return y + a["bias"] if a.get("bias") is not None else y


def _gelu(a):
    x = a["self"]
    if a.get("approximate", "none") == "tanh":
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    return (0.5 * x * (1 + _erf(x / math.sqrt(2)))).astype(x.dtype)


def _arange(a):
    start, end, step = a.get("start", 0), a["end"], a.get("step", 1)
    dtype = a.get("dtype")
    ints = all(isinstance(v, int) for v in (start, end, step))
    out = np.arange(start, end, step, dtype=np.int64 if ints else np.float32)
    return cast(out, dtype, False) if dtype is not None else out


def _where(a):
    return np.where(a["condition"], a["self"], a["other"])


def _full(a):
    fill = a["fill_value"]
    dt = a.get("dtype")
    arr = np.full(a["size"], fill, dtype=np.int64 if isinstance(fill, (bool, int)) and dt is None else np.float32)
    return cast(arr, dt, False)


def _to(a, exact: bool):
    return cast(a["self"], a.get("dtype"), exact)


def _binary(f: Callable) -> Callable:
    return lambda a, exact: f(a["self"], a["other"])


Kernel = Callable[[dict[str, Any], bool], Any]

#: Ops that only move or relabel elements (also applied to index maps).
LAYOUT: dict[str, Callable[[dict[str, Any]], Any]] = {
    "aten.view.default": lambda a: a["self"].reshape(a["size"]),
    "aten.reshape.default": lambda a: a["self"].reshape(a["shape"]),
    "aten._unsafe_view.default": lambda a: a["self"].reshape(a["size"]),
    "aten.unsqueeze.default": lambda a: np.expand_dims(a["self"], _dim(a["dim"], a["self"].ndim + 1)),
    "aten.squeeze.dim": lambda a: np.squeeze(a["self"], a["dim"]) if a["self"].shape[a["dim"]] == 1 else a["self"],
    "aten.squeeze.dims": lambda a: np.squeeze(a["self"], tuple(d for d in a["dim"] if a["self"].shape[d] == 1)),
    "aten.transpose.int": lambda a: np.swapaxes(a["self"], a["dim0"], a["dim1"]),
    "aten.permute.default": lambda a: np.transpose(a["self"], a["dims"]),
    "aten.t.default": lambda a: a["self"].T,
    "aten.expand.default": _expand,
    "aten.slice.Tensor": _slice,
    "aten.select.int": lambda a: np.take(a["self"], a["index"], axis=a["dim"]),
    "aten.cat.default": lambda a: np.concatenate(a["tensors"], axis=a.get("dim", 0)),
    "aten.split.Tensor": _split,
    "aten.split_with_sizes.default": _split_sizes,
    "aten.contiguous.default": lambda a: a["self"],
    "aten.clone.default": lambda a: a["self"],
    "aten.alias.default": lambda a: a["self"],
    "aten.detach.default": lambda a: a["self"],
    "aten.detach_.default": lambda a: a["self"],
    "aten.lift_fresh_copy.default": lambda a: a["self"],
    "aten.dropout.default": lambda a: a["input"],
}

#: No-op nodes: dropped (their outputs, if any, are unused).
IGNORED = frozenset({"aten._assert_tensor_metadata.default", "aten._assert_scalar.default", "aten.sym_constrain_range"})

#: Dtype conversions (identities on index maps: values are unchanged up to rounding).
CASTS = frozenset(
    {"aten.to.dtype", "aten.to.device", "aten.to.dtype_layout", "aten._to_copy.default", "aten.type_as.default"}
)

VALUE: dict[str, Kernel] = {
    "aten.add.Tensor": lambda a, e: a["self"] + a.get("alpha", 1) * a["other"],
    "aten.add_.Tensor": lambda a, e: a["self"] + a.get("alpha", 1) * a["other"],
    "aten.copy_.default": lambda a, e: np.broadcast_to(a["src"], np.shape(a["self"])).astype(
        np.asarray(a["self"]).dtype
    ),
    "aten.sub.Tensor": lambda a, e: a["self"] - a.get("alpha", 1) * a["other"],
    "aten.rsub.Scalar": lambda a, e: a["other"] - a.get("alpha", 1) * a["self"],
    "aten.mul.Tensor": _binary(np.multiply),
    "aten.mul.Scalar": _binary(np.multiply),
    "aten.div.Tensor": _binary(np.true_divide),
    "aten.pow.Tensor_Scalar": lambda a, e: np.power(a["self"], a["exponent"]),
    "aten.neg.default": lambda a, e: -a["self"],
    "aten.rsqrt.default": lambda a, e: 1 / np.sqrt(a["self"]),
    "aten.sqrt.default": lambda a, e: np.sqrt(a["self"]),
    "aten.tanh.default": lambda a, e: np.tanh(a["self"]),
    "aten.exp.default": lambda a, e: np.exp(a["self"]),
    "aten.cos.default": lambda a, e: np.cos(a["self"]),
    "aten.sin.default": lambda a, e: np.sin(a["self"]),
    "aten.sigmoid.default": lambda a, e: 1 / (1 + np.exp(-a["self"])),
    "aten.silu.default": lambda a, e: a["self"] / (1 + np.exp(-a["self"])),
    "aten.relu.default": lambda a, e: np.maximum(a["self"], 0),
    "aten.gelu.default": lambda a, e: _gelu(a),
    "aten.mean.dim": lambda a, e: _mean(a),
    "aten.sum.dim_IntList": lambda a, e: _sum(a),
    "aten.layer_norm.default": lambda a, e: _layer_norm(a),
    "aten.le.Tensor": _binary(np.less_equal),
    "aten.lt.Tensor": _binary(np.less),
    "aten.ge.Tensor": _binary(np.greater_equal),
    "aten.gt.Tensor": _binary(np.greater),
    "aten.eq.Tensor": _binary(np.equal),
    "aten.eq.Scalar": _binary(np.equal),
    "aten.ne.Scalar": _binary(np.not_equal),
    "aten.logical_not.default": lambda a, e: np.logical_not(a["self"]),
    "aten.logical_and.default": _binary(np.logical_and),
    "aten.logical_or.default": _binary(np.logical_or),
    "aten.bitwise_and.Tensor": _binary(np.bitwise_and),
    "aten.bitwise_or.Tensor": _binary(np.bitwise_or),
    "aten.bitwise_not.default": lambda a, e: np.invert(a["self"]),
    "aten.any.dim": lambda a, e: np.any(a["self"], axis=a["dim"], keepdims=bool(a.get("keepdim", False))),
    "aten.all.default": lambda a, e: np.all(a["self"]),
    "aten.where.self": lambda a, e: _where(a),
    "aten.arange.default": lambda a, e: _arange(a),
    "aten.arange.start": lambda a, e: _arange(a),
    "aten.arange.start_step": lambda a, e: _arange(a),
    "aten.full.default": lambda a, e: _full(a),
    "aten.scalar_tensor.default": lambda a, e: cast(np.array(a["s"], dtype=np.float32), a.get("dtype"), e),
    "aten.full_like.default": lambda a, e: np.full_like(a["self"], a["fill_value"]),
    "aten.zeros.default": lambda a, e: cast(np.zeros(a["size"], np.float32), a.get("dtype"), e),
    "aten.ones.default": lambda a, e: cast(np.ones(a["size"], np.float32), a.get("dtype"), e),
    "aten.where.ScalarOther": lambda a, e: np.where(a["condition"], a["self"], a["other"]),
    "aten.where.ScalarSelf": lambda a, e: np.where(a["condition"], a["self"], a["other"]),
    "aten.zeros_like.default": lambda a, e: np.zeros_like(a["self"]),
    "aten.ones_like.default": lambda a, e: np.ones_like(a["self"]),
    "aten.tril.default": lambda a, e: np.tril(a["self"], a.get("diagonal", 0)),
    "aten.triu.default": lambda a, e: np.triu(a["self"], a.get("diagonal", 0)),
    "aten.masked_fill.Scalar": lambda a, e: np.where(a["mask"], a["value"], a["self"]),
    "aten.embedding.default": lambda a, e: a["weight"][a["indices"]],
    "aten.linear.default": lambda a, e: a["input"] @ a["weight"].T + (0 if a.get("bias") is None else a["bias"]),
    "aten.addmm.default": lambda a, e: a["self"] + a["mat1"] @ a["mat2"],
    "aten.mm.default": lambda a, e: a["self"] @ a["mat2"],
}
VALUE |= {k: (lambda f: lambda a, e: f(a))(f) for k, f in LAYOUT.items()}
VALUE |= {k: _to for k in CASTS}


def evaluate(target: str, args: dict[str, Any], exact: bool = False) -> Any:
    """The value of one node (KeyError: the op has no numpy semantics here)."""
    return VALUE[target](args, exact)


__all__ = ["CASTS", "IGNORED", "LAYOUT", "VALUE", "cast", "evaluate"]
