"""The closed set of op kinds and their shape rules.

Every kind has an :class:`OpSpec`: named operands (``x``, ``weight``, ...), the attributes it
takes, and a rule that infers the output shapes/dtypes/roles from the operand tensors. The rule
raises :class:`~ir.errors.IRError` naming op, field and problem. Numerics live in
:mod:`ir.reference`; this module is only about shapes, dtypes and roles.

Conventions (B = batch):

=============  ==========================================  ==================================
kind           operands                                    output
=============  ==========================================  ==================================
embed          ids int32[B], table W[V, H]                 [B, H]          out = table[ids]
layernorm      x[B, H], weight[H], bias[H]                 [B, H]          attrs: eps
rmsnorm        x[B, H], weight[H]                          [B, H]          attrs: eps
gemv           x[B, K], weight W[N, K] (, bias[N])         [B, N]          x @ W.T (+ bias)
rope           x[B, heads*head_dim]                        same            attrs: heads, head_dim,
                                                                           position, theta
kv_append      cache KV[B, kv_heads, max_ctx, head_dim],   KV (new version, role kv_cache,
               new[B, kv_heads*head_dim]                   named ``<cache>@<position>``)
attn_score     q[B, heads*head_dim], k_cache KV            [B, heads, position+1]
softmax        x[..., L]                                   same (over the last axis)
attn_context   probs[B, heads, position+1], v_cache KV     [B, heads*head_dim]
gelu/relu/silu x                                           same            gelu attrs: approximate
mul/add        a, b (same shape)                           same
argmax         x[..., V]                                   int32[...]
=============  ==========================================  ==================================

attn_score/attn_context attrs: heads, kv_heads, head_dim, position. Head ``h`` reads kv head
``h // (heads // kv_heads)`` (GQA); positions ``0..position`` inclusive are attended.
Every op may also carry the annotation attr ``layer`` (int, the decoder layer it belongs to).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from ir.errors import IRError
from ir.types import FLOAT_DTYPES, DType, Role, Tensor


class OpKind(str, Enum):
    embed = "embed"
    layernorm = "layernorm"
    rmsnorm = "rmsnorm"
    gemv = "gemv"
    rope = "rope"
    kv_append = "kv_append"
    attn_score = "attn_score"
    softmax = "softmax"
    attn_context = "attn_context"
    gelu = "gelu"
    relu = "relu"
    silu = "silu"
    mul = "mul"
    add = "add"
    argmax = "argmax"

    def __str__(self) -> str:
        return self.value


#: Ops that may run in memory: they stream a resident operand (weight or kv cache).
PIM_CAPABLE = frozenset({OpKind.gemv, OpKind.attn_score, OpKind.attn_context})
#: Index of the resident operand of each PIM-capable op.
RESIDENT_OPERAND = {OpKind.gemv: 1, OpKind.attn_score: 1, OpKind.attn_context: 1}
ELEMENTWISE = frozenset({OpKind.gelu, OpKind.relu, OpKind.silu, OpKind.mul, OpKind.add})
#: Attributes any op may carry as annotations.
COMMON_ATTRS = frozenset({"layer"})


@dataclass(frozen=True)
class OutSpec:
    """Inferred output: dtype None means 'any float dtype'."""

    shape: tuple[int, ...]
    dtype: DType | None
    role: Role = Role.activation


@dataclass(frozen=True)
class Attr:
    kind: type  # int, float or str
    default: Any = None  # None: required
    minimum: float | None = None
    choices: tuple[str, ...] = ()


class Ctx:
    """Error reporting and attribute access for one op during a rule."""

    def __init__(self, name: str, kind: OpKind, operands: Sequence[str], inputs: Sequence[Tensor], attrs):
        self.name, self.kind, self.operands, self.inputs, self.attrs = name, kind, operands, inputs, attrs

    def fail(self, field: str, problem: str) -> IRError:
        return IRError(f"op '{self.name}' ({self.kind.value}): {field}: {problem}")

    def where(self, i: int) -> str:
        return f"inputs[{i}] ({self.operands[i]}) '{self.inputs[i].name}'"

    def attr(self, key: str):
        return self.attrs[key]

    def role(self, i: int, role: Role) -> Tensor:
        t = self.inputs[i]
        if t.role is not role:
            raise self.fail(self.where(i), f"role is {t.role.value}, expected {role.value}")
        return t

    def floating(self, i: int, ndim: int | None = None, role: Role = Role.activation) -> Tensor:
        t = self.role(i, role)
        if t.dtype not in FLOAT_DTYPES:
            raise self.fail(self.where(i), f"dtype is {t.dtype.value}, expected a float dtype")
        if ndim is not None and len(t.shape) != ndim:
            raise self.fail(self.where(i), f"shape {t.shape} has rank {len(t.shape)}, expected rank {ndim}")
        return t

    def shape_is(self, i: int, expected: tuple[int, ...], meaning: str) -> None:
        if self.inputs[i].shape != tuple(expected):
            raise self.fail(self.where(i), f"shape {self.inputs[i].shape}, expected {tuple(expected)} ({meaning})")


@dataclass(frozen=True)
class OpSpec:
    operands: tuple[str, ...]
    rule: Callable[[Ctx], list[OutSpec]]
    attrs: Mapping[str, Attr] = field(default_factory=dict)
    optional: int = 0  # number of trailing operands that may be omitted


def _embed(c: Ctx) -> list[OutSpec]:
    ids = c.role(0, Role.activation)
    if ids.dtype is not DType.int32:
        raise c.fail(c.where(0), f"dtype is {ids.dtype.value}, expected int32 token ids")
    table = c.floating(1, 2, Role.weight)
    return [OutSpec(ids.shape + (table.shape[1],), None)]


def _norm(c: Ctx) -> list[OutSpec]:
    x = c.floating(0)
    for i in range(1, len(c.inputs)):
        c.floating(i, 1, Role.weight)
        c.shape_is(i, (x.shape[-1],), "hidden size of x")
    return [OutSpec(x.shape, None)]


def _gemv(c: Ctx) -> list[OutSpec]:
    x = c.floating(0, 2)
    w = c.floating(1, 2, Role.weight)
    if w.shape[1] != x.shape[1]:
        raise c.fail(c.where(1), f"shape {w.shape} is [N, K] with K={w.shape[1]}, but x has K={x.shape[1]}")
    if len(c.inputs) == 3:
        c.floating(2, 1, Role.weight)
        c.shape_is(2, (w.shape[0],), "N of weight")
    return [OutSpec((x.shape[0], w.shape[0]), None)]


def _heads(c: Ctx) -> tuple[int, int, int, int]:
    heads, kv_heads, head_dim, pos = (c.attr(k) for k in ("heads", "kv_heads", "head_dim", "position"))
    if heads % kv_heads:
        raise c.fail("attrs.kv_heads", f"heads={heads} is not a multiple of kv_heads={kv_heads}")
    return heads, kv_heads, head_dim, pos


def _cache(c: Ctx, i: int, batch: int, kv_heads: int, head_dim: int, pos: int) -> Tensor:
    cache = c.floating(i, 4, Role.kv_cache)
    b, kvh, max_ctx, hd = cache.shape
    if (b, kvh, hd) != (batch, kv_heads, head_dim):
        raise c.fail(
            c.where(i),
            f"shape {cache.shape}, expected ({batch}, {kv_heads}, max_ctx, {head_dim}) "
            "[batch, kv_heads, max_ctx, head_dim]",
        )
    if pos >= max_ctx:
        raise c.fail("attrs.position", f"position {pos} is outside the cache (max_ctx={max_ctx})")
    return cache


def _rope(c: Ctx) -> list[OutSpec]:
    x = c.floating(0, 2)
    heads, head_dim = c.attr("heads"), c.attr("head_dim")
    if head_dim % 2:
        raise c.fail("attrs.head_dim", f"head_dim {head_dim} must be even for rotate-half RoPE")
    c.shape_is(0, (x.shape[0], heads * head_dim), "[B, heads*head_dim]")
    return [OutSpec(x.shape, None)]


def _kv_append(c: Ctx) -> list[OutSpec]:
    cache = c.floating(0, 4, Role.kv_cache)
    b, kvh, _, hd = cache.shape
    _cache(c, 0, b, kvh, hd, c.attr("position"))
    c.floating(1, 2)
    c.shape_is(1, (b, kvh * hd), "[B, kv_heads*head_dim] of the cache")
    return [OutSpec(cache.shape, cache.dtype, Role.kv_cache)]


def _attn_score(c: Ctx) -> list[OutSpec]:
    heads, kv_heads, head_dim, pos = _heads(c)
    q = c.floating(0, 2)
    c.shape_is(0, (q.shape[0], heads * head_dim), "[B, heads*head_dim]")
    _cache(c, 1, q.shape[0], kv_heads, head_dim, pos)
    return [OutSpec((q.shape[0], heads, pos + 1), None)]


def _attn_context(c: Ctx) -> list[OutSpec]:
    heads, kv_heads, head_dim, pos = _heads(c)
    p = c.floating(0, 3)
    c.shape_is(0, (p.shape[0], heads, pos + 1), "[B, heads, position+1]")
    _cache(c, 1, p.shape[0], kv_heads, head_dim, pos)
    return [OutSpec((p.shape[0], heads * head_dim), None)]


def _unary(c: Ctx) -> list[OutSpec]:
    return [OutSpec(c.floating(0).shape, None)]


def _binary(c: Ctx) -> list[OutSpec]:
    a, _ = c.floating(0), c.floating(1)
    c.shape_is(1, a.shape, "same shape as a; no broadcasting")
    return [OutSpec(a.shape, None)]


def _argmax(c: Ctx) -> list[OutSpec]:
    x = c.floating(0)
    if len(x.shape) < 2:
        raise c.fail(c.where(0), f"shape {x.shape}: argmax needs rank >= 2 ([..., V])")
    return [OutSpec(x.shape[:-1], DType.int32)]


_EPS = Attr(float, 1e-5, minimum=0.0)
_HEADS = {
    "heads": Attr(int, minimum=1),
    "kv_heads": Attr(int, minimum=1),
    "head_dim": Attr(int, minimum=1),
    "position": Attr(int, minimum=0),
}

SPECS: dict[OpKind, OpSpec] = {
    OpKind.embed: OpSpec(("ids", "table"), _embed),
    OpKind.layernorm: OpSpec(("x", "weight", "bias"), _norm, {"eps": _EPS}),
    OpKind.rmsnorm: OpSpec(("x", "weight"), _norm, {"eps": _EPS}),
    OpKind.gemv: OpSpec(("x", "weight", "bias"), _gemv, optional=1),
    OpKind.rope: OpSpec(
        ("x",),
        _rope,
        {
            "heads": Attr(int, minimum=1),
            "head_dim": Attr(int, minimum=2),
            "position": Attr(int, minimum=0),
            "theta": Attr(float, 10000.0, minimum=0.0),
        },
    ),
    OpKind.kv_append: OpSpec(("cache", "new"), _kv_append, {"position": Attr(int, minimum=0)}),
    OpKind.attn_score: OpSpec(("q", "k_cache"), _attn_score, _HEADS),
    OpKind.softmax: OpSpec(("x",), _unary),
    OpKind.attn_context: OpSpec(("probs", "v_cache"), _attn_context, _HEADS),
    OpKind.gelu: OpSpec(("x",), _unary, {"approximate": Attr(str, "tanh", choices=("tanh", "none"))}),
    OpKind.relu: OpSpec(("x",), _unary),
    OpKind.silu: OpSpec(("x",), _unary),
    OpKind.mul: OpSpec(("a", "b"), _binary),
    OpKind.add: OpSpec(("a", "b"), _binary),
    OpKind.argmax: OpSpec(("x",), _argmax),
}


def _check_attrs(name: str, kind: OpKind, attrs: Mapping[str, Any]) -> dict[str, Any]:
    spec = SPECS[kind]
    out: dict[str, Any] = {}
    for key in attrs:
        if key not in spec.attrs and key not in COMMON_ATTRS:
            known = sorted(set(spec.attrs) | COMMON_ATTRS)
            raise IRError(f"op '{name}' ({kind.value}): attrs.{key}: unknown attribute (known: {', '.join(known)})")
    for key, a in spec.attrs.items():
        where = f"op '{name}' ({kind.value}): attrs.{key}"
        if key not in attrs:
            if a.default is None:
                raise IRError(f"{where}: required attribute is missing")
            out[key] = a.default
            continue
        v = attrs[key]
        ok = isinstance(v, a.kind) if a.kind is not float else isinstance(v, (int, float))
        if isinstance(v, bool) or not ok:
            raise IRError(f"{where}: {v!r} is not of type {a.kind.__name__}")
        if a.minimum is not None and v < a.minimum:
            raise IRError(f"{where}: {v!r} is below the minimum {a.minimum!r}")
        if a.choices and v not in a.choices:
            raise IRError(f"{where}: {v!r} is not one of {', '.join(a.choices)}")
        out[key] = float(v) if a.kind is float else v
    if "layer" in attrs and (isinstance(attrs["layer"], bool) or not isinstance(attrs["layer"], int)):
        raise IRError(f"op '{name}' ({kind.value}): attrs.layer: {attrs['layer']!r} is not an int")
    return out


def resolved_attrs(name: str, kind: OpKind | str, attrs: Mapping[str, Any]) -> dict[str, Any]:
    """Validated attributes of an op with defaults filled in (annotations dropped)."""
    return _check_attrs(name, OpKind(kind), attrs)


def infer_outputs(name: str, kind: OpKind | str, inputs: Sequence[Tensor], attrs: Mapping[str, Any]) -> list[OutSpec]:
    """Check operand count, attributes and operand tensors; return the expected outputs."""
    kind = OpKind(kind)
    spec = SPECS[kind]
    n = len(inputs)
    if not len(spec.operands) - spec.optional <= n <= len(spec.operands):
        want = " ".join(spec.operands)
        raise IRError(
            f"op '{name}' ({kind.value}): inputs: got {n} operands, expected ({want})"
            + (f" with the last {spec.optional} optional" if spec.optional else "")
        )
    full = _check_attrs(name, kind, attrs)
    return spec.rule(Ctx(name, kind, spec.operands, list(inputs), full))


def check_op(
    name: str, kind: OpKind | str, inputs: Sequence[Tensor], outputs: Sequence[Tensor], attrs: Mapping[str, Any]
) -> None:
    """Raise IRError unless ``outputs`` are exactly what the rule of ``kind`` infers."""
    kind = OpKind(kind)
    expected = infer_outputs(name, kind, inputs, attrs)
    if len(outputs) != len(expected):
        raise IRError(f"op '{name}' ({kind.value}): outputs: got {len(outputs)} outputs, expected {len(expected)}")
    for i, (t, e) in enumerate(zip(outputs, expected)):
        where = f"op '{name}' ({kind.value}): outputs[{i}] '{t.name}'"
        if t.shape != e.shape:
            raise IRError(f"{where}: shape {t.shape}, expected {e.shape}")
        if e.dtype is None and t.dtype not in FLOAT_DTYPES:
            raise IRError(f"{where}: dtype {t.dtype.value}, expected a float dtype")
        if e.dtype is not None and t.dtype is not e.dtype:
            raise IRError(f"{where}: dtype {t.dtype.value}, expected {e.dtype.value}")
        if t.role is not e.role:
            raise IRError(f"{where}: role {t.role.value}, expected {e.role.value}")
