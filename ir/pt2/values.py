"""What the importer knows about each value of the exported graph.

* :class:`Const` — a numpy array known at import time (weights, buffers, folded constants,
  the step's position); ``fqn`` names the weight it is (``transposed``: it is that weight's .T).
* :class:`Act` — a linear form over one pimsat tensor ``src``: element ``e`` of the torch value
  is ``sum_k coef_k[e] * src.flat[idx_k[e]]``. Layout ops (view, transpose, slice, cat, expand,
  split) move the index maps, ``neg`` and products with constants move the coefficients, so a
  reshape costs nothing and RoPE's ``x*cos + rotate_half(x)*sin`` is seen whole. A plain value is
  one term with unit coefficients and the identity map.
* :class:`Gemv` — a linear layer not emitted yet (``Act.src`` may be one): a consumer that
  reads a contiguous column range of it gets a GEMV of those weight rows (GPT-2's fused c_attn
  split into its q, k and v parts).
* :class:`Cache` — a KV cache (a graph input of the past keys or values, ``past``; or a version
  after an append) with an index map over its storage [B, kv_heads, max_ctx, head_dim].
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class Const:
    arr: np.ndarray
    fqn: str | None = None
    transposed: bool = False
    position: bool = False  # the step's position (a graph input fixed at import)
    input_name: str | None = None


@dataclass
class Gemv:
    """``x @ W.T + b`` (``W`` [N, K] after any transpose) waiting for its consumers."""

    x: str  # pimsat tensor [B, K]
    weight: str  # fqn
    bias: str | None
    n: int
    k: int
    batch: int
    module: str
    layer: int | None
    transposed: bool  # the stored weight is [K, N] (Conv1D, addmm/mm): pimsat holds its transpose
    parts: dict[tuple[int, int], str] = field(default_factory=dict)  # column range -> emitted tensor


@dataclass
class Act:
    src: str | Gemv  # a pimsat tensor name, or a GEMV not emitted yet
    terms: list[tuple[np.ndarray, np.ndarray | None]]  # (index map, coefficients or None = 1)
    dtype: int  # torch ScalarType of the value

    @property
    def shape(self) -> tuple[int, ...]:
        return self.terms[0][0].shape

    @property
    def plain(self) -> bool:
        return len(self.terms) == 1 and (self.terms[0][1] is None or bool(np.all(self.terms[0][1] == 1)))

    def map(self, f) -> Act:
        """Apply a layout op ``f`` (a function of one array) to every index map and coefficient."""
        out = []
        for idx, coef in self.terms:
            c = None if coef is None else f(np.broadcast_to(coef, idx.shape))
            out.append((f(idx), c))
        return Act(self.src, out, self.dtype)

    def scaled(self, c: np.ndarray) -> Act:
        terms = []
        for idx, coef in self.terms:
            base = np.ones(idx.shape) if coef is None else coef
            terms.append((np.broadcast_to(idx, np.broadcast_shapes(idx.shape, np.shape(c))), base * c))
        return Act(self.src, terms, self.dtype)


@dataclass
class Cache:
    root: str  # pimsat kv-cache tensor (the graph input's name)
    version: str | None  # pimsat tensor after this step's append (None: the past, not appended)
    idx: np.ndarray  # index map over the storage [B, kv_heads, max_ctx, head_dim]
    storage: tuple[int, int, int, int]
    dtype: int
    scale: float = 1.0  # a uniform factor (core ATen's SDPA scales K by sqrt(scale))

    def map(self, f) -> Cache:
        return Cache(self.root, self.version, f(self.idx), self.storage, self.dtype, self.scale)


def identity(shape: tuple[int, ...]) -> np.ndarray:
    return np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)


__all__ = ["Act", "Cache", "Const", "Gemv", "identity"]
