"""PIM-capable ops as matrix-vector work: a set of resident matrices, each with input vectors.

Every op the PIM units can run (gemv, attn_score, attn_context) is "rows of a resident matrix
dotted with broadcast vectors". `MVShape` says where, in the flattened tensors, matrix element
(row, k), vector element (v, k) and output (v, row) live, so that tiling, layout and emission
never look at the op kind again.

- gemv         y[b, n] = sum_k x[b, k] W[n, k]: one matrix W (rows n), vectors x[b].
- attn_score   s[b, h, t] = sum_d q[b, h, d] K[b, g, t, d]: a matrix per (b, kv head g), rows t,
               vectors = the query heads h of g (GQA).
- attn_context o[b, h, d] = sum_t p[b, h, t] V[b, g, t, d]: a matrix per (b, g), rows d, k = t
               (V read transposed), vectors = the probability rows p[b, h] of the heads of g.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ir import OpKind, Program


@dataclass(frozen=True)
class Part:
    """Rows [row0, row0+rows) of a (possibly fused) gemv matrix: one op's weight and output."""

    op: str
    resident: str
    output: str
    row0: int
    rows: int
    src0: int = 0  # the op's row at row0 (> 0 when a split leaves the op's first rows elsewhere)
    out_rows: int = 0  # rows of the op's output (0: `rows`, the part covers the whole op)

    @property
    def op_rows(self) -> int:
        return self.out_rows or self.rows


@dataclass(frozen=True)
class MVShape:
    op: str
    kind: OpKind
    resident: str  # storage (root) tensor name of the resident matrix
    vector: str  # host tensor holding the input vectors
    output: str  # op output tensor (its fp32 staging is f"{output}#acc")
    matrices: int
    rows: int  # rows per matrix
    k: int  # reduction length
    vectors: int  # input vectors per matrix
    # Flattened-index arithmetic (see the element_/vector_/output_index methods).
    kind_key: str
    batch: int = 1
    groups: int = 1  # kv heads (attention) or 1
    heads_per_group: int = 1
    head_dim: int = 0
    max_ctx: int = 0
    heads: int = 0
    parts: tuple[Part, ...] = ()  # gemv: one per fused op (a single one when not fused)
    # attention over a head group (head_group): kv heads group0..group0+groups-1 of the op's
    # heads // heads_per_group (its matrices: every batch row of those kv heads)
    group0: int = 0
    # gemv over a k range (k_range): elements k0..k0+k-1 of rows k_stride long (0: k, the whole
    # row); the partial sums of the ranges meet in the output's staging (RDACC adds)
    k0: int = 0
    k_stride: int = 0
    # a micro-batch (batch_range): batch rows batch0.. of the op (a gemv's vectors, an attention
    # op's matrices are those rows' only)
    batch0: int = 0

    @property
    def row_length(self) -> int:
        """Elements of a whole matrix row (and input vector) in the flat tensors."""
        return self.k_stride or self.k

    @property
    def ops(self) -> tuple[str, ...]:
        return tuple(p.op for p in self.parts) if self.parts else (self.op,)

    @property
    def outputs(self) -> tuple[str, ...]:
        return tuple(p.output for p in self.parts) if self.parts else (self.output,)

    def part_of(self, row: int) -> Part | None:
        for p in self.parts:
            if p.row0 <= row < p.row0 + p.rows:
                return p
        return None

    def resident_at(self, row: int) -> str:
        p = self.part_of(row)
        return p.resident if p else self.resident

    def output_at(self, m: int, v: int, row: int) -> tuple[str, int]:
        """(output tensor, flat index) of output (v, row) of matrix m."""
        p = self.part_of(row)
        if p is None:
            return self.output, self.output_index(m, v, row)
        return p.output, (self.batch0 + v) * p.op_rows + (row - p.row0 + p.src0)

    def same_part(self, row_a: int, row_b: int) -> bool:
        return self.part_of(row_a) is self.part_of(row_b)

    @property
    def kv_heads(self) -> int:
        """The op's kv heads (attention): `groups` of them are this shape's, from `group0`."""
        return self.heads // self.heads_per_group if self.heads else self.groups

    def matrix_coords(self, m: int) -> tuple[int, int]:
        b, g = divmod(m, self.groups)
        return self.batch0 + b, self.group0 + g  # (batch row, kv head of the op)

    def element_index(self, m: int, row: int, k: int) -> int:
        """Flat index into the resident tensor of matrix m's element (row, k)."""
        if self.kind_key == "gemv":
            p = self.part_of(row)
            return ((row - p.row0 + p.src0) if p else row) * self.row_length + self.k0 + k
        b, g = self.matrix_coords(m)
        base = (b * self.kv_heads + g) * self.max_ctx
        if self.kind_key == "score":
            return (base + row) * self.head_dim + k
        return (base + k) * self.head_dim + row  # context: row = d, k = t

    def element_stride(self) -> int:
        """Distance between consecutive k of one row in the flat resident tensor."""
        return self.head_dim if self.kind_key == "context" else 1

    def vector_index(self, m: int, v: int, k: int) -> int:
        if self.kind_key == "gemv":
            return (self.batch0 + v) * self.row_length + self.k0 + k
        b, g = self.matrix_coords(m)
        h = g * self.heads_per_group + v
        if self.kind_key == "score":
            return (b * self.heads + h) * self.head_dim + k
        return (b * self.heads + h) * self.k + k  # probs [B, heads, T]

    def output_index(self, m: int, v: int, row: int) -> int:
        if self.kind_key == "gemv":
            return (self.batch0 + v) * self.rows + row
        b, g = self.matrix_coords(m)
        h = g * self.heads_per_group + v
        if self.kind_key == "score":
            return (b * self.heads + h) * self.rows + row
        return (b * self.heads + h) * self.head_dim + row

    @property
    def macs(self) -> int:
        return self.matrices * self.rows * self.k * self.vectors

    @property
    def resident_elements(self) -> int:
        return self.matrices * self.rows * self.k


def mv_shape(program: Program, op_name: str) -> MVShape:
    op = next(o for o in program.ops if o.name == op_name)
    t = program.tensors
    if op.kind is OpKind.gemv:
        x, w = t[op.inputs[0]], t[op.inputs[1]]
        n, k = w.shape
        batch = 1
        for d in x.shape[:-1]:
            batch *= d
        part = Part(op.name, w.name, op.outputs[0], 0, n)
        return MVShape(
            op.name, op.kind, w.name, x.name, op.outputs[0], 1, n, k, batch, "gemv", batch=batch, parts=(part,)
        )
    if op.kind in (OpKind.attn_score, OpKind.attn_context):
        a = op.attrs
        heads, kvh, hd, pos = a["heads"], a["kv_heads"], a["head_dim"], a["position"]
        cache = t[op.inputs[1]]
        root = program.storage(cache.name) if hasattr(program, "storage") else cache.name
        batch, _, max_ctx, _ = cache.shape
        hpg = heads // kvh
        length = pos + 1
        if op.kind is OpKind.attn_score:
            return MVShape(
                op.name,
                op.kind,
                root,
                op.inputs[0],
                op.outputs[0],
                batch * kvh,
                length,
                hd,
                hpg,
                "score",
                batch,
                kvh,
                hpg,
                hd,
                max_ctx,
                heads,
            )
        return MVShape(
            op.name,
            op.kind,
            root,
            op.inputs[0],
            op.outputs[0],
            batch * kvh,
            hd,
            length,
            hpg,
            "context",
            batch,
            kvh,
            hpg,
            hd,
            max_ctx,
            heads,
        )
    raise ValueError(f"op {op_name} ({op.kind.value}) is not PIM-capable")


def head_group(shape: MVShape, group0: int, groups: int) -> MVShape:
    """An attention shape cut to kv heads group0..group0+groups-1 (every batch row): the scores
    or context of one head group, laid out and emitted as a matrix set of its own."""
    if shape.kind_key not in ("score", "context") or not 0 <= group0 < group0 + groups <= shape.kv_heads:
        raise ValueError(f"kv heads [{group0}, {group0 + groups}) of {shape.op} ({shape.kind_key})")
    return replace(shape, matrices=shape.batch * groups, groups=groups, group0=shape.group0 + group0)


def batch_range(shape: MVShape, batch0: int, rows: int) -> MVShape:
    """A shape cut to batch rows batch0..batch0+rows-1 of its op (a micro-batch): a gemv's input
    vectors and outputs of those rows, an attention op's matrices of those rows (every kv head),
    laid out and emitted as a matrix set of its own; the resident data is the same."""
    if shape.batch0 or not 0 <= batch0 < batch0 + rows <= shape.batch:
        raise ValueError(f"batch rows [{batch0}, {batch0 + rows}) of {shape.op} (batch {shape.batch})")
    if shape.kind_key == "gemv":
        return replace(shape, vectors=rows, batch0=batch0)
    return replace(shape, matrices=rows * shape.groups, batch0=batch0)


def fused_shape(program: Program, op_names: list[str], name: str) -> MVShape:
    """Gemv ops that read the same input vector, stacked along rows into one matrix."""
    shapes = [mv_shape(program, o) for o in op_names]
    first = shapes[0]
    if any(s.kind_key != "gemv" or s.vector != first.vector or s.k != first.k for s in shapes):
        raise ValueError(f"cannot fuse {op_names}: not gemvs of one input")
    parts, row0 = [], 0
    for s in shapes:
        parts.append(Part(s.op, s.resident, s.output, row0, s.rows))
        row0 += s.rows
    return MVShape(
        name,
        first.kind,
        first.resident,
        first.vector,
        first.output,
        1,
        row0,
        first.k,
        first.vectors,
        "gemv",
        batch=first.batch,
        parts=tuple(parts),
    )


def row_range(shape: MVShape, lo: int, hi: int, name: str) -> MVShape:
    """Rows [lo, hi) of a (possibly fused) gemv matrix as a matrix of its own: the parts it cuts
    keep the op rows and output rows they stand for (`src0`, `out_rows`). A GEMV split between
    the PIM units and the host is two such ranges."""
    if shape.kind_key != "gemv" or not 0 <= lo < hi <= shape.rows:
        raise ValueError(f"rows [{lo}, {hi}) of {shape.op} ({shape.kind_key}, {shape.rows} rows)")
    parts = []
    for p in shape.parts:
        a, b = max(lo, p.row0), min(hi, p.row0 + p.rows)
        if a < b:
            parts.append(Part(p.op, p.resident, p.output, a - lo, b - a, p.src0 + a - p.row0, p.op_rows))
    return MVShape(
        name,
        shape.kind,
        parts[0].resident,
        shape.vector,
        parts[0].output,
        1,
        hi - lo,
        shape.k,
        shape.vectors,
        "gemv",
        batch=shape.batch,
        parts=tuple(parts),
        k0=shape.k0,
        k_stride=shape.k_stride,
        batch0=shape.batch0,
    )


def k_range(shape: MVShape, k0: int, k1: int, name: str) -> MVShape:
    """Elements [k0, k1) of every row of a (possibly fused) gemv matrix as a matrix of its own:
    the same rows, outputs and staging, a shorter reduction. A GEMV k-split is such ranges on
    disjoint channels, whose read-outs add their partial sums into the same staging elements
    (solver/ksplit.py)."""
    if shape.kind_key != "gemv" or shape.k0 or shape.k_stride or not 0 <= k0 < k1 <= shape.k:
        raise ValueError(f"k range [{k0}, {k1}) of {shape.op} ({shape.kind_key}, k {shape.k})")
    return replace(shape, op=name, k=k1 - k0, k0=k0, k_stride=shape.k)
