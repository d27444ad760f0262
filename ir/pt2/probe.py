"""Recognising what a group of nodes computes: norms and activations by probing, RoPE by its
linear form.

A module whose nodes are a chain of elementwise ops and reductions (an RMSNorm written out, GPT-2's
``NewGELUActivation``) is evaluated in float64 on random data and compared with each pimsat op it
could be; the first that agrees to 1e-7 is taken, so a spelling of RMSNorm pimsat has never seen
is still recognised, and a module that only looks like one (another eps, a missing weight, an
offset ``1 + weight``) is refused rather than mis-compiled.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ir.ops import OpKind

_erf = np.vectorize(math.erf, otypes=[np.float64])
PROBE_RTOL = 1e-7


@dataclass(frozen=True)
class Candidate:
    kind: OpKind
    weights: tuple[str, ...]  # fqns of the op's weight operands, in operand order
    attrs: dict
    f: Callable[[np.ndarray], np.ndarray]


def candidates(x_len: int, params: dict[str, np.ndarray], eps_values: list[float]) -> list[Candidate]:
    """Every pimsat op that a module over a [B, x_len] input could compute."""
    vecs = {k: v.astype(np.float64) for k, v in params.items() if v.shape == (x_len,)}
    out = [
        Candidate(OpKind.gelu, (), {"approximate": "tanh"}, _gelu_tanh),
        Candidate(OpKind.gelu, (), {"approximate": "none"}, lambda x: 0.5 * x * (1 + _erf(x / math.sqrt(2)))),
        Candidate(OpKind.silu, (), {}, lambda x: x / (1 + np.exp(-x))),
        Candidate(OpKind.relu, (), {}, lambda x: np.maximum(x, 0)),
    ]
    for eps in eps_values:
        for w, wv in vecs.items():
            out.append(Candidate(OpKind.rmsnorm, (w,), {"eps": eps}, _rms(wv, eps)))
            for b, bv in vecs.items():
                if b != w:
                    out.append(Candidate(OpKind.layernorm, (w, b), {"eps": eps}, _ln(wv, bv, eps)))
    return out


def _gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


def _rms(w, eps):
    return lambda x: x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w


def _ln(w, b, eps):
    def f(x):
        m = x.mean(-1, keepdims=True)
        return (x - m) / np.sqrt(((x - m) ** 2).mean(-1, keepdims=True) + eps) * w + b

    return f


def agrees(got: np.ndarray, want: np.ndarray) -> bool:
    return got.shape == want.shape and bool(np.all(np.abs(got - want) <= PROBE_RTOL * (1 + np.abs(want))))


def rope_terms(batch: int, heads: int, head_dim: int, cos: np.ndarray, sin: np.ndarray):
    """The linear form of pimsat's rope over x [B, heads*head_dim]: (index map, coefficients) of
    ``x*cos`` and of ``rotate_half(x)*sin`` (HF rotate-half: first half -x2*sin, second x1*sin)."""
    n, half = heads * head_dim, head_dim // 2
    base = np.arange(batch * n).reshape(batch, heads, head_dim)
    rot = np.concatenate([base[..., half:], base[..., :half]], axis=-1)
    sign = np.concatenate([-np.ones(half), np.ones(half)])
    shape = (batch, heads, head_dim)
    c = np.broadcast_to(cos.astype(np.float64), shape)
    s = np.broadcast_to(sin.astype(np.float64) * sign, shape)
    return (base.reshape(batch, n), c.reshape(batch, n)), (rot.reshape(batch, n), s.reshape(batch, n))


def theta_of(inv_freq: np.ndarray, head_dim: int, dtype_eps: float, tiny: float = 0.0) -> float | None:
    """The base theta with ``inv_freq[i] == theta ** (-2i / head_dim)`` (within the buffer's
    precision: relative ``dtype_eps``, absolute ``tiny`` for subnormals), or None when no theta
    gives that buffer (rope scaling, another layout)."""
    inv = inv_freq.astype(np.float64)
    if inv.shape != (head_dim // 2,) or inv[0] != 1 or np.any(inv <= 0):
        return None
    i = np.arange(1, head_dim // 2)
    normal = inv[1:] > 1024 * tiny
    if not np.any(normal):
        return None
    fitted = float(np.exp(np.mean((-np.log(inv[1:]) * head_dim / (2 * i))[normal])))
    for theta in [float(f"{fitted:.{d}g}") for d in range(1, 8)] + [fitted]:  # the roundest that fits
        want = theta ** (-2 * np.arange(head_dim // 2) / head_dim)
        if np.all(np.abs(inv - want) <= 2 * dtype_eps * want + tiny):
            return theta
    return None


__all__ = ["Candidate", "agrees", "candidates", "rope_terms", "theta_of"]
