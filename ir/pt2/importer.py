"""Import an exported decode step (.pt2) as a pimsat program, with its weights as state.

:func:`import_pt2` walks the graph once, in order. Values known at import time (weights, the
step's position, masks, RoPE tables) are folded with numpy (:mod:`ir.pt2.aten`); activations are
linear forms over pimsat tensors (:mod:`ir.pt2.values`), so views, transposes, splits and GQA
repeats are dropped while their layout is tracked, and the ops that compute emit pimsat ops:

=================================  ==================================================
exported                           pimsat
=================================  ==================================================
linear, addmm, mm (Conv1D's W.T)   gemv (a fused weight read in column ranges: one gemv each)
embedding                          embed (position ids: a fixed input, as ir.builders does)
a norm / activation module         rmsnorm, layernorm, gelu, silu, relu (probed: ir.pt2.probe)
layer_norm, silu, gelu, relu       layernorm, silu, gelu, relu
x*cos + rotate_half(x)*sin         rope (cos/sin checked against theta from the inv_freq buffer)
cat(past, new) on the seq axis     kv_append (the past cache input becomes the cache state)
scaled_dot_product_attention       attn_score, softmax, attn_context (GQA map, mask, scale checked)
add / mul of two activations       add / mul
=================================  ==================================================

Handlers: :mod:`ir.pt2.handlers` (layout, linear layers, elementwise ops, probed modules) and
:mod:`ir.pt2.attention` (cache appends, SDPA and its decompositions). Anything else raises
:class:`ImportRefused` naming the node, its target and its module.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ir.errors import IRError
from ir.ops import OpKind
from ir.program import Op, Program
from ir.pt2.archive import BFLOAT16, read_archive
from ir.pt2.errors import ImportRefused
from ir.pt2.graph import Graph, Node, Ref, parse
from ir.pt2.probe import rope_terms, theta_of
from ir.pt2.values import Act, Cache, Const, Gemv, identity
from ir.reference import rope_cos_sin
from ir.types import DType, Role, Tensor, round_to

#: torch ScalarType -> pimsat dtype of activations and weights.
DTYPES = {6: DType.fp16, BFLOAT16: DType.bf16, 7: DType.fp32}
#: Largest |difference| between PyTorch's folded RoPE tables and pimsat's, per dtype of the rotated
#: tensor (HF casts cos/sin to it).
ROPE_ATOL = {DType.fp16: 4e-3, DType.bf16: 3e-2, DType.fp32: 1e-5}
#: Graph inputs that carry the step's position (Hugging Face's names).
POSITION_INPUTS = ("position_ids", "cache_position")
#: Ops whose appearance on an activation makes its module a group to probe.
PROBED = frozenset(
    f"aten.{n}"
    for n in (
        "pow.Tensor_Scalar",
        "mean.dim",
        "rsqrt.default",
        "sqrt.default",
        "tanh.default",
        "exp.default",
        "sigmoid.default",
        "sum.dim_IntList",
        "var.correction",
        "erf.default",
    )
)


@dataclass
class Imported:
    program: Program
    weights: dict[str, np.ndarray]  # pimsat weight -> values (storage form)
    caches: dict[str, str]  # pimsat kv-cache root -> graph input holding the past
    inputs: dict[str, str]  # pimsat input -> graph input
    outputs: list[tuple[str, tuple[int, ...]]]  # per graph user output: pimsat tensor, torch shape
    position: int
    notes: list[str] = field(default_factory=list)
    static_caches: dict[str, np.ndarray] = field(default_factory=dict)  # root -> contents held in the archive

    def step(self, user_inputs: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """(inputs, state) of the program for one step given the graph's user inputs by name."""
        prog = self.program
        graph_caches = {k: v for k, v in self.caches.items() if k not in self.static_caches}
        missing = sorted({*self.inputs.values(), *graph_caches.values()} - set(user_inputs))
        if missing:
            raise IRError(f"inputs: missing {', '.join(missing)} (the exported graph's input names)")
        for graph_name in POSITION_INPUTS:
            given = np.asarray(user_inputs.get(graph_name, self.position))
            if np.any(given != self.position):
                raise IRError(f"inputs: {graph_name}: {given.tolist()} is not the imported position {self.position}")
        fixed = prog.meta.get("fixed_inputs", {})
        inputs = {}
        for name, graph_name in self.inputs.items():
            v = np.asarray(user_inputs[graph_name]).reshape(-1)
            if name in fixed:  # a position input (checked above) reads the row the graph computes from it
                v = np.full(v.shape, fixed[name])
            inputs[name] = v.astype(np.int32)
        state = dict(self.weights) | self.step_state_static()
        for root, graph_name in graph_caches.items():
            t = prog.tensors[root]
            past = np.asarray(user_inputs[graph_name])
            arr = np.zeros(t.shape, dtype=np.float32)
            arr[:, :, : past.shape[2], :] = past
            state[root] = round_to(t.dtype, arr)
        return inputs, state

    def step_state_static(self) -> dict[str, np.ndarray]:
        """The static caches the archive holds, in storage form (state that is not a graph input)."""
        return {k: round_to(self.program.tensors[k].dtype, v) for k, v in self.static_caches.items()}

    def torch_outputs(self, values, banks=None) -> list[np.ndarray]:
        """The graph's user outputs (in torch shapes) from the program's tensor values (the
        reference interpreter's), or from a simulation's outputs and ``banks`` (its resident
        tensors: the KV caches after the append live there, not on the host)."""
        out = []
        for n, shape in self.outputs:
            if banks is not None and self.program.tensors[n].role is Role.kv_cache:
                out.append(np.asarray(banks[self.program.storage(n)]).reshape(shape))
            else:
                out.append(np.asarray(values[n]).reshape(shape))
        return out


def import_pt2(path: str | Path, position: int | None = None, name: str | None = None) -> Imported:
    archive = read_archive(path)
    graph = parse(archive)
    return _Importer(archive, graph, position, name or Path(path).stem).run()


def _eps(dtype: int) -> float:
    return {6: 2.0**-11, BFLOAT16: 2.0**-8, 7: 2.0**-24}.get(dtype, 2.0**-24)


class _Importer:
    def __init__(self, archive, graph: Graph, position: int | None, name: str):
        self.a, self.g, self.name = archive, graph, name
        self.env: dict[str, Any] = {}
        self.tensors: dict[str, Tensor] = {}
        self.ops: list[Op] = []
        self.weights: dict[str, np.ndarray] = {}
        self.inputs: dict[str, str] = {}
        self.caches: dict[str, str] = {}
        self.static_caches: dict[str, np.ndarray] = {}
        self.fixed: dict[str, int] = {}
        self.memo: dict[int, tuple[Act, str]] = {}
        self.notes: list[str] = []
        self.position = position if position is not None else self._past_length()
        self.node: Node | None = None

    # --- errors, names -------------------------------------------------------------------
    def refuse(self, problem: str, node: Node | None = None) -> ImportRefused:
        n = node or self.node
        return ImportRefused(f"{self.a.path}: {n.where() if n else 'graph'}: {problem}")

    def fresh(self, base: str) -> str:
        base = re.sub(r"[\s,()\[\]=]", "_", base) or "op"
        name, i = base, 2
        taken = {op.name for op in self.ops}
        while name in taken or f"{name}.out" in self.tensors:
            name, i = f"{base}.{i}", i + 1
        return name

    def dtype(self, value_name: str | None, default: int = 6) -> int:
        meta = self.g.meta.get(value_name) if value_name else None
        return meta.dtype if meta else default

    def ir_dtype(self, torch_dtype: int) -> DType:
        if torch_dtype not in DTYPES:
            raise self.refuse(f"dtype #{torch_dtype} of an activation is not supported (fp16, bf16, fp32)")
        return DTYPES[torch_dtype]

    # --- graph inputs --------------------------------------------------------------------
    def _past_length(self) -> int:
        lengths = {
            self.g.meta[n].sizes[2]
            for n in self.g.user_inputs
            if len(self.g.meta[n].sizes) == 4 and self.g.meta[n].dtype in DTYPES
        }
        if len(lengths) != 1:
            raise ImportRefused(
                f"{self.a.path}: --position is needed: the past KV-cache inputs give {sorted(lengths) or 'no'} "
                "lengths (a static cache's position is an input of the graph)"
            )
        return lengths.pop()

    def _bind_inputs(self) -> None:
        for gname, fqn in self.g.params.items():
            store = self.a.weights if fqn in self.a.weights else self.a.constants
            if fqn not in store:
                raise ImportRefused(f"{self.a.path}: input '{gname}': no payload for '{fqn}' in the archive")
            self.env[gname] = Const(store[fqn], fqn=fqn)
        for gname, fqn in self.g.constants.items():
            self.env[gname] = Const(self.a.constants[fqn], input_name=gname)
        for gname in self.g.user_inputs:
            m = self.g.meta[gname]
            if gname in POSITION_INPUTS:
                self.env[gname] = Const(np.full(m.sizes, self.position, np.int64), position=True, input_name=gname)
            elif m.dtype in (4, 5) and len(m.sizes) in (1, 2) and (len(m.sizes) == 1 or m.sizes[1] == 1):
                t = self.add_tensor(gname, (m.sizes[0],), Role.activation, DType.int32)
                self.inputs[t] = gname
                self.env[gname] = Act(t, [(identity(m.sizes), None)], m.dtype)
            elif m.dtype in DTYPES and len(m.sizes) == 4:
                b, kvh, past, hd = m.sizes
                if past != self.position:
                    raise ImportRefused(
                        f"{self.a.path}: input '{gname}': the past cache holds {past} tokens, so the step's "
                        f"position is {past}, not {self.position}"
                    )
                storage = (b, kvh, past + 1, hd)
                self.env[gname] = Cache(gname, None, identity(storage)[:, :, :past, :], storage, m.dtype)
            else:
                raise ImportRefused(
                    f"{self.a.path}: input '{gname}': shape {list(m.sizes)} ({m.dtype_name}) is neither token ids "
                    "[B, 1], a position, nor a past KV cache [B, kv_heads, past, head_dim] (prefill is not supported)"
                )

    # --- pimsat tensors and ops ----------------------------------------------------------
    def add_tensor(self, name: str, shape: tuple[int, ...], role: Role, dtype: DType) -> str:
        if name not in self.tensors:
            self.tensors[name] = Tensor(name=name, shape=tuple(shape), dtype=dtype, role=role)
        return name

    def weight(self, fqn: str, arr: np.ndarray, suffix: str = "") -> str:
        name = fqn + suffix
        if name not in self.weights:
            dt = DType.bf16 if fqn in self.a.bf16 else self.ir_dtype({np.float16: 6, np.float32: 7}[arr.dtype.type])
            self.add_tensor(name, arr.shape, Role.weight, dt)
            same = dt is DType.fp16 and arr.dtype == np.float16 and arr.flags.c_contiguous
            self.weights[name] = arr if same else round_to(dt, np.ascontiguousarray(arr))
        return name

    def emit(self, base: str, kind: OpKind, inputs: list[str], shape, dtype: DType, layer=-1, **attrs) -> str:
        name = self.fresh(base)
        out = self.add_tensor(f"{name}.out", shape, Role.activation, dtype)
        layer = (self.node.layer if self.node else None) if layer == -1 else layer
        if layer is not None:
            attrs["layer"] = layer
        self.ops.append(Op(name=name, kind=kind, inputs=inputs, outputs=[out], attrs=attrs))
        return out

    def set(self, n: Node, v: Any) -> None:
        self.env[n.outputs[0]] = v

    def out_shape(self, n: Node) -> tuple[int, ...]:
        return tuple(self.g.meta[n.outputs[0]].sizes)

    def act_of(self, tensor: str, torch_shape: tuple[int, ...], dtype: int) -> Act:
        return Act(tensor, [(identity(torch_shape), None)], dtype)

    # --- materialising linear forms ------------------------------------------------------
    def materialize(self, v: Any, what: str, batch: int | None = None) -> str:
        """The pimsat tensor [B, N] holding activation ``v`` (B: ``batch``, else the first axis of
        its torch shape)."""
        if not isinstance(v, Act):
            raise self.refuse(f"{what}: expected an activation, got {type(v).__name__}")
        hit = self.memo.get(id(v))
        if hit is not None and hit[0] is v:  # the value itself is kept: its id is not reused
            return hit[1]
        b = batch if batch is not None else (v.shape[0] if v.shape else 1)
        n = int(np.prod(v.shape)) // max(b, 1)
        name = self._plain(v, b, n) if v.plain else self._rope(v, b, n, what)
        self.memo[id(v)] = (v, name)
        return name

    def _plain(self, v: Act, b: int, n: int) -> str:
        flat = v.terms[0][0].reshape(b, n)
        if isinstance(v.src, str):
            if self.tensors[v.src].numel == b * n and np.array_equal(flat, identity((b, n))):
                return v.src
            raise self.refuse(f"a view that reorders, repeats or selects elements of '{v.src}' has no pimsat op")
        g, start = v.src, int(flat[0, 0])
        want = np.arange(b)[:, None] * g.n + start + np.arange(n)[None, :]
        if b != g.batch or start + n > g.n or not np.array_equal(flat, want):
            raise self.refuse(f"a view of the output of '{g.module}' that is not a column range has no pimsat op")
        return self.gemv_part(g, start, start + n)

    def gemv_part(self, g: Gemv, lo: int, hi: int) -> str:
        """The GEMV of weight rows lo..hi (all of them: the layer itself), emitted once."""
        if (lo, hi) in g.parts:
            return g.parts[(lo, hi)]
        w = self.a.weights.get(g.weight, self.a.constants.get(g.weight))
        w = w.T if g.transposed else w  # pimsat holds W [N, K]
        whole = (lo, hi) == (0, g.n)
        part = "" if whole else f".rows{lo}-{hi}"
        ins = [g.x, self.weight(g.weight, w[lo:hi], (".T" if g.transposed else "") + part)]
        if g.bias:
            bias = self.a.weights.get(g.bias, self.a.constants.get(g.bias))
            ins.append(self.weight(g.bias, bias[lo:hi], part))
        base = g.module if whole else f"{g.module}{part}"
        out = self.emit(base, OpKind.gemv, ins, (g.batch, hi - lo), self.tensors[g.x].dtype, layer=g.layer)
        g.parts[(lo, hi)] = out
        return out

    def _rope(self, v: Act, b: int, n: int, what: str) -> str:
        hd = v.shape[-1]
        if len(v.terms) != 2 or hd % 2 or n % hd:
            raise self.refuse(f"{what}: a linear combination of elements that is not RoPE has no pimsat op")
        theta = self.theta(hd)
        cos, sin = rope_cos_sin(self.position, hd, theta)
        (_, want_c), (want_rot, want_s) = rope_terms(b, n // hd, hd, cos, sin)
        for first, second in ((0, 1), (1, 0)):
            base_idx, base_c = v.terms[first]
            rot_idx, rot_c = v.terms[second]
            try:  # the term of x*cos reads x as it is; rotate_half's term does not
                base = self.materialize(Act(v.src, [(base_idx, None)], v.dtype), what, batch=b)
            except ImportRefused:
                continue
            # positions in `base` of every element each term reads
            inv = {int(s): i for i, s in enumerate(base_idx.reshape(-1))}
            try:
                rot = np.array([inv[int(s)] for s in rot_idx.reshape(-1)]).reshape(b, n)
            except KeyError:
                continue
            bc = np.broadcast_to(1 if base_c is None else base_c, base_idx.shape).reshape(b, n)
            rc = np.broadcast_to(1 if rot_c is None else rot_c, rot_idx.shape).reshape(b, n)
            if not np.array_equal(rot, want_rot):
                continue
            err = max(float(np.abs(bc - want_c).max()), float(np.abs(rc - want_s).max()))
            atol = ROPE_ATOL[self.tensors[base].dtype]
            if err > atol:
                low = [f for f in self.inv_freq() if f in self.a.bf16 or self.inv_freq()[f].dtype == np.float16]
                why = (
                    f"the buffer {low[0]} is held in 16 bits and PyTorch rotates by its rounded frequencies "
                    "(export with inv_freq in float32, as from_pretrained keeps it, not after .half())"
                    if low
                    else "scaled or shifted RoPE is not modelled"
                )
                raise self.refuse(
                    f"{what}: RoPE tables differ from theta={theta:g} at position {self.position} by {err:.2g} "
                    f"(> {atol:g}): {why}"
                )
            dt = self.tensors[base].dtype
            return self.emit(
                f"{self.node.module}.rope", OpKind.rope, [base], (b, n), dt,
                heads=n // hd, head_dim=hd, position=self.position, theta=theta,
            )  # fmt: skip
        raise self.refuse(f"{what}: a linear combination of elements that is not rotate-half RoPE has no pimsat op")

    def inv_freq(self) -> dict[str, np.ndarray]:
        stored = {**self.a.constants, **self.a.weights}
        return {f: stored[f] for f in self.g.params.values() if f.endswith(".inv_freq") and f in stored}

    def theta(self, head_dim: int) -> float:
        bufs = self.inv_freq()
        if not bufs:
            raise self.refuse("RoPE: no inv_freq buffer to check its theta against")
        thetas = set()
        for fqn, arr in bufs.items():
            half = arr.dtype == np.float16
            kind = 6 if half else (BFLOAT16 if fqn in self.a.bf16 else 7)
            t = theta_of(arr, head_dim, _eps(kind), 2.0**-24 if half else 0.0)
            if t is None:
                raise self.refuse(f"RoPE: buffer '{fqn}' is not theta**(-2i/{head_dim}) for any theta (rope scaling?)")
            thetas.add(t)
        if len(thetas) != 1:
            raise self.refuse(f"RoPE: inv_freq buffers give different thetas {sorted(thetas)}")
        return thetas.pop()

    # --- the walk ------------------------------------------------------------------------
    def run(self) -> Imported:
        from ir.pt2.handlers import handle, probe_group

        self._bind_inputs()
        nodes, i = self.g.nodes, 0
        ops_before: list[int] = []  # ops emitted before each node
        while i < len(nodes):
            self.node = n = nodes[i]
            if n.target in PROBED and any(isinstance(v, Act) for v in self.args(n).values()):
                # the module's nodes from the first one after which nothing was emitted
                start = i
                while start > 0 and nodes[start - 1].module == n.module and ops_before[start - 1] == len(self.ops):
                    start -= 1
                end = probe_group(self, start)
                ops_before += [len(self.ops)] * (end - i)
                i = end
                continue
            ops_before.append(len(self.ops))
            handle(self, n)
            i += 1
        self.node = None
        outputs = []
        out_names: list[str] = []
        for gname in self.g.user_outputs:
            v = self.env.get(gname)
            if isinstance(v, Cache):
                if v.version is None or not np.array_equal(v.idx, identity(v.storage)):
                    raise ImportRefused(f"{self.a.path}: output '{gname}': a cache view that is not the whole cache")
                name = v.version
            elif isinstance(v, Act):
                name = self.materialize(v, f"output '{gname}'")
            else:
                raise ImportRefused(f"{self.a.path}: output '{gname}': a constant output is not supported")
            if name in out_names:
                raise ImportRefused(f"{self.a.path}: output '{gname}': the same value is output twice")
            out_names.append(name)
            outputs.append((name, tuple(self.g.meta[gname].sizes)))
        if self.g.mutations:
            raise ImportRefused(
                f"{self.a.path}: buffer mutations {sorted(self.g.mutations.values())} are not supported"
            )
        used = {t for op in self.ops for t in op.inputs} | set(out_names)
        ins = [t for t in self.inputs if t in used]
        tensors = {k: t for k, t in self.tensors.items() if k in used or any(k in op.outputs for op in self.ops)}
        dts = {t.dtype for t in tensors.values() if t.role is Role.weight}
        meta = {
            "source": "pt2",
            "position": self.position,
            "context": self.position,
            "batch": tensors[out_names[0]].shape[0],
            "dtype": (dts.pop() if len(dts) == 1 else DType.fp16).value,
            "fixed_inputs": {k: v for k, v in self.fixed.items() if k in ins},
            "pt2_outputs": [n for n in self.g.user_outputs],
            "pt2_notes": list(self.notes),  # what the import assumed (e.g. finite attention scores)
        }
        # the caches after the append are the program's state updates, not host outputs
        host_out = [n for n in out_names if tensors[n].role is Role.activation]
        prog = Program(name=self.name, tensors=tensors, ops=self.ops, inputs=ins, outputs=host_out, meta=meta)
        weights = {k: v for k, v in self.weights.items() if k in tensors}
        return Imported(
            prog, weights, {k: v for k, v in self.caches.items() if k in tensors},
            {k: v for k, v in self.inputs.items() if k in ins}, outputs, self.position, self.notes,
            {k: v for k, v in self.static_caches.items() if k in tensors},
        )  # fmt: skip

    def value(self, a: Any) -> Any:
        if isinstance(a, Ref):
            if a.name not in self.env:
                raise self.refuse(f"argument '{a.name}' has no value (an op before it was not understood)")
            return self.env[a.name]
        if isinstance(a, list):
            return [self.value(x) for x in a]
        return a

    def args(self, n: Node) -> dict[str, Any]:
        return {k: self.value(v) for k, v in n.args.items()}

    def scale_ok(self, scale: float | None, head_dim: int) -> None:
        want = 1 / math.sqrt(head_dim)
        if scale is not None and abs(scale - want) > 1e-6 * want:
            raise self.refuse(f"attention scale {scale!r} is not 1/sqrt(head_dim) = {want!r}")


__all__ = ["ImportRefused", "Imported", "import_pt2"]
