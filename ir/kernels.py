"""Single-kernel programs for benchmark instances (one GEMV; one attention step)."""

from __future__ import annotations

from ir.errors import IRError
from ir.ops import OpKind
from ir.program import Op, Program
from ir.types import DType, Role, Tensor


def gemv_program(n: int, k: int, batch: int = 1, dtype: DType | str = "fp16", bias: bool = False) -> Program:
    """``y[B, n] = x[B, k] @ W[n, k].T (+ b)``. Tensors: ``x``, ``gemv.weight``, ``gemv.bias``, ``gemv.out``."""
    d = DType(dtype)
    ts = [
        Tensor(name="x", shape=(batch, k), dtype=d, role=Role.activation),
        Tensor(name="gemv.weight", shape=(n, k), dtype=d, role=Role.weight),
        Tensor(name="gemv.out", shape=(batch, n), dtype=d, role=Role.activation),
    ]
    ins = ["x", "gemv.weight"]
    if bias:
        ts.append(Tensor(name="gemv.bias", shape=(n,), dtype=d, role=Role.weight))
        ins.append("gemv.bias")
    op = Op(name="gemv", kind=OpKind.gemv, inputs=ins, outputs=["gemv.out"])
    return Program(
        name=f"gemv.{n}x{k}.b{batch}.{d.value}" + (".bias" if bias else ""),
        tensors=ts,
        ops=[op],
        inputs=["x"],
        outputs=["gemv.out"],
        meta={"kernel": "gemv", "n": n, "k": k, "batch": batch, "dtype": d.value, "bias": bias},
    )


def attention_program(
    heads: int, kv_heads: int, head_dim: int, context: int, batch: int = 1, dtype: DType | str = "fp16"
) -> Program:
    """One attention step at position ``context``: append k and v, scores, softmax, context.

    Inputs ``q`` [B, heads*head_dim], ``k``/``v`` [B, kv_heads*head_dim]; state ``k_cache``/``v_cache``
    [B, kv_heads, context+1, head_dim] holding positions < context; output ``context.out``.
    """
    if context < 0:
        raise IRError(f"attention_program: context: must be >= 0, got {context}")
    d = DType(dtype)
    cache = (batch, kv_heads, context + 1, head_dim)

    def t(name, shape, role=Role.activation):
        return Tensor(name=name, shape=shape, dtype=d, role=role)

    ts = [
        t("q", (batch, heads * head_dim)),
        t("k", (batch, kv_heads * head_dim)),
        t("v", (batch, kv_heads * head_dim)),
        t("k_cache", cache, Role.kv_cache),
        t("v_cache", cache, Role.kv_cache),
        t(f"k_cache@{context}", cache, Role.kv_cache),
        t(f"v_cache@{context}", cache, Role.kv_cache),
        t("scores.out", (batch, heads, context + 1)),
        t("softmax.out", (batch, heads, context + 1)),
        t("context.out", (batch, heads * head_dim)),
    ]
    geo = {"heads": heads, "kv_heads": kv_heads, "head_dim": head_dim, "position": context}
    ops = [
        Op(
            name="k_append",
            kind=OpKind.kv_append,
            inputs=["k_cache", "k"],
            outputs=[f"k_cache@{context}"],
            attrs={"position": context},
        ),
        Op(
            name="v_append",
            kind=OpKind.kv_append,
            inputs=["v_cache", "v"],
            outputs=[f"v_cache@{context}"],
            attrs={"position": context},
        ),
        Op(
            name="scores", kind=OpKind.attn_score, inputs=["q", f"k_cache@{context}"], outputs=["scores.out"], attrs=geo
        ),
        Op(name="softmax", kind=OpKind.softmax, inputs=["scores.out"], outputs=["softmax.out"]),
        Op(
            name="context",
            kind=OpKind.attn_context,
            inputs=["softmax.out", f"v_cache@{context}"],
            outputs=["context.out"],
            attrs=geo,
        ),
    ]
    return Program(
        name=f"attention.h{heads}.kv{kv_heads}.d{head_dim}.c{context}.b{batch}.{d.value}",
        tensors=ts,
        ops=ops,
        inputs=["q", "k", "v"],
        outputs=["context.out"],
        meta={"kernel": "attention", "batch": batch, "context": context, "position": context, **geo, "dtype": d.value},
    )
