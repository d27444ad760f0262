"""Attention pipelined by head groups: modes of the score, softmax and context jobs that cut the
heads into G groups of whole GQA groups (issue 16, item 3).

Plain modes run an attention op whole: every unit ends its scores before the host's softmax
starts, and the softmax ends before any context MAC. A head-group mode runs one op per head
group instead, so that the chain

    scores(i) on the units -> sync -> EPI(i) -> softmax(i) on the host -> sync -> context(i)

of group i overlaps the units' work on group i + 1 (and the host's on group i - 1):

- score job, mode `heads{G}[all]`: per head group i a tiling of kv heads [i*K/G, (i+1)*K/G) of
  every batch row (solver/mvshape.head_group) over all channel groups, each with its KV append
  (the new K of those kv heads), then its epilogue on the host: EPI with that head range
  (ISA 1.4). The head range's result is ready after EPI(i) (`Mode.head_outputs`).
- softmax job, mode `heads{G}`: one HOP per head group on that head range, each waiting for the
  score job's result for its heads only (`Mode.heads`: EPI(i) when the score job runs the same
  or coarser head groups, else its whole output).
- context job, mode `heads{G}[all]`: per head group its V tiling, KV append and MVs, the MVs
  waiting for that group's probabilities (and those of the heads its last buffer writes spill
  into, `_spilled_heads`); then EPI(i) with the head range.

Each mode is a job's alternative like any other: the solvers choose per job (a plain score job
feeding a head-group softmax is a legal program, only a slower one), and dependencies follow
`SchedulingProblem.links`. Every task's duration is exact: the head group's tiling emitted and
timed on every distinct channel (Lowerer.group_timings), the host tasks from hwmodel.host_costs
with the head range. Within a mode, the head groups keep their order on every resource (edges of
lag 0 between consecutive groups' MVs on one channel group and their host tasks; the KV appends
are free): the groups are identical, so this only removes equivalent orders from the search.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hwmodel.host_costs import epilogue_cycles, has_head_ranges, host_op_cycles
from ir import OpKind

from .mvshape import MVShape, head_group
from .payload import MVPayload, Role, Style, TaskRole, TilingKind, TooBig
from .pieces import PieceChain, host_pieces_mode
from .problem import HOST, Axis, Mode, Task

if TYPE_CHECKING:
    from .lower import Lowerer

HEAD_GROUP_COUNTS = (2, 4)  # G offered (those that divide the kv heads)


def head_group_counts(lw: Lowerer, kv_heads: int) -> list[int]:
    """The head-group counts offered for an attention op of `kv_heads` kv heads: none for the
    vendor-style lowering (the naive baseline), a device whose ISA has no head ranges, or a
    lowering told not to (`LowerOptions.head_groups`)."""
    if lw.opt.style != Style.OVERLAP or not lw.opt.head_groups or not has_head_ranges(lw.hw):
        return []
    return [g for g in HEAD_GROUP_COUNTS if g <= kv_heads and kv_heads % g == 0]


def head_ranges(shape: MVShape, count: int) -> list[tuple[int, int]]:
    """[h0, h1) query heads of each of `count` head groups (whole GQA groups)."""
    per = shape.kv_heads // count * shape.heads_per_group
    return [(i * per, (i + 1) * per) for i in range(count)]


def attention_head_group_modes(
    lw: Lowerer, name: str, shape: MVShape, append: tuple[str, int] | None, append_op: str | None
) -> list[Mode]:
    """Head-group modes of an attention job (attn_score or attn_context, with its KV append)."""
    modes = []
    index = {op.name: i for i, op in enumerate(lw.p.ops)}
    op_index = index[shape.op]
    gnames = tuple(g.name for g in lw.groups)
    channels = tuple(c for g in lw.groups for c in g.channels)
    style = lw.opt.style
    for count in head_group_counts(lw, shape.kv_heads):
        tag = f"heads{count}[all]"
        ranges = head_ranges(shape, count)
        kpg = shape.kv_heads // count
        try:
            layouts = [lw.mv_timing(head_group(shape, i * kpg, kpg), channels, style, "mv")[1] for i in range(count)]
        except TooBig as e:
            lw.too_big[name] = min(lw.too_big.get(name, e.rows), e.rows)
            continue
        spill = _spilled_heads(shape, lw.hw.elements_per_burst)
        if shape.kind_key == "context" and spill > kpg * shape.heads_per_group:
            continue  # a row's last buffer write would read past the next head group's probabilities
        chain = PieceChain(lw, name, tag, gnames, append, append_op, shape.op)
        heads: dict[str, tuple[int, int]] = {}
        for i, ((h0, h1), layout) in enumerate(zip(ranges, layouts)):
            per_group = lw.group_timings(layout, "mv", style, gnames)
            epi = Task(f"{name}/{tag}/epi{i}/{shape.op}", HOST, max(1, epilogue_cycles(lw.hw, lw.p, op_index, h1 - h0)))
            epi_role = TaskRole(Role.EPI_HEADS, (shape.op, h0, h1 - h0))
            for t, _append in chain.add(i, f"h{i}", per_group, layout, epi, epi_role):
                if shape.kind_key == "context":
                    heads[t.name] = (h0, min(shape.heads, h1 + spill))  # the probabilities it reads
        usage = {g: sum(lay.rows_per_bank for lay in layouts) for g in gnames}
        tilings = tuple(MVPayload(TilingKind.MV, name, lay.t.shape, gnames, channels, style, append) for lay in layouts)
        ready = tuple((h0, h1, e.name) for (h0, h1), e in zip(ranges, chain.epis))
        modes.append(chain.mode(tag, usage, tilings, heads=heads, head_outputs={shape.op: ready}))
    return modes


def _spilled_heads(shape: MVShape, elements_per_burst: int) -> int:
    """Heads past its own whose probabilities a context head's buffer writes read: a WRGB moves
    whole bursts, so a row of L probabilities that ends mid-burst is read up to the burst's end,
    into the next heads' rows ([B, H, L] is contiguous). Those lanes meet zero padding of the V
    cache, but they must have been written (the functional simulator refuses a read of an
    unwritten element, which may hold anything, NaN included): the context of a head group
    waits for the softmax of the heads it spills into. (The last head of a batch row spills into
    the next row's first heads: the last head group waits for the whole softmax anyway.)"""
    if shape.kind_key != "context":
        return 0
    length = shape.k
    padded = -(-length // elements_per_burst) * elements_per_burst
    return -(-(padded - length) // length)


def softmax_head_group_modes(lw: Lowerer, op_name: str) -> list[Mode]:
    """Head-group modes of a softmax between an attn_score and an attn_context op: one HOP per
    head group, each on its head range."""
    p = lw.p
    op = p.op(op_name)
    producers = p.producers()
    src = producers.get(op.inputs[0])
    if src is None or p.op(src).kind is not OpKind.attn_score:
        return []
    consumers = [o for o in p.ops if op.outputs[0] in o.inputs]
    if not consumers or any(o.kind is not OpKind.attn_context for o in consumers):
        return []
    a = p.op(src).attrs
    heads, kv_heads = a["heads"], a["kv_heads"]
    op_index = next(i for i, o in enumerate(p.ops) if o.name == op_name)
    modes = []
    for count in head_group_counts(lw, kv_heads):
        per = heads // count
        ranges = [(i * per, (i + 1) * per) for i in range(count)]
        tag = f"heads{count}"
        hops = [
            Task(f"{op_name}/{tag}/hop{i}", HOST, host_op_cycles(lw.hw, p, op_index, h1 - h0))
            for i, (h0, h1) in enumerate(ranges)
        ]
        roles = {t.name: TaskRole(Role.HOP_HEADS, (op_name, h0, h1 - h0)) for t, (h0, h1) in zip(hops, ranges)}
        modes.append(host_pieces_mode(tag, hops, roles, ranges, Axis.HEADS, (op_name,)))
    return modes
