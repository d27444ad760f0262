"""A batch run as micro-batches: modes of every job that cut its batch rows into M equal parts
(issue 16, item 3).

Plain modes run an op on every batch row at once: the host's norm of a layer ends before any
unit starts the Q/K/V projections, the projections end before the host's rope, and so on. A
micro-batch mode runs the op once per micro-batch instead, so that the chain

    gemv(i) on the units -> sync -> EPI(i) -> norm/rope/softmax/... (i) on the host -> sync -> ...

of micro-batch i overlaps the units' work on micro-batch i + 1 (and the host's on i - 1):

- gemv job (single or fused), mode `mb{M}[all]`: per micro-batch a tiling of its input vectors
  and outputs of those rows (solver/mvshape.batch_range) over all channel groups, then one
  launch of its epilogues on those rows (EPI with a batch range, ISA 1.5). The micro-batches
  stream the same matrix, laid out once (`MVPayload.shares`): the units' MACs are the same in
  sum, each micro-batch pays its own row activations and buffer loads.
- attention job (with its KV append), mode `mb{M}[all]`: per micro-batch a tiling of those
  rows' matrices (their own KV caches) with the append of their new K/V rows, then EPI.
- host job (an op, or a chain of ops run as one launch), mode `mb{M}`: one launch per
  micro-batch (HOP with a batch range, the chain's later ops chained).

A task of micro-batch i reads rows [b0, b1) of its producers' results and waits for the
producer mode's task that makes them ready where it has one (`Mode.batch_rows`,
`Mode.batch_outputs`, `Mode.output_for`): a plain consumer waits for the whole result, a
micro-batch consumer of a plain producer for all of it. So each job chooses for itself, like any
alternative: a plain gemv between two micro-batched host ops is a legal program, only one that
pipelines less. A WRGB moves whole bursts: where an input row ends mid-burst, its last burst
reads into the next row, so a task that reads such rows waits for the next micro-batch's rows
too (`_spill_rows`). Within a mode the micro-batches keep their order on every resource (edges
of lag 0): they are identical, so this only removes equivalent orders.

Offered in the overlap style on a device with batch ranges (ISA 1.5), for a batch of at least
`MIN_BATCH` rows that M divides. What it costs: per micro-batch the launches, syncs and the row
activations and loads of a whole pass over the matrix; what it buys: host work hidden behind the
units' (at batch 4 on the presets the host is busy for about 2 % of a layer, so there is little
to hide; docs/results.md measures where it wins).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hwmodel.host_costs import MATRIX_KINDS, chain_cycles, epilogue_chain_cycles, has_batch_ranges, op_batch

from .mvshape import MVShape, batch_range
from .payload import MVPayload, Role, Style, TaskRole, TilingKind, TooBig
from .pieces import PieceChain, host_pieces_mode
from .problem import HOST, Axis, Mode, Task

if TYPE_CHECKING:
    from .lower import Lowerer

MICRO_BATCHES = (2,)  # M offered (those that divide the batch)
MIN_BATCH = 4  # batches smaller than this are not cut


def micro_batch_counts(lw: Lowerer, batch: int) -> list[int]:
    """The micro-batch counts offered for a job over `batch` rows: none for the vendor-style
    lowering (the naive baseline), a device whose ISA has no batch ranges, or a lowering told
    not to (`LowerOptions.micro_batch`)."""
    if lw.opt.style != Style.OVERLAP or not lw.opt.micro_batch or not has_batch_ranges(lw.hw) or batch < MIN_BATCH:
        return []
    return [m for m in MICRO_BATCHES if batch % m == 0]


def batch_ranges(batch: int, count: int) -> list[tuple[int, int]]:
    """[b0, b1) of each of `count` equal micro-batches."""
    per = batch // count
    return [(i * per, (i + 1) * per) for i in range(count)]


def _spill_rows(row_length: int, elements_per_burst: int) -> int:
    """Rows past its own a row's last buffer write reads (0 or 1): a WRGB or WR moves whole
    bursts, so a row of `row_length` elements that ends mid-burst is read up to the burst's end,
    into the next row (those lanes meet padding, but must have been written)."""
    return 1 if row_length % elements_per_burst else 0


def _launch(lw: Lowerer, cost, ops, rows: int) -> int:
    """Busy cycles of one launch of `ops` on `rows` batch rows (`cost`: host_costs.chain_cycles
    or epilogue_chain_cycles)."""
    index = {op.name: i for i, op in enumerate(lw.p.ops)}
    return max(1, sum(cost(lw.hw, lw.p, [index[o] for o in ops], rows)))


def mv_micro_batch_modes(
    lw: Lowerer, name: str, shape: MVShape, append: tuple[str, int] | None = None, append_op: str | None = None
) -> list[Mode]:
    """Micro-batch modes of a gemv job (single or fused) or an attention job (with its KV append)."""
    if shape.k0 or shape.k_stride:
        return []
    B = shape.batch
    gnames = tuple(g.name for g in lw.groups)
    channels = tuple(c for g in lw.groups for c in g.channels)
    epb = lw.hw.elements_per_burst
    gemv = shape.kind_key == "gemv"
    # the row length of the vectors the units' buffer writes read: a gemv's k, a score's query
    # head (head_dim), a context's probabilities (k = L); an append's new K/V head (head_dim)
    spill = _spill_rows(shape.k if shape.kind_key != "score" else shape.head_dim, epb)
    spill_append = _spill_rows(shape.head_dim, epb) if append is not None else 0
    modes = []
    for count in micro_batch_counts(lw, B):
        tag = f"mb{count}[all]"
        ranges = batch_ranges(B, count)
        subs = [batch_range(shape, b0, b1 - b0) for b0, b1 in ranges]
        try:
            # the micro-batches differ only in which rows they read and write: one structure
            _, layout = lw.mv_timing(subs[0], channels, Style.OVERLAP, "mv")
        except TooBig as e:
            lw.too_big[name] = min(lw.too_big.get(name, e.rows), e.rows)
            continue
        per_group = lw.group_timings(layout, "mv", Style.OVERLAP, gnames)
        chain = PieceChain(lw, name, tag, gnames, append, append_op, shape.op)
        rows: dict[str, tuple[int, int]] = {}
        for i, (b0, b1) in enumerate(ranges):
            epi = Task(f"{name}/{tag}/epi/b{i}", HOST, _launch(lw, epilogue_chain_cycles, shape.ops, b1 - b0))
            epi_role = TaskRole(Role.EPI_BATCH, (tuple(shape.ops), b0, b1 - b0))
            for t, a in chain.add(i, f"b{i}", per_group, layout, epi, epi_role):
                if a is not None:
                    rows[a.name] = (b0, min(B, b1 + spill_append))
                rows[t.name] = (b0, min(B, b1 + spill))
        # a gemv's micro-batches stream one matrix laid out once; attention's read caches of their own
        usage = {g: layout.rows_per_bank * (1 if gemv else count) for g in gnames}
        tilings = tuple(
            MVPayload(TilingKind.MV, name, sub, gnames, channels, Style.OVERLAP, append, 0 if gemv and i else None)
            for i, sub in enumerate(subs)
        )
        ready = tuple((b0, b1, e.name) for (b0, b1), e in zip(ranges, chain.epis))
        modes.append(chain.mode(tag, usage, tilings, batch_rows=rows, batch_outputs={op: ready for op in shape.ops}))
    return modes


def host_micro_batch_modes(lw: Lowerer, name: str, ops: list[str]) -> list[Mode]:
    """Micro-batch modes of a host job: op `ops[0]`, or a chain of ops run as one launch."""
    members = [lw.p.op(o) for o in ops]
    batches = {op_batch(lw.p, op) for op in members}
    if len(batches) != 1 or any(op.kind.value in MATRIX_KINDS for op in members):
        return []
    B = batches.pop()
    if B == 0:
        return []
    modes = []
    for count in micro_batch_counts(lw, B):
        tag = f"mb{count}"
        ranges = batch_ranges(B, count)
        hops = [
            Task(f"{name}/{tag}/b{i}", HOST, _launch(lw, chain_cycles, ops, b1 - b0))
            for i, (b0, b1) in enumerate(ranges)
        ]
        roles = {t.name: TaskRole(Role.HOP_BATCH, (tuple(ops), b0, b1 - b0)) for t, (b0, b1) in zip(hops, ranges)}
        modes.append(host_pieces_mode(tag, hops, roles, ranges, Axis.BATCH, ops))
    return modes
