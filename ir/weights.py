"""Seeded synthetic state (weights, kv caches) and inputs for a program.

Each tensor gets its own generator seeded from ``(seed, crc32(name))``, so a tensor's values do
not depend on which other tensors the program has: a one-layer prefix sees the same weights as
the full model.

* matrices (2-D weights): ``normal / sqrt(fan_in)`` with fan_in = last dimension;
* norm weights: ``1 + 0.1 * normal``; biases (and other 1-D weights): ``0.02 * normal``;
* kv caches: positions ``< position`` (what earlier steps wrote) ``normal``, the rest zero;
* inputs: token ids uniform in the embedding table, or ``meta["fixed_inputs"][name]`` when the
  builder fixed them (``position_ids``); float activations ``normal``.
"""

from __future__ import annotations

import zlib

import numpy as np

from ir.ops import OpKind
from ir.program import Program
from ir.types import FLOAT_DTYPES, Tensor, round_to, to_numpy_dtype

_NORMS = (OpKind.layernorm, OpKind.rmsnorm)


def _rng(seed: int, name: str) -> np.random.Generator:
    return np.random.default_rng([seed, zlib.crc32(name.encode())])


def _filled(program: Program, cache: str) -> int:
    """Positions of a root kv cache that earlier decode steps have written."""
    ops = [program.op(o) for o in program.consumers()[cache]]
    appends = [op.attrs["position"] for op in ops if op.kind is OpKind.kv_append]
    if appends:
        return min(appends)
    reads = [op.attrs["position"] + 1 for op in ops if op.kind in (OpKind.attn_score, OpKind.attn_context)]
    return max(reads, default=0)


#: elements drawn per call for a matrix (even: a float32 draw of an even count leaves the generator
#: where one draw of the whole would, so chunked and whole draws give the same values; tested)
MATRIX_CHUNK = 1 << 20


def _matrix(t: Tensor, rng: np.random.Generator, chunk: int = MATRIX_CHUNK) -> np.ndarray:
    """``normal / sqrt(fan_in)`` drawn a chunk at a time straight into the storage array: a
    152k-token embedding table never exists whole in float32 (2 GB more than its fp16 form)."""
    assert chunk % 2 == 0, "an odd chunk shifts the generator's stream"
    out = np.empty(t.shape, dtype=to_numpy_dtype(t.dtype))
    flat, scale = out.reshape(-1), np.float32(np.sqrt(t.shape[-1]))
    for s in range(0, flat.size, chunk):
        w = rng.standard_normal(min(chunk, flat.size - s), dtype=np.float32)
        w /= scale
        flat[s : s + w.size] = round_to(t.dtype, w, copy=False)
    return out


def _weight(program: Program, t: Tensor, rng: np.random.Generator, consumers: dict[str, list[str]]) -> np.ndarray:
    is_norm_weight = any(program.op(o).kind in _NORMS and program.op(o).inputs[1] == t.name for o in consumers[t.name])
    noise = rng.standard_normal(t.shape, dtype=np.float32)
    return 1 + 0.1 * noise if is_norm_weight else 0.02 * noise


def generate_state(program: Program, seed: int = 0) -> dict[str, np.ndarray]:
    """Values for every weight and root kv cache of ``program``, in storage form."""
    consumers = program.consumers()
    state: dict[str, np.ndarray] = {}
    for t in program.weights():
        rng = _rng(seed, t.name)
        state[t.name] = _matrix(t, rng) if len(t.shape) >= 2 else round_to(t.dtype, _weight(program, t, rng, consumers))
    for t in program.kv_caches():
        arr = np.zeros(t.shape, dtype=np.float32)
        n = _filled(program, t.name)
        arr[:, :, :n, :] = _rng(seed, t.name).standard_normal(t.shape[:2] + (n,) + t.shape[3:], dtype=np.float32)
        state[t.name] = round_to(t.dtype, arr, copy=False)
    return state


def generate_inputs(program: Program, seed: int = 0) -> dict[str, np.ndarray]:
    """Values for every program input, in storage form."""
    fixed = program.meta.get("fixed_inputs", {})
    consumers = program.consumers()
    out: dict[str, np.ndarray] = {}
    for name in program.inputs:
        t = program.tensors[name]
        rng = _rng(seed, "input:" + name)
        if name in fixed:
            out[name] = round_to(t.dtype, np.full(t.shape, fixed[name]))
        elif t.dtype in FLOAT_DTYPES:
            out[name] = round_to(t.dtype, rng.standard_normal(t.shape, dtype=np.float32))
        else:
            tables = [
                program.tensors[program.op(o).inputs[1]] for o in consumers[name] if program.op(o).kind is OpKind.embed
            ]
            high = min((tb.shape[0] for tb in tables), default=2**31 - 1)
            out[name] = round_to(t.dtype, rng.integers(0, high, size=t.shape))
    return out


__all__ = ["generate_state", "generate_inputs"]
