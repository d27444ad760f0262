"""The numpy reference interpreter: the semantics of every op.

``run(program, inputs, state)`` evaluates the ops in :meth:`Program.topo_order` and returns the
value of every tensor (program inputs, state, intermediates, outputs, kv cache versions).

Dtype semantics
---------------
* Operands are read in their storage dtype (see :mod:`ir.types`) and converted to fp32.
* All arithmetic is fp32 (``np.float32``); reductions (norm statistics, dot products, softmax
  sums) accumulate in fp32. GEMV is ``x.astype(f32) @ W.astype(f32).T (+ bias)``: exact
  products of fp16/bf16 values, fp32 accumulation.
* Each op's result is rounded once to its output tensor's dtype: fp16 via ``astype(np.float16)``,
  bf16 via :func:`ir.types.round_to` (round to nearest even), int32 for argmax.
* RoPE angles ``position * theta**(-2i/head_dim)`` are computed in float64, then cos/sin are
  taken to fp32 (rotate-half convention of HF Llama: ``x*cos + rotate_half(x)*sin``).
* attn_score scales by ``1/sqrt(head_dim)``; head ``h`` uses kv head ``h // (heads/kv_heads)``;
  positions ``0..position`` inclusive. softmax subtracts the row max (fp32).
* gelu ``approximate="tanh"`` is GPT-2's gelu_new, ``"none"`` the erf form.
* kv_append returns a copy of the cache with row ``position`` replaced (the state passed in is
  never mutated). argmax returns the first maximal index.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from ir.errors import IRError
from ir.ops import OpKind, resolved_attrs
from ir.program import Op, Program
from ir.types import DType, as_stored, round_to

F32 = np.float32
_erf = np.vectorize(math.erf, otypes=[np.float64])


def _embed(a, x):
    ids, table = x
    if ids.size and (ids.min() < 0 or ids.max() >= table.shape[0]):
        raise IRError(f"embed: token id out of range [0, {table.shape[0]})")
    return _operand(table[ids])  # the rows gathered in storage form, then widened: not the whole table


def _layernorm(a, x):
    v, w, b = x
    mean = v.mean(-1, keepdims=True)
    var = ((v - mean) ** 2).mean(-1, keepdims=True)
    return (v - mean) / np.sqrt(var + F32(a["eps"])) * w + b


def _rmsnorm(a, x):
    v, w = x
    return v / np.sqrt((v * v).mean(-1, keepdims=True) + F32(a["eps"])) * w


def _gemv(a, x):
    out = x[0] @ x[1].T
    return out + x[2] if len(x) == 3 else out


def rope_cos_sin(position: int, head_dim: int, theta: float) -> tuple[np.ndarray, np.ndarray]:
    """cos, sin of shape [head_dim] for one position (halves repeated, HF layout)."""
    inv = theta ** (-np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    ang = np.concatenate([position * inv, position * inv])
    return np.cos(ang).astype(F32), np.sin(ang).astype(F32)


def _rope(a, x):
    (v,) = x
    h, d = a["heads"], a["head_dim"]
    cos, sin = rope_cos_sin(a["position"], d, a["theta"])
    v = v.reshape(v.shape[0], h, d)
    rot = np.concatenate([-v[..., d // 2 :], v[..., : d // 2]], axis=-1)
    return (v * cos + rot * sin).reshape(v.shape[0], h * d)


def _kv_append(a, x):
    cache, new = x
    out = cache.copy()
    b, kvh, _, hd = cache.shape
    out[:, :, a["position"], :] = new.reshape(b, kvh, hd)
    return out


def _kv_heads(a, cache):
    group = a["heads"] // a["kv_heads"]
    return np.repeat(cache[:, :, : a["position"] + 1, :], group, axis=1)  # [B, heads, L, hd]


def _attn_score(a, x):
    q, cache = x
    q = q.reshape(q.shape[0], a["heads"], a["head_dim"])
    k = _kv_heads(a, cache)
    return np.einsum("bhd,bhld->bhl", q, k) * F32(1.0 / math.sqrt(a["head_dim"]))


def _softmax(a, x):
    v = x[0] - x[0].max(-1, keepdims=True)
    e = np.exp(v)
    return e / e.sum(-1, keepdims=True)


def _attn_context(a, x):
    p, cache = x
    v = _kv_heads(a, cache)
    return np.einsum("bhl,bhld->bhd", p, v).reshape(p.shape[0], a["heads"] * a["head_dim"])


def _gelu(a, x):
    v = x[0]
    if a["approximate"] == "tanh":
        return F32(0.5) * v * (F32(1) + np.tanh(F32(math.sqrt(2 / math.pi)) * (v + F32(0.044715) * v**3)))
    return (0.5 * v * (1 + _erf(v / math.sqrt(2)))).astype(F32)


KERNELS = {
    OpKind.embed: _embed,
    OpKind.layernorm: _layernorm,
    OpKind.rmsnorm: _rmsnorm,
    OpKind.gemv: _gemv,
    OpKind.rope: _rope,
    OpKind.kv_append: _kv_append,
    OpKind.attn_score: _attn_score,
    OpKind.softmax: _softmax,
    OpKind.attn_context: _attn_context,
    OpKind.gelu: _gelu,
    OpKind.relu: lambda a, x: np.maximum(x[0], F32(0)),
    OpKind.silu: lambda a, x: x[0] / (F32(1) + np.exp(-x[0])),
    OpKind.mul: lambda a, x: x[0] * x[1],
    OpKind.add: lambda a, x: x[0] + x[1],
    OpKind.argmax: lambda a, x: np.argmax(x[0], axis=-1),
}


def _load(program: Program, name: str, value) -> np.ndarray:
    t = program.tensors[name]
    arr = np.asarray(value)
    if arr.shape != t.shape:
        raise IRError(f"run: tensor '{name}': value has shape {arr.shape}, expected {t.shape}")
    if t.dtype is DType.int32 and not np.issubdtype(arr.dtype, np.integer):
        raise IRError(f"run: tensor '{name}': value has dtype {arr.dtype}, expected integers")
    return as_stored(t.dtype, arr)  # already in storage form: no copy of large weights


def _operand(arr: np.ndarray) -> np.ndarray:
    return arr if arr.dtype == np.int32 else arr.astype(F32, copy=False)  # kernels never write operands


#: kernels that take an operand in its storage form and widen only what they read (an embedding
#: table of 152k tokens is 1 GB in fp16 and would be 2 GB more as float32)
_STORED_OPERANDS = {OpKind.embed: (1,)}


def execute(op: Op, program: Program, values: Mapping[str, np.ndarray]) -> np.ndarray:
    """Value of ``op``'s (single) output given its operand values."""
    attrs = resolved_attrs(op.name, op.kind, op.attrs)
    stored = _STORED_OPERANDS.get(op.kind, ())
    operands = [values[n] if i in stored else _operand(values[n]) for i, n in enumerate(op.inputs)]
    with np.errstate(over="ignore"):
        result = KERNELS[op.kind](attrs, operands)
    return round_to(program.tensors[op.outputs[0]].dtype, result)


def run(program: Program, inputs: Mapping[str, np.ndarray], state: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Evaluate ``program``; ``state`` holds every weight and root kv cache. Returns all tensors."""
    values: dict[str, np.ndarray] = {}
    missing = [n for n in program.inputs if n not in inputs]
    if missing:
        raise IRError(f"run: program '{program.name}': missing inputs {missing}")
    for n in program.inputs:
        values[n] = _load(program, n, inputs[n])
    resident = [t.name for t in program.weights() + program.kv_caches()]
    missing = [n for n in resident if n not in state]
    if missing:
        raise IRError(
            f"run: program '{program.name}': state lacks {missing[:5]}" + (" ..." if len(missing) > 5 else "")
        )
    for n in resident:
        values[n] = _load(program, n, state[n])
    for op in program.topo_order():
        values[op.outputs[0]] = execute(op, program, values)
    return values
