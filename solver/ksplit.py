"""GEMVs split along k: a placement alternative where each channel holds half of every row.

In the row tilings every channel holds whole rows, so every channel must write the whole input
vector into its global buffer, chunk by chunk, between its MACs. A k-split mode puts columns
[0, K/2) of every row on the first half of the channel groups and [K/2, K) on the second, each
half tiled over its channels like a matrix of its own (`mvshape.k_range`): every channel holds
twice the rows, half as long, does the same MACs, writes half the input into its buffer (on a
one-bank-per-unit device, few enough bursts to fit in its row changes) and reads out twice the
accumulators. Both halves' read-outs add into the same staging elements (RDACC adds, fp32), and
the epilogue follows all of them.

The arithmetic changes: an output is fp32(A + B), A and B each accumulated in burst order over
its half, not one accumulation over k. The bit-true model takes the cut from where the program
placed the weights (`sim.bittrue.Dispatch.from_streams`). Two halves only: the staging starts at
0, so 0 + A + B = 0 + B + A exactly, whichever read-out lands first; a split in three or more
would make the result depend on the order the channels' read-outs arrive in.

Offered on every group count of at least two (even; the halves must be equal so that both run
the same commands), for a gemv whose k is a whole number of bursts per half, in the overlap
style. Lowering times both halves' channels (every distinct channel, as for any mode).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .mvshape import MVShape, k_range
from .payload import ModePayload, MVPayload, Role, Style, TaskRole, TilingKind, TooBig
from .problem import Edge, Group, Mode, Task

if TYPE_CHECKING:
    from .lower import Lowerer

PARTS = 2  # halves: see the module docstring for why not more


def k_cut(shape: MVShape, elements_per_burst: int) -> int | None:
    """The element where the second half of k starts (a burst boundary, equal halves), or None
    where the shape cannot be split so."""
    if shape.kind_key != "gemv" or shape.k0 or shape.k_stride or shape.k % (PARTS * elements_per_burst):
        return None
    return shape.k // PARTS


def k_halves(lw: Lowerer, shape: MVShape, name: str) -> list[tuple[tuple[Group, ...], MVShape]] | None:
    """The two (channel groups, k range) of a k-split of `shape`, or None where lowering does not
    offer one (see the module docstring)."""
    n = len(lw.groups)
    cut = k_cut(shape, lw.hw.elements_per_burst)
    if not lw.opt.k_split or lw.opt.style != Style.OVERLAP or cut is None or n < PARTS or n % PARTS:
        return None
    groups = tuple(lw.groups)
    return [(groups[: n // 2], k_range(shape, 0, cut, name)), (groups[n // 2 :], k_range(shape, cut, shape.k, name))]


def ksplit_modes(lw: Lowerer, name: str, shape: MVShape, tag_prefix: str = "ksplit") -> list[Mode]:
    """The k-split mode of gemv job `name` (a single or fused gemv), if it can be made."""
    hw = lw.hw
    halves = k_halves(lw, shape, name)
    if halves is None:
        return []
    tag = f"{tag_prefix}[all]"
    epi, epi_role = lw.epilogue_task(name, tag, shape)
    tasks, edges, inputs, roles, usage, payloads = [], [], [], {}, {}, []
    for i, (groups, half) in enumerate(halves):
        gnames = tuple(g.name for g in groups)
        channels = tuple(c for g in groups for c in g.channels)
        try:
            _, layout = lw.mv_timing(half, channels, Style.OVERLAP, "mv")
        except TooBig:
            return []
        for g, timing in lw.group_timings(layout, "mv", Style.OVERLAP, gnames).items():
            t = Task(f"{name}/{tag}/{g}", g, timing.duration, lw.refresh_credit(timing))
            tasks.append(t)
            inputs.append(t.name)
            roles[t.name] = TaskRole(Role.MV, i)
            edges.append(Edge(t.name, epi.name, hw.host.sync_cycles))
            usage[g] = layout.rows_per_bank
        payloads.append(MVPayload(TilingKind.MV, name, half, gnames, channels, Style.OVERLAP))
    roles[epi.name] = epi_role
    payload = ModePayload(tuple(payloads), roles)
    return [Mode(tag, tuple(tasks) + (epi,), tuple(edges), tuple(inputs), epi.name, usage, payload)]
