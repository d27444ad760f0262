"""Attention and the KV cache as the exported graph writes them: the cache append (a dynamic
cache's ``cat``, a static cache's ``index_copy_``/``index_put_``), ``scaled_dot_product_attention``
and its decompositions (core ATen's ``bmm`` + ``_softmax``, eager ``matmul`` + ``softmax``)."""

from __future__ import annotations

import math

import numpy as np

from ir.ops import OpKind
from ir.program import Op
from ir.pt2.errors import ImportRefused
from ir.pt2.graph import Node
from ir.pt2.values import Act, Cache, Const, identity
from ir.types import Role


def cat(imp, n: Node, args) -> None:
    parts = [v for v in args["tensors"] if not (isinstance(v, Const) and v.arr.size == 0)]
    if len(parts) == 1:
        imp.set(n, parts[0])
        return
    shape = imp.out_shape(n)
    dim = args.get("dim", 0) % len(shape)
    if len(parts) == 2 and isinstance(parts[0], Cache) and isinstance(parts[1], Act):
        append(imp, n, parts[0], parts[1], dim)
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
            imp.set(n, Act(parts[0].src, terms, parts[0].dtype))
            return
    raise imp.refuse("cat of these operands (not a KV-cache append, not views of one tensor) has no pimsat op")


def append(imp, n: Node, past: Cache, new: Act, dim: int) -> None:
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
    imp.set(n, Cache(root, version, identity(past.storage), past.storage, past.dtype))


def static_append(imp, n: Node, args) -> None:
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
    imp.set(n, Cache(root, version, identity(shape), shape, imp.dtype(n.outputs[0])))


def sdpa(imp, n, args):
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
    scale = args.get("scale")
    factor = 1.0 if scale is None else scale * math.sqrt(hd)  # pimsat's scores are q . k / sqrt(head_dim)
    if abs(factor - 1) <= 1e-6:
        qn = imp.materialize(q, "query")
    else:  # the query may carry the rest of the scale (OPT scales q_proj's output, then SDPA by 1)
        try:
            qn = imp.materialize(q.scaled(np.float64(factor)), "query")
        except ImportRefused:
            raise imp.refuse(
                f"attention scale {scale!r} times the query's factor is not 1/sqrt(head_dim) = {1 / math.sqrt(hd)!r}"
            ) from None
    dt = imp.tensors[qn].dtype
    geo = {"heads": heads, "kv_heads": kvh, "head_dim": hd, "position": imp.position}
    seen_shape = (b, heads, imp.position + 1)  # a static cache's later positions are masked out
    s = imp.emit(f"{n.module}.scores", OpKind.attn_score, [qn, k.version], seen_shape, dt, **geo)
    s = imp.emit(f"{n.module}.softmax", OpKind.softmax, [s], seen_shape, dt)
    o = imp.emit(f"{n.module}.context", OpKind.attn_context, [s, v.version], (b, heads * hd), dt, **geo)
    imp.set(n, imp.act_of(o, q.shape, imp.dtype(n.outputs[0])))


def bmm(imp, n, args):
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
    v = imp.act_of(out, imp.out_shape(n), imp.dtype(n.outputs[0]))
    imp.set(n, v if coef is None else v.scaled(np.float64(coef)))


def softmax(imp, n, args):
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
    imp.set(n, imp.act_of(out, x.shape, imp.dtype(n.outputs[0])))


def finite_guard(imp, n, args):
    """SDPA's guard for fully masked rows, ``scores == -inf``: scores of finite keys and queries
    are finite, so it is False everywhere (recorded as a note)."""
    x, other = args["self"], args.get("other")
    if other != float("-inf"):
        raise imp.refuse("comparison of an activation (only the == -inf guard of SDPA is understood)")
    imp.notes.append(f"{n.name}: scores == -inf taken as False (finite scores)")
    imp.set(n, Const(np.zeros(x.shape, dtype=bool)))


def like(imp, n, args):
    fill = {"aten.full_like.default": args.get("fill_value"), "aten.zeros_like.default": 0}.get(n.target, 1)
    imp.set(n, Const(np.full(args["self"].shape, fill, dtype=np.float32)))


def where(imp, n, args):
    cond, a, b = args["condition"], args["self"], args["other"]
    if not isinstance(cond, Const):
        raise imp.refuse("where on a condition computed from activations")
    if not np.any(cond.arr) and isinstance(b, (Act, Cache)):
        imp.set(n, b)
    elif np.all(cond.arr) and isinstance(a, (Act, Cache)):
        imp.set(n, a)
    else:
        raise imp.refuse("where that mixes activations with constants element by element")


#: target -> handler (merged into ir.pt2.handlers.HANDLERS)
ATTENTION = {
    "aten.cat.default": cat,
    "aten._softmax.default": softmax,
    "aten.softmax.int": softmax,
    "aten.bmm.default": bmm,
    "aten.matmul.default": bmm,
    "aten.eq.Scalar": finite_guard,
    "aten.full_like.default": like,
    "aten.zeros_like.default": like,
    "aten.ones_like.default": like,
    "aten.where.self": where,
    "aten.index_copy_.default": static_append,
    "aten.index_copy.default": static_append,
    "aten.index_put_.default": static_append,
    "aten.index_put.default": static_append,
    "aten.scaled_dot_product_attention.default": sdpa,
}
