"""What each exported op does to the importer's values (see :mod:`ir.pt2.importer`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ir.ops import OpKind
from ir.pt2 import aten
from ir.pt2.attention import ATTENTION
from ir.pt2.graph import Node, Ref
from ir.pt2.probe import agrees, candidates
from ir.pt2.values import Act, Cache, Const, Gemv, identity
from ir.types import DType, Role


def _flat(values) -> list[Any]:
    out = []
    for v in values:
        out += _flat(v) if isinstance(v, list) else [v]
    return out


def _raw(v: Any) -> Any:
    if isinstance(v, Const):
        return v.arr
    if isinstance(v, list):
        return [_raw(x) for x in v]
    return v


def _refs(args) -> list[str]:
    return [a.name for a in _flat(list(args.values())) if isinstance(a, Ref)]


_TRANSPOSES = {"aten.t.default", "aten.permute.default", "aten.transpose.int", "aten.numpy_T.default"}


def fold(imp, n: Node, args: dict[str, Any]) -> None:
    """Evaluate a node whose operands are all known now."""
    if n.target not in aten.VALUE:
        raise imp.refuse("op not supported")
    with np.errstate(all="ignore"):
        result = aten.evaluate(n.target, {k: _raw(v) for k, v in args.items()})
    src = args.get("self")
    keep = isinstance(src, Const) and src.fqn is not None
    # integers computed from the step's position stay "position" (OPT's ids + 2 index its table)
    pos = next((v for v in _flat(list(args.values())) if isinstance(v, Const) and v.position), None)
    for name, arr in zip(n.outputs, result if isinstance(result, list) else [result]):
        if name is None:
            continue
        c = Const(np.asarray(arr))
        if pos is not None and np.issubdtype(c.arr.dtype, np.integer) and c.arr.ndim in (1, 2):
            c = Const(c.arr, position=True, input_name=pos.input_name)
        if keep and n.target in _TRANSPOSES and src.arr.ndim == 2:
            c = Const(c.arr, fqn=src.fqn, transposed=not src.transposed)
        elif keep and (n.target in aten.CASTS or n.target in ("aten.alias.default", "aten.detach.default")):
            c = Const(c.arr, fqn=src.fqn, transposed=src.transposed)
        imp.env[name] = c


def handle(imp, n: Node) -> None:
    if n.target in aten.IGNORED:
        return
    args = imp.args(n)
    live = any(isinstance(v, (Act, Cache)) for v in _flat(list(args.values())))
    if not live and not (n.target == "aten.embedding.default" and getattr(args.get("indices"), "position", False)):
        fold(imp, n, args)
        return
    h = HANDLERS.get(n.target)
    if h is None and n.target in aten.LAYOUT:
        h = _layout
    if h is None:
        raise imp.refuse("op not supported on an activation")
    h(imp, n, args)


def _layout(imp, n: Node, args) -> None:
    key = "input" if n.target == "aten.dropout.default" else "self"
    if n.target == "aten.dropout.default" and args.get("train") and args.get("p"):
        raise imp.refuse("dropout in training mode")
    v, rest = args[key], {k: _raw(a) for k, a in args.items() if k != key}
    if not isinstance(v, (Act, Cache)):
        raise imp.refuse("layout op on a mix of activations and constants")
    f = lambda arr: aten.LAYOUT[n.target]({**rest, key: arr})  # noqa: E731
    if len(n.outputs) == 1:
        imp.set(n, v.map(f))
        return
    if not isinstance(v, Act):
        raise imp.refuse("split of a KV cache")
    parts = [(f(idx), None if c is None else f(np.broadcast_to(c, idx.shape))) for idx, c in v.terms]
    for j, name in enumerate(n.outputs):
        if name is not None:
            imp.env[name] = Act(v.src, [(p[0][j], None if p[1] is None else p[1][j]) for p in parts], v.dtype)


def _cast(imp, n: Node, args) -> None:
    v = args["self"]
    dt = imp.dtype(n.outputs[0], v.dtype)
    imp.set(
        n, Act(v.src, v.terms, dt) if isinstance(v, Act) else Cache(v.root, v.version, v.idx, v.storage, dt, v.scale)
    )


def _weight_const(imp, v: Any, what: str) -> Const:
    if not isinstance(v, Const) or v.fqn is None:
        raise imp.refuse(f"{what} is not a weight of the archive (computed weights are not supported)")
    return v


def _gemv(imp, n: Node, x: Act, w: Const, bias: Any, weight_is_nk: bool) -> None:
    """``x @ W.T + b`` with pimsat's W [N, K] = w.arr if weight_is_nk else w.arr.T."""
    if not isinstance(x, Act):
        raise imp.refuse("the input of a linear layer is not an activation")
    nk = w.arr if weight_is_nk else w.arr.T
    if nk.ndim != 2 or x.shape[-1] != nk.shape[1]:
        raise imp.refuse(f"weight {list(w.arr.shape)} does not fit an input of {list(x.shape)}")
    b = None
    if bias is not None:
        b = _weight_const(imp, bias, "the bias").fqn
    xn = imp.materialize(x, "the input of a linear layer")
    # pimsat's weight is the archive tensor (transposed=False) or its transpose
    g = Gemv(
        xn, w.fqn, b, nk.shape[0], nk.shape[1], x.shape[0], n.module, n.layer, transposed=weight_is_nk == w.transposed
    )
    imp.set(n, Act(g, [(identity(x.shape[:-1] + (nk.shape[0],)), None)], imp.dtype(n.outputs[0])))


def _linear(imp, n, args):
    _gemv(imp, n, args["input"], _weight_const(imp, args["weight"], "the weight"), args.get("bias"), True)


def _addmm(imp, n, args):
    if args.get("beta", 1) != 1 or args.get("alpha", 1) != 1:
        raise imp.refuse("addmm with beta or alpha other than 1")
    _gemv(imp, n, args["mat1"], _weight_const(imp, args["mat2"], "mat2"), args["self"], False)


def _mm(imp, n, args):
    _gemv(imp, n, args["self"], _weight_const(imp, args["mat2"], "mat2"), None, False)


def _embedding(imp, n, args):
    w = _weight_const(imp, args["weight"], "the embedding table")
    if w.transposed or w.arr.ndim != 2:
        raise imp.refuse("an embedding table that is not a stored [V, H] weight")
    ind = args["indices"]
    if isinstance(ind, Const) and ind.position:
        values = np.unique(ind.arr)
        if values.size != 1 or ind.arr.ndim not in (1, 2) or (ind.arr.ndim == 2 and ind.arr.shape[1] != 1):
            raise imp.refuse(f"position indices {ind.arr.tolist()}: one position per sequence expected")
        # the graph's position input, fixed at the row it reads (position + offset)
        ids = imp.add_tensor(ind.input_name, (ind.arr.shape[0],), Role.activation, DType.int32)
        imp.inputs[ids] = ind.input_name
        imp.fixed[ids] = int(values[0])
        shape = ind.arr.shape
    else:
        ids, shape = imp.materialize(ind, "token ids"), ind.shape
    table = imp.weight(w.fqn, w.arr)
    out = imp.emit(
        n.module or "embed", OpKind.embed, [ids, table], (shape[0], w.arr.shape[1]), imp.tensors[table].dtype
    )
    imp.set(n, imp.act_of(out, tuple(shape) + (w.arr.shape[1],), imp.dtype(n.outputs[0])))


def _binary(imp, n: Node, kind: OpKind, a: Act, b: Act) -> None:
    if a.shape != b.shape:
        raise imp.refuse(f"{kind.value} of shapes {list(a.shape)} and {list(b.shape)}: broadcasting has no pimsat op")
    xa, xb = imp.materialize(a, "operand"), imp.materialize(b, "operand")
    t = imp.tensors[xa]
    out = imp.emit(f"{n.module}.{kind.value}", kind, [xa, xb], t.shape, t.dtype)
    imp.set(n, imp.act_of(out, a.shape, imp.dtype(n.outputs[0])))


def _merge(a: Act, b: Act, sign: float) -> Act:
    terms = list(a.terms) + [(i, -np.ones(i.shape) if c is None else -c) if sign < 0 else (i, c) for i, c in b.terms]
    return Act(a.src, terms, a.dtype)


def _scalar(v: Any) -> np.ndarray | None:
    if isinstance(v, Const) and np.issubdtype(v.arr.dtype, np.number):
        return v.arr.astype(np.float64)
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return np.float64(v)
    return None


def _add_sub(imp, n, args, sign: float):
    a, b = args["self"], args["other"]
    if args.get("alpha", 1) != 1:
        raise imp.refuse("add/sub with alpha other than 1")
    if isinstance(a, Act) and isinstance(b, Act):
        if (a.src is b.src or (isinstance(a.src, str) and a.src == b.src)) and a.shape == b.shape:
            imp.set(n, _merge(a, b, sign))
        elif sign > 0:
            _binary(imp, n, OpKind.add, a, b)
        else:
            raise imp.refuse("subtracting one activation from another has no pimsat op")
        return
    act, c = (a, b) if isinstance(a, Act) else (b, a)
    k = _scalar(c)
    if isinstance(act, Act) and k is not None and not np.any(k):
        imp.set(n, act)
        return
    raise imp.refuse("adding a constant to an activation has no pimsat op")


def _mul(imp, n, args):
    a, b = args["self"], args["other"]
    if isinstance(a, Act) and isinstance(b, Act):
        _binary(imp, n, OpKind.mul, a, b)
        return
    live, c = (a, b) if isinstance(a, (Act, Cache)) else (b, a)
    k = _scalar(c)
    if isinstance(live, Cache) and k is not None and np.unique(k).size == 1:
        imp.set(n, Cache(live.root, live.version, live.idx, live.storage, live.dtype, live.scale * float(k.flat[0])))
        return
    if not isinstance(live, Act) or k is None:
        raise imp.refuse("product of a KV cache and an activation, or with a non-numeric constant")
    imp.set(n, live.scaled(k))


def _div(imp, n, args):
    a, k = args["self"], _scalar(args["other"])
    if not isinstance(a, (Act, Cache)) or k is None or not np.all(k):
        raise imp.refuse("division of or by an activation has no pimsat op")
    _mul(imp, n, {"self": a, "other": Const(1 / np.asarray(k))})


def _unary(kind: OpKind, **attrs):
    def h(imp, n, args):
        x = args.get("self", args.get("input"))
        xn = imp.materialize(x, "operand")
        extra = dict(attrs)
        if kind is OpKind.gelu:
            extra["approximate"] = args.get("approximate", "none")
        t = imp.tensors[xn]
        out = imp.emit(f"{n.module}.{kind.value}", kind, [xn], t.shape, t.dtype, **extra)
        imp.set(n, imp.act_of(out, x.shape, imp.dtype(n.outputs[0])))

    return h


def _layer_norm(imp, n, args):
    x = args["input"]
    if list(args["normalized_shape"]) != [x.shape[-1]] or args.get("weight") is None or args.get("bias") is None:
        raise imp.refuse("layer_norm over more than the last axis, or without weight and bias")
    w, b = (_weight_const(imp, args[k], k) for k in ("weight", "bias"))
    xn = imp.materialize(x, "operand")
    ins = [xn, imp.weight(w.fqn, w.arr), imp.weight(b.fqn, b.arr)]
    t = imp.tensors[xn]
    out = imp.emit(n.module or "layernorm", OpKind.layernorm, ins, t.shape, t.dtype, eps=float(args.get("eps", 1e-5)))
    imp.set(n, imp.act_of(out, x.shape, imp.dtype(n.outputs[0])))


def _probe_arg(env: dict[str, Any], v: Any) -> Any:
    if isinstance(v, Ref):
        return env[v.name]
    if isinstance(v, list) and v and isinstance(v[0], Ref):
        return [env[x.name] for x in v]
    return v


def probe_group(imp, i: int) -> int:
    """Recognise the nodes of one module from node ``i`` on as a pimsat op; the next index."""
    nodes = imp.g.nodes
    mod, e = nodes[i].module, i
    while e < len(nodes) and nodes[e].module == mod:
        e += 1
    group = nodes[i:e]
    defined = {o for g in group for o in g.outputs if o}
    later = {r for g in nodes[e:] for r in _refs(g.args)} | set(imp.g.user_outputs) | set(imp.g.mutations)
    outs = [o for g in group for o in g.outputs if o in later]
    where = f"module {mod or '(top)'} ({nodes[i].module_class})"
    if len(outs) != 1:
        raise imp.refuse(f"{where}: {len(outs)} values leave the module's elementwise nodes (one expected)")
    ext = list(dict.fromkeys(r for g in group for r in _refs(g.args) if r not in defined))
    acts = [imp.env[r] for r in ext if isinstance(imp.env[r], Act)]
    names = {imp.materialize(a, where) for a in acts}
    if len(names) != 1 or not all(a.plain for a in acts):
        raise imp.refuse(f"{where}: computes on {len(names)} activations (one expected)")
    xn = names.pop()
    bsz, width = imp.tensors[xn].shape
    x = np.random.default_rng(0).standard_normal((bsz, width)) * 2
    env: dict[str, Any] = {}
    for r in ext:
        v = imp.env[r]
        if isinstance(v, Act):
            env[r] = x.reshape(-1)[v.terms[0][0]]
        elif isinstance(v, Const):
            env[r] = v.arr.astype(np.float64) if np.issubdtype(v.arr.dtype, np.floating) else v.arr
        else:
            raise imp.refuse(f"{where}: reads a KV cache")
    floats = []
    for g in group:
        if g.target in aten.IGNORED:
            continue
        if g.target not in aten.VALUE:
            raise imp.refuse("op not supported inside a norm or activation module", g)
        a = {k: _probe_arg(env, v) for k, v in g.args.items()}
        floats += [v for v in g.args.values() if isinstance(v, float)]
        with np.errstate(all="ignore"):
            res = aten.evaluate(g.target, a, exact=True)
        for name, arr in zip(g.outputs, res if isinstance(res, list) else [res]):
            if name:
                env[name] = np.asarray(arr)
    got = env[outs[0]]
    params = {imp.env[r].fqn: imp.env[r].arr for r in ext if isinstance(imp.env[r], Const) and imp.env[r].fqn}
    out_shape = tuple(imp.g.meta[outs[0]].sizes)
    for cand in candidates(width, params, list(dict.fromkeys(floats + [1e-5, 1e-6]))):
        if got.size == bsz * width and agrees(got.reshape(bsz, width), cand.f(x)):
            imp.node = nodes[i]
            ins = [xn] + [imp.weight(w, params[w]) for w in cand.weights]
            out = imp.emit(
                mod or cand.kind.value, cand.kind, ins, (bsz, width), imp.ir_dtype(imp.dtype(outs[0])), **cand.attrs
            )
            imp.env[outs[0]] = imp.act_of(out, out_shape, imp.dtype(outs[0]))
            return e
    raise imp.refuse(f"{where}: computes none of rmsnorm, layernorm, gelu, silu, relu (probed on random data)")


HANDLERS = {
    **ATTENTION,
    **{t: _cast for t in aten.CASTS},
    "aten.linear.default": _linear,
    "aten.addmm.default": _addmm,
    "aten.mm.default": _mm,
    "aten.embedding.default": _embedding,
    "aten.add.Tensor": lambda imp, n, a: _add_sub(imp, n, a, 1.0),
    "aten.sub.Tensor": lambda imp, n, a: _add_sub(imp, n, a, -1.0),
    "aten.mul.Tensor": _mul,
    "aten.mul.Scalar": _mul,
    "aten.div.Tensor": _div,
    "aten.neg.default": lambda imp, n, a: imp.set(n, a["self"].scaled(np.float64(-1))),
    "aten.silu.default": _unary(OpKind.silu),
    "aten.relu.default": _unary(OpKind.relu),
    "aten.gelu.default": _unary(OpKind.gelu),
    "aten.layer_norm.default": _layer_norm,
    "aten.native_layer_norm.default": _layer_norm,
}

__all__ = ["HANDLERS", "handle", "probe_group"]
