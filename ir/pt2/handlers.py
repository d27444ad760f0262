"""What each exported op does to the importer's values (see :mod:`ir.pt2.importer`)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ir.ops import OpKind
from ir.program import Op
from ir.pt2 import aten
from ir.pt2.errors import ImportRefused
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
    for name, arr in zip(n.outputs, result if isinstance(result, list) else [result]):
        if name is None:
            continue
        c = Const(np.asarray(arr))
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


def _set(imp, n: Node, v: Any) -> None:
    imp.env[n.outputs[0]] = v


def _out_shape(imp, n: Node) -> tuple[int, ...]:
    return tuple(imp.g.meta[n.outputs[0]].sizes)


def _layout(imp, n: Node, args) -> None:
    key = "input" if n.target == "aten.dropout.default" else "self"
    if n.target == "aten.dropout.default" and args.get("train") and args.get("p"):
        raise imp.refuse("dropout in training mode")
    v, rest = args[key], {k: _raw(a) for k, a in args.items() if k != key}
    if not isinstance(v, (Act, Cache)):
        raise imp.refuse("layout op on a mix of activations and constants")
    f = lambda arr: aten.LAYOUT[n.target]({**rest, key: arr})  # noqa: E731
    if len(n.outputs) == 1:
        _set(imp, n, v.map(f))
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
    _set(
        imp,
        n,
        Act(v.src, v.terms, dt) if isinstance(v, Act) else Cache(v.root, v.version, v.idx, v.storage, dt, v.scale),
    )


def _cat(imp, n: Node, args) -> None:
    parts = [v for v in args["tensors"] if not (isinstance(v, Const) and v.arr.size == 0)]
    if len(parts) == 1:
        _set(imp, n, parts[0])
        return
    shape = _out_shape(imp, n)
    dim = args.get("dim", 0) % len(shape)
    if len(parts) == 2 and isinstance(parts[0], Cache) and isinstance(parts[1], Act):
        _append(imp, n, parts[0], parts[1], dim)
        return
    if all(isinstance(p, Act) for p in parts) and len({id(p.src) for p in parts}) == 1:
        if len({len(p.terms) for p in parts}) == 1:
            terms = []
            for k in range(len(parts[0].terms)):
                idx = [p.terms[k][0] for p in parts]
                coef = [
                    np.broadcast_to(1.0 if p.terms[k][1] is None else p.terms[k][1], i.shape)
                    for p, i in zip(parts, idx)
                ]
                terms.append((np.concatenate(idx, axis=dim), np.concatenate(coef, axis=dim)))
            _set(imp, n, Act(parts[0].src, terms, parts[0].dtype))
            return
    raise imp.refuse("cat of these operands (not a KV-cache append, not views of one tensor) has no pimsat op")


def _append(imp, n: Node, past: Cache, new: Act, dim: int) -> None:
    b, kvh, ctx, hd = past.storage
    if past.version is not None or dim != 2 or new.shape != (b, kvh, 1, hd):
        raise imp.refuse(f"cat of a KV cache with {list(new.shape)} on axis {dim} is not a one-token append")
    if not np.array_equal(past.idx, identity(past.storage)[:, :, : ctx - 1, :]):
        raise imp.refuse("KV-cache append to a view of the past cache")
    dt = imp.ir_dtype(past.dtype)
    root = imp.add_tensor(past.root, past.storage, Role.kv_cache, dt)
    imp.caches[root] = past.root
    x = imp.materialize(new, "new keys/values")
    version = imp.add_tensor(f"{root}@{imp.position}", past.storage, Role.kv_cache, dt)
    attrs = {"position": imp.position} | ({"layer": n.layer} if n.layer is not None else {})
    name = imp.fresh(f"{n.module}.{root}_append")
    imp.ops.append(Op(name=name, kind=OpKind.kv_append, inputs=[root, x], outputs=[version], attrs=attrs))
    _set(imp, n, Cache(root, version, identity(past.storage), past.storage, past.dtype))


def _static_append(imp, n: Node, args) -> None:
    """A static cache (a buffer or lifted constant [B, kv_heads, max_len, head_dim]) written at
    this step's position: ``index_copy_(cache, 2, [position], new)`` or
    ``index_put_(cache, [None, None, [position]], new)``."""
    cache = args["self"]
    if n.target == "aten.index_copy_.default":
        dim, index, new = args["dim"], args["index"], args["source"]
    else:
        ind = args["indices"]
        dim = next((i for i, x in enumerate(ind) if x is not None), -1)
        index, new = (ind[dim] if dim >= 0 else None), args["values"]
        if any(x is not None for j, x in enumerate(ind) if j != dim):
            raise imp.refuse("index_put_ on more than one axis of a cache")
    if not isinstance(cache, Const) or cache.arr.ndim != 4 or cache.input_name is None and cache.fqn is None:
        raise imp.refuse("an in-place write into something that is not a static KV cache")
    if dim % 4 != 2 or not isinstance(index, Const) or index.arr.reshape(-1).tolist() != [imp.position]:
        raise imp.refuse(f"a cache write that is not one token at position {imp.position} on the sequence axis")
    b, kvh, length, hd = cache.arr.shape
    if length <= imp.position or not isinstance(new, Act) or new.shape != (b, kvh, 1, hd):
        raise imp.refuse(f"a cache write of {list(getattr(new, 'shape', []))} into a cache of {list(cache.arr.shape)}")
    name = (cache.fqn or cache.input_name).replace("/", ".")
    dt = imp.ir_dtype(imp.dtype(n.outputs[0]))
    root = imp.add_tensor(name, cache.arr.shape, Role.kv_cache, dt)
    imp.caches[root] = name
    imp.static_caches[root] = cache.arr
    x = imp.materialize(new, "new keys/values")
    version = imp.add_tensor(f"{root}@{imp.position}", cache.arr.shape, Role.kv_cache, dt)
    attrs = {"position": imp.position} | ({"layer": n.layer} if n.layer is not None else {})
    op = imp.fresh(f"{n.module}.{root}_append")
    imp.ops.append(Op(name=op, kind=OpKind.kv_append, inputs=[root, x], outputs=[version], attrs=attrs))
    shape = cache.arr.shape
    _set(imp, n, Cache(root, version, identity(shape), shape, imp.dtype(n.outputs[0])))


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
    _set(imp, n, Act(g, [(identity(x.shape[:-1] + (nk.shape[0],)), None)], imp.dtype(n.outputs[0])))


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
    ind = args["indices"]
    if isinstance(ind, Const) and ind.position:
        ids = imp.add_tensor(ind.input_name, (ind.arr.shape[0],), Role.activation, DType.int32)
        imp.inputs[ids] = ind.input_name
        imp.fixed[ids] = imp.position
        shape = ind.arr.shape
    else:
        ids, shape = imp.materialize(ind, "token ids"), ind.shape
    table = imp.weight(w.fqn, w.arr)
    out = imp.emit(
        n.module or "embed", OpKind.embed, [ids, table], (shape[0], w.arr.shape[1]), imp.tensors[table].dtype
    )
    _set(imp, n, imp.act_of(out, tuple(shape) + (w.arr.shape[1],), imp.dtype(n.outputs[0])))


def _binary(imp, n: Node, kind: OpKind, a: Act, b: Act) -> None:
    if a.shape != b.shape:
        raise imp.refuse(f"{kind.value} of shapes {list(a.shape)} and {list(b.shape)}: broadcasting has no pimsat op")
    xa, xb = imp.materialize(a, "operand"), imp.materialize(b, "operand")
    t = imp.tensors[xa]
    out = imp.emit(f"{n.module}.{kind.value}", kind, [xa, xb], t.shape, t.dtype)
    _set(imp, n, imp.act_of(out, a.shape, imp.dtype(n.outputs[0])))


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
        if a.src is b.src and a.shape == b.shape:
            _set(imp, n, _merge(a, b, sign))
        elif sign > 0:
            _binary(imp, n, OpKind.add, a, b)
        else:
            raise imp.refuse("subtracting one activation from another has no pimsat op")
        return
    act, c = (a, b) if isinstance(a, Act) else (b, a)
    k = _scalar(c)
    if isinstance(act, Act) and k is not None and not np.any(k):
        _set(imp, n, act)
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
        _set(imp, n, Cache(live.root, live.version, live.idx, live.storage, live.dtype, live.scale * float(k.flat[0])))
        return
    if not isinstance(live, Act) or k is None:
        raise imp.refuse("product of a KV cache and an activation, or with a non-numeric constant")
    _set(imp, n, live.scaled(k))


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
        _set(imp, n, imp.act_of(out, x.shape, imp.dtype(n.outputs[0])))

    return h


def _softmax(imp, n, args):
    x = args["self"]
    if args.get("dim", -1) % len(x.shape) != len(x.shape) - 1:
        raise imp.refuse("softmax over an axis other than the last")
    if isinstance(x, Act) and len(x.terms) == 1 and x.terms[0][1] is not None:
        c = np.unique(x.terms[0][1])
        if c.size == 1 and c[0] != 1:
            raise imp.refuse(f"softmax of attention scores scaled by {c[0]:g} x 1/sqrt(head_dim) (not modelled)")
    xn = imp.materialize(x, "operand")
    t = imp.tensors[xn]
    out = imp.emit(f"{n.module}.softmax", OpKind.softmax, [xn], t.shape, t.dtype)
    _set(imp, n, imp.act_of(out, x.shape, imp.dtype(n.outputs[0])))


def _bmm(imp, n, args):
    """Attention as core ATen or eager code writes it: scores = q @ k^T and context = probs @ v
    (bmm over [B*heads, ...] or matmul over [B, heads, ...]), over views of this step's caches
    (each kv head repeated for its query heads)."""
    a, c = args["self"], args.get("mat2", args.get("other"))
    if not isinstance(a, Act) or not isinstance(c, Cache) or c.version is None:
        raise imp.refuse("matrix product of operands that are not an activation and this step's KV cache")
    b, kvh, length, hd = c.storage
    lead = a.shape[:-2]
    bh = int(np.prod(lead))
    if a.shape[-2] != 1 or bh % b or (bh // b) % kvh or length != imp.position + 1 or c.idx.shape[:-2] != lead:
        raise imp.refuse(f"matrix product of {list(a.shape)} with a cache of {list(c.storage)}")
    heads = bh // b
    rep = np.repeat(identity(c.storage), heads // kvh, axis=1).reshape(bh, length, hd)
    a3 = a.map(lambda x: x.reshape(bh, *x.shape[-2:]))
    cidx = c.idx.reshape(bh, *c.idx.shape[-2:])
    geo = {"heads": heads, "kv_heads": kvh, "head_dim": hd, "position": imp.position}
    if a.shape[-1] == hd and np.array_equal(cidx, rep.transpose(0, 2, 1)):
        # pimsat's scores are q . k / sqrt(head_dim): with the query scaled so that they are
        # (core ATen scales q and k), or as they are, times sqrt(head_dim) (eager code scales after)
        factor = c.scale * math.sqrt(hd)
        try:
            qn, coef = imp.materialize(a3.scaled(np.float64(factor)), "query", batch=b), None
        except ImportRefused:
            qn, coef = imp.materialize(a3, "query", batch=b), factor
        dt = imp.tensors[qn].dtype
        out = imp.emit(f"{n.module}.scores", OpKind.attn_score, [qn, c.version], (b, heads, length), dt, **geo)
    elif a.shape[-1] == length and np.array_equal(cidx, rep):
        pn = imp.materialize(a3.scaled(np.float64(c.scale)), "attention weights (scaled?)", batch=b)
        dt, coef = imp.tensors[pn].dtype, None
        out = imp.emit(f"{n.module}.context", OpKind.attn_context, [pn, c.version], (b, heads * hd), dt, **geo)
    else:
        raise imp.refuse("matrix product that is neither q @ k^T nor probs @ v over the GQA-repeated cache")
    v = imp.act_of(out, _out_shape(imp, n), imp.dtype(n.outputs[0]))
    _set(imp, n, v if coef is None else v.scaled(np.float64(coef)))


def _finite_guard(imp, n, args):
    """SDPA's guard for fully masked rows, ``scores == -inf``: scores of finite keys and queries
    are finite, so it is False everywhere (recorded as a note)."""
    x, other = args["self"], args.get("other")
    if other != float("-inf"):
        raise imp.refuse("comparison of an activation (only the == -inf guard of SDPA is understood)")
    imp.notes.append(f"{n.name}: scores == -inf taken as False (finite scores)")
    _set(imp, n, Const(np.zeros(x.shape, dtype=bool)))


def _like(imp, n, args):
    fill = {"aten.full_like.default": args.get("fill_value"), "aten.zeros_like.default": 0}.get(n.target, 1)
    _set(imp, n, Const(np.full(args["self"].shape, fill, dtype=np.float32)))


def _where(imp, n, args):
    cond, a, b = args["condition"], args["self"], args["other"]
    if not isinstance(cond, Const):
        raise imp.refuse("where on a condition computed from activations")
    if not np.any(cond.arr) and isinstance(b, (Act, Cache)):
        _set(imp, n, b)
    elif np.all(cond.arr) and isinstance(a, (Act, Cache)):
        _set(imp, n, a)
    else:
        raise imp.refuse("where that mixes activations with constants element by element")


def _layer_norm(imp, n, args):
    x = args["input"]
    if list(args["normalized_shape"]) != [x.shape[-1]] or args.get("weight") is None or args.get("bias") is None:
        raise imp.refuse("layer_norm over more than the last axis, or without weight and bias")
    w, b = (_weight_const(imp, args[k], k) for k in ("weight", "bias"))
    xn = imp.materialize(x, "operand")
    ins = [xn, imp.weight(w.fqn, w.arr), imp.weight(b.fqn, b.arr)]
    t = imp.tensors[xn]
    out = imp.emit(n.module or "layernorm", OpKind.layernorm, ins, t.shape, t.dtype, eps=float(args.get("eps", 1e-5)))
    _set(imp, n, imp.act_of(out, x.shape, imp.dtype(n.outputs[0])))


def _sdpa(imp, n, args):
    q, k, v = args["query"], args["key"], args["value"]
    if not isinstance(q, Act) or not isinstance(k, Cache) or not isinstance(v, Cache) or k.version is None:
        raise imp.refuse("attention whose keys and values are not this step's KV caches")
    if len(q.shape) != 4 or q.shape[2] != 1:
        raise imp.refuse(f"query {list(q.shape)}: one query token [B, heads, 1, head_dim] expected")
    b, heads, _, hd = q.shape
    kvh, length = k.storage[1], k.storage[2]
    if length < imp.position + 1 or heads % kvh:
        raise imp.refuse(f"attention over {length} cached positions at position {imp.position}")
    for name, c in (("key", k), ("value", v)):
        full = identity(c.storage)
        want = full if args.get("enable_gqa") else np.repeat(full, heads // kvh, axis=1)
        if c.idx.shape != want.shape or not np.array_equal(c.idx, want):
            raise imp.refuse(f"{name}: not the whole cache with each kv head repeated for its query heads (GQA)")
    if args.get("dropout_p", 0.0):
        raise imp.refuse("attention dropout")
    if args.get("is_causal") and length > 1:
        raise imp.refuse("is_causal with one query over a cache: torch aligns its mask top-left (the query sees key 0)")
    mask = args.get("attn_mask")
    seen = np.arange(length) <= imp.position  # what pimsat's attention reads: positions 0..position
    if mask is None and length > imp.position + 1:
        raise imp.refuse(f"attention over all {length} positions of a static cache without a mask")
    if mask is not None:
        if not isinstance(mask, Const):
            raise imp.refuse("an attention mask computed from activations")
        if mask.arr.dtype != np.bool_ and not np.all((mask.arr == 0) | (mask.arr == -np.inf)):
            raise imp.refuse("a float attention mask that is neither 0 nor -inf")
        visible = mask.arr if mask.arr.dtype == np.bool_ else mask.arr == 0
        shape = np.broadcast_shapes(visible.shape, seen.shape)
        if not np.array_equal(np.broadcast_to(visible, shape), np.broadcast_to(seen, shape)):
            raise imp.refuse(f"the attention mask is not causal at position {imp.position} (it hides or shows others)")
    imp.scale_ok(args.get("scale"), hd)
    qn = imp.materialize(q, "query")
    dt = imp.tensors[qn].dtype
    geo = {"heads": heads, "kv_heads": kvh, "head_dim": hd, "position": imp.position}
    seen_shape = (b, heads, imp.position + 1)  # a static cache's later positions are masked out
    s = imp.emit(f"{n.module}.scores", OpKind.attn_score, [qn, k.version], seen_shape, dt, **geo)
    s = imp.emit(f"{n.module}.softmax", OpKind.softmax, [s], seen_shape, dt)
    o = imp.emit(f"{n.module}.context", OpKind.attn_context, [s, v.version], (b, heads * hd), dt, **geo)
    _set(imp, n, imp.act_of(o, q.shape, imp.dtype(n.outputs[0])))


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
    **{t: _cast for t in aten.CASTS},
    "aten.cat.default": _cat,
    "aten.linear.default": _linear,
    "aten.addmm.default": _addmm,
    "aten.mm.default": _mm,
    "aten.embedding.default": _embedding,
    "aten.add.Tensor": lambda imp, n, a: _add_sub(imp, n, a, 1.0),
    "aten.sub.Tensor": lambda imp, n, a: _add_sub(imp, n, a, -1.0),
    "aten.mul.Tensor": _mul,
    "aten.mul.Scalar": _mul,
    "aten.div.Tensor": _div,
    "aten.neg.default": lambda imp, n, a: _set(imp, n, a["self"].scaled(np.float64(-1))),
    "aten.silu.default": _unary(OpKind.silu),
    "aten.relu.default": _unary(OpKind.relu),
    "aten.gelu.default": _unary(OpKind.gelu),
    "aten.layer_norm.default": _layer_norm,
    "aten.native_layer_norm.default": _layer_norm,
    "aten._softmax.default": _softmax,
    "aten.softmax.int": _softmax,
    "aten.bmm.default": _bmm,
    "aten.matmul.default": _bmm,
    "aten.eq.Scalar": _finite_guard,
    "aten.full_like.default": _like,
    "aten.zeros_like.default": _like,
    "aten.ones_like.default": _like,
    "aten.where.self": _where,
    "aten.index_copy_.default": _static_append,
    "aten.index_copy.default": _static_append,
    "aten.index_put_.default": _static_append,
    "aten.index_put.default": _static_append,
    "aten.scaled_dot_product_attention.default": _sdpa,
}

__all__ = ["HANDLERS", "handle", "probe_group"]
