"""Decode-step programs of decoder-only LLMs.

``build_decode_step(config, batch, context)``: one new token per sequence at position
``context`` (the kv caches already hold positions ``0..context-1``; they are sized
``max_ctx = context + 1``). No weight arrays are allocated; values come from
:mod:`ir.weights` or real checkpoints.

Naming (HF module paths without the ``model.`` prefix; the same for every style):

* weights: ``embed_tokens.weight``, ``embed_positions.weight`` (gpt2/opt),
  ``layers.{i}.input_layernorm.{weight,bias}``,
  ``layers.{i}.self_attn.{q,k,v,o}_proj.{weight,bias}``,
  ``layers.{i}.post_attention_layernorm.{weight,bias}``,
  ``layers.{i}.mlp.{gate,up,down}_proj.{weight,bias}`` (plain MLPs have up/down only),
  ``norm.{weight,bias}``, ``lm_head.weight`` (absent when tied: the lm head reads
  ``embed_tokens.weight``).
* kv caches: ``layers.{i}.self_attn.{k,v}_cache`` [batch, kv_heads, context+1, head_dim], and the
  appended versions ``layers.{i}.self_attn.{k,v}_cache@{context}``.
* activations: ``<op name>.out``. Ops: ``embed_tokens``, ``embed_positions``, ``embed`` (add),
  ``layers.{i}.input_layernorm``, ``layers.{i}.self_attn.{q,k,v}_proj``,
  ``layers.{i}.self_attn.{q,k}_rope``, ``layers.{i}.self_attn.{k,v}_append``,
  ``layers.{i}.self_attn.scores``, ``.softmax``, ``.context``, ``.o_proj``,
  ``layers.{i}.attn_residual``, ``layers.{i}.post_attention_layernorm``,
  ``layers.{i}.mlp.{gate,up}_proj``, ``layers.{i}.mlp.act``, ``layers.{i}.mlp.mul``,
  ``layers.{i}.mlp.down_proj``, ``layers.{i}.mlp_residual``, ``norm``, ``lm_head``,
  ``next_token`` (argmax).

Program inputs: ``input_ids`` int32[B] (and ``position_ids`` int32[B] for learned positions,
whose value is given in ``meta["fixed_inputs"]``), or ``hidden_states`` [B, H] when
``embed=False``. Outputs: ``lm_head.out`` (logits) and ``next_token.out``, or the last
residual when ``lm_head=False``.
"""

from __future__ import annotations

from typing import Any

from ir.errors import IRError
from ir.models import ModelConfig
from ir.ops import OpKind
from ir.program import Op, Program
from ir.types import DType, Role, Tensor


class _Builder:
    """Accumulates tensors and ops; activations are named ``<op>.out``."""

    def __init__(self, dtype: DType):
        self.dtype = dtype
        self.tensors: dict[str, Tensor] = {}
        self.ops: list[Op] = []

    def tensor(self, name: str, shape: tuple[int, ...], role: Role, dtype: DType | None = None) -> str:
        if name not in self.tensors:
            self.tensors[name] = Tensor(name=name, shape=shape, dtype=dtype or self.dtype, role=role)
        return name

    def weight(self, name: str, *shape: int) -> str:
        return self.tensor(name, shape, Role.weight)

    def op(
        self,
        name: str,
        kind: OpKind,
        inputs: list[str],
        shape: tuple[int, ...],
        out: str | None = None,
        role: Role = Role.activation,
        dtype: DType | None = None,
        **attrs: Any,
    ) -> str:
        out = out or f"{name}.out"
        self.tensor(out, shape, role, dtype)
        self.ops.append(Op(name=name, kind=kind, inputs=inputs, outputs=[out], attrs=attrs))
        return out


def _norm(b: _Builder, c: ModelConfig, name: str, x: str, batch: int, **ann: Any) -> str:
    h = c.hidden_size
    ins = [x, b.weight(f"{name}.weight", h)]
    if c.norm == "layernorm":
        ins.append(b.weight(f"{name}.bias", h))
    kind = OpKind.layernorm if c.norm == "layernorm" else OpKind.rmsnorm
    return b.op(name, kind, ins, (batch, h), eps=c.norm_eps, **ann)


def _linear(b: _Builder, name: str, x: str, batch: int, n: int, k: int, bias: bool, **ann: Any) -> str:
    ins = [x, b.weight(f"{name}.weight", n, k)]
    if bias:
        ins.append(b.weight(f"{name}.bias", n))
    return b.op(name, OpKind.gemv, ins, (batch, n), **ann)


def _activation(b: _Builder, c: ModelConfig, name: str, x: str, shape: tuple[int, ...], **ann: Any) -> str:
    if c.hidden_act == "silu":
        return b.op(name, OpKind.silu, [x], shape, **ann)
    if c.hidden_act == "relu":
        return b.op(name, OpKind.relu, [x], shape, **ann)
    approx = "tanh" if c.hidden_act == "gelu_new" else "none"
    return b.op(name, OpKind.gelu, [x], shape, approximate=approx, **ann)


def _attention(b: _Builder, c: ModelConfig, i: int, x: str, batch: int, context: int) -> str:
    p, h, hd = f"layers.{i}.self_attn", c.hidden_size, c.head_dim
    heads, kvh = c.num_attention_heads, c.num_key_value_heads
    ann = {"layer": i}
    q = _linear(b, f"{p}.q_proj", x, batch, c.q_size, h, c.qkv_biased, **ann)
    k = _linear(b, f"{p}.k_proj", x, batch, c.kv_size, h, c.qkv_biased, **ann)
    v = _linear(b, f"{p}.v_proj", x, batch, c.kv_size, h, c.qkv_biased, **ann)
    if c.style == "llama":
        q = b.op(
            f"{p}.q_rope",
            OpKind.rope,
            [q],
            (batch, c.q_size),
            heads=heads,
            head_dim=hd,
            position=context,
            theta=c.rope_theta,
            **ann,
        )
        k = b.op(
            f"{p}.k_rope",
            OpKind.rope,
            [k],
            (batch, c.kv_size),
            heads=kvh,
            head_dim=hd,
            position=context,
            theta=c.rope_theta,
            **ann,
        )
    shape = (batch, kvh, context + 1, hd)
    caches = []
    for which, new in (("k", k), ("v", v)):
        root = b.tensor(f"{p}.{which}_cache", shape, Role.kv_cache)
        caches.append(
            b.op(
                f"{p}.{which}_append",
                OpKind.kv_append,
                [root, new],
                shape,
                out=f"{root}@{context}",
                role=Role.kv_cache,
                position=context,
                **ann,
            )
        )
    geo = {"heads": heads, "kv_heads": kvh, "head_dim": hd, "position": context, **ann}
    s = b.op(f"{p}.scores", OpKind.attn_score, [q, caches[0]], (batch, heads, context + 1), **geo)
    s = b.op(f"{p}.softmax", OpKind.softmax, [s], (batch, heads, context + 1), **ann)
    o = b.op(f"{p}.context", OpKind.attn_context, [s, caches[1]], (batch, c.q_size), **geo)
    return _linear(b, f"{p}.o_proj", o, batch, h, c.q_size, c.attention_bias, **ann)


def _mlp(b: _Builder, c: ModelConfig, i: int, x: str, batch: int) -> str:
    p, h, n = f"layers.{i}.mlp", c.hidden_size, c.intermediate_size
    ann = {"layer": i}
    if c.gated_mlp:
        g = _linear(b, f"{p}.gate_proj", x, batch, n, h, c.mlp_bias, **ann)
        u = _linear(b, f"{p}.up_proj", x, batch, n, h, c.mlp_bias, **ann)
        a = _activation(b, c, f"{p}.act", g, (batch, n), **ann)
        a = b.op(f"{p}.mul", OpKind.mul, [a, u], (batch, n), **ann)
    else:
        u = _linear(b, f"{p}.up_proj", x, batch, n, h, c.mlp_bias, **ann)
        a = _activation(b, c, f"{p}.act", u, (batch, n), **ann)
    return _linear(b, f"{p}.down_proj", a, batch, h, n, c.mlp_bias, **ann)


def _layer(b: _Builder, c: ModelConfig, i: int, x: str, batch: int, context: int) -> str:
    y = _norm(b, c, f"layers.{i}.input_layernorm", x, batch, layer=i)
    y = _attention(b, c, i, y, batch, context)
    x = b.op(f"layers.{i}.attn_residual", OpKind.add, [x, y], (batch, c.hidden_size), layer=i)
    y = _norm(b, c, f"layers.{i}.post_attention_layernorm", x, batch, layer=i)
    y = _mlp(b, c, i, y, batch)
    return b.op(f"layers.{i}.mlp_residual", OpKind.add, [x, y], (batch, c.hidden_size), layer=i)


def build_decode_step(
    config: ModelConfig,
    batch: int,
    context: int,
    layers: int | None = None,
    embed: bool = True,
    lm_head: bool = True,
    name: str | None = None,
) -> Program:
    """One decode step: ``batch`` sequences, ``context`` tokens already cached, the first ``layers``."""
    c = config
    n_layers = c.num_hidden_layers if layers is None else layers
    if batch < 1:
        raise IRError(f"build_decode_step: batch: must be >= 1, got {batch}")
    if context < 0:
        raise IRError(f"build_decode_step: context: must be >= 0, got {context}")
    if not 0 <= n_layers <= c.num_hidden_layers:
        raise IRError(f"build_decode_step: layers: {n_layers} outside 0..{c.num_hidden_layers} of {c.name}")
    if c.learned_positions and context >= c.max_position_embeddings:
        raise IRError(
            f"build_decode_step: context: position {context} outside the learned position table "
            f"(max_position_embeddings={c.max_position_embeddings})"
        )
    if c.sliding_window is not None and context + 1 > c.sliding_window:
        raise IRError(
            f"build_decode_step: context: {context + 1} tokens exceed sliding_window={c.sliding_window}, "
            "which is not modelled"
        )
    b, h = _Builder(c.dtype), c.hidden_size
    inputs: list[str] = []
    fixed: dict[str, int] = {}
    if embed:
        ids = b.tensor("input_ids", (batch,), Role.activation, DType.int32)
        inputs.append(ids)
        x = b.op("embed_tokens", OpKind.embed, [ids, b.weight("embed_tokens.weight", c.vocab_size, h)], (batch, h))
        if c.learned_positions:
            pos = b.tensor("position_ids", (batch,), Role.activation, DType.int32)
            inputs.append(pos)
            fixed[pos] = context + c.position_offset
            rows = c.max_position_embeddings + c.position_offset
            pe = b.op("embed_positions", OpKind.embed, [pos, b.weight("embed_positions.weight", rows, h)], (batch, h))
            x = b.op("embed", OpKind.add, [x, pe], (batch, h))
    else:
        x = b.tensor("hidden_states", (batch, h), Role.activation)
        inputs.append(x)
    for i in range(n_layers):
        x = _layer(b, c, i, x, batch, context)
    outputs = [x]
    if lm_head:
        y = _norm(b, c, "norm", x, batch)
        head = "embed_tokens.weight" if c.tie_word_embeddings else "lm_head.weight"
        logits = b.op("lm_head", OpKind.gemv, [y, b.weight(head, c.vocab_size, h)], (batch, c.vocab_size))
        outputs = [logits, b.op("next_token", OpKind.argmax, [logits], (batch,), dtype=DType.int32)]
    suffix = f".l{n_layers}" if n_layers != c.num_hidden_layers else ""
    meta = {
        "model": c.name,
        "style": c.style,
        "batch": batch,
        "context": context,
        "position": context,
        "layers": n_layers,
        "dtype": c.dtype.value,
        "embed": embed,
        "lm_head": lm_head,
        "fixed_inputs": fixed,
    }
    return Program(
        name=name or f"{c.name}.decode.b{batch}.c{context}{suffix}",
        tensors=b.tensors,
        ops=b.ops,
        inputs=inputs,
        outputs=outputs,
        meta=meta,
    )
