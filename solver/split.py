"""GEMVs split between the PIM units and the host: a dispatch alternative at row granularity.

At large batch a PIM unit spends `batch` MACs on every weight burst, while reading the burst over
the link costs the channel one burst slot: the host matrix unit, idle during the GEMV, can take
the last rows of the matrix. A split mode of a (possibly fused) gemv job:

- per group: an RD task that reads rows [R - h, R) over the link into the weights' host copies
  (it needs no input, so it may run before the job's producers are done), then the PIM task over
  rows [0, R - h) (the same emission as the all-group PIM mode);
- on the host: HMV for those rows (one launch; a fused matrix gets one HMV per op it cuts), adding
  into the staging tensors the PIM read-outs add into, after every RD;
- the epilogue(s), after every PIM task and the HMV.

h is offered at the two multiples of the unit count around the balance point
h / R = (P - D - 2 sync) / (P - Rd + H), with P the all-PIM task duration, Rd the groups' time to
read all rows over the link, H the host's cycles for all rows and D its dispatch cost, where it
takes at least 2 % of P off the groups: (h / R)(P - Rd) >= 0.02 P. That leaves batch 16 on
`hbm2-pim` (P ~ 2.6 Rd); on `gddr6-aim` reading a burst costs the channel about what its 16 MACs
do, and at batch 1 and 4 reading costs as much as computing or more.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hwmodel.host_costs import mv_chain_cycles

from .mvshape import MVShape, row_range
from .payload import ModePayload, MVPayload, Role, Style, TaskRole, TilingKind, TooBig
from .problem import HOST, Edge, Mode, Task

if TYPE_CHECKING:
    from .lower import Lowerer

MIN_GAIN = 0.02  # a split that saves the groups less than this share of their work is not offered


def host_rows_candidates(lw: Lowerer, shape: MVShape, pim_duration: int, read_duration: int) -> list[int]:
    """Host rows h to offer: the multiples of the unit count around the balance point, where the
    groups' work (1 - f) P + f Rd equals the host's f H + D + 2 sync (f = h / R)."""
    hw = lw.hw
    q = hw.total_pus
    rows = shape.rows
    if read_duration >= pim_duration:  # every row moved to the host costs the channels more
        return []
    host_all = shape.vectors * rows * shape.k / hw.host.matrix_macs_per_cycle
    fixed = hw.host.dispatch_cycles + 2 * hw.host.sync_cycles
    h = rows * (pim_duration - fixed) / (pim_duration - read_duration + host_all)
    if h < q / 2:
        return []
    lo, hi = int(h // q) * q, -(-int(h) // q) * q
    # worth a mode only if it takes MIN_GAIN of the groups' work off them
    return sorted(
        {
            c
            for c in (lo, hi)
            if 0 < c <= rows - q and c / rows * (pim_duration - read_duration) >= MIN_GAIN * pim_duration
        }
    )


def hmv_list(host_shape: MVShape) -> tuple[tuple[str, int, int], ...]:
    """(op, first op row, rows) of each HMV the host part needs, in row order."""
    return tuple((p.op, p.src0, p.rows) for p in host_shape.parts)


def split_modes(lw: Lowerer, name: str, shape: MVShape, tag_prefix: str = "split") -> list[Mode]:
    """Split modes of gemv job `name` over all groups (see the module docstring)."""
    hw = lw.hw
    if (
        lw.opt.style != Style.OVERLAP
        or not lw.opt.host_gemv
        or shape.kind_key != "gemv"
        or shape.k % hw.elements_per_burst
    ):
        return []
    channels = tuple(c for g in lw.groups for c in g.channels)
    gnames = tuple(g.name for g in lw.groups)
    try:
        full, _ = lw.mv_timing(shape, channels, lw.opt.style, "mv")
        read_all, _ = lw.mv_timing(shape, channels, lw.opt.style, "rd")
    except TooBig:
        return []
    index = {op.name: i for i, op in enumerate(lw.p.ops)}
    sync = hw.host.sync_cycles
    modes = []
    for h in host_rows_candidates(lw, shape, full.duration, read_all.duration):
        pim_shape = row_range(shape, 0, shape.rows - h, name)
        host_shape = row_range(shape, shape.rows - h, shape.rows, name)
        try:
            _, pim_layout = lw.mv_timing(pim_shape, channels, lw.opt.style, "mv")
            _, rd_layout = lw.mv_timing(host_shape, channels, lw.opt.style, "rd")
        except TooBig:
            continue
        tag = f"{tag_prefix}{h}[all]"
        hmvs = hmv_list(host_shape)
        busy = mv_chain_cycles(hw, lw.p, [(index[op], rows) for op, _r0, rows in hmvs])
        hmv = Task(f"{name}/{tag}/hmv", HOST, max(1, sum(busy)))
        epi, epi_role = lw.epilogue_task(name, tag, shape)
        tasks, edges, inputs, roles = [], [], [], {}
        pim_by_group = lw.group_timings(pim_layout, "mv", lw.opt.style, gnames)
        rd_by_group = lw.group_timings(rd_layout, "rd", lw.opt.style, gnames)
        for g in gnames:
            pim, rd = pim_by_group[g], rd_by_group[g]
            t = Task(f"{name}/{tag}/{g}", g, pim.duration, lw.refresh_credit(pim))
            r = Task(f"{name}/{tag}/{g}/rd", g, rd.duration, lw.refresh_credit(rd))
            tasks += [r, t]
            inputs.append(t.name)
            roles[t.name], roles[r.name] = TaskRole(Role.MV, 0), TaskRole(Role.RD, 1)
            # the reads go first: the host works on its rows while the units work on theirs
            edges += [Edge(r.name, t.name, 0), Edge(t.name, epi.name, sync), Edge(r.name, hmv.name, sync)]
        edges.append(Edge(hmv.name, epi.name, 0))
        inputs.append(hmv.name)
        roles[hmv.name], roles[epi.name] = TaskRole(Role.HMVS, hmvs), epi_role
        usage = {g: pim_layout.rows_per_bank + rd_layout.rows_per_bank for g in gnames}
        payload = ModePayload(
            (
                MVPayload(TilingKind.MV, name, pim_shape, gnames, channels, lw.opt.style),
                MVPayload(TilingKind.HOSTGEMV, name, host_shape, gnames, channels, lw.opt.style),
            ),
            roles,
        )
        modes.append(Mode(tag, tuple(tasks) + (hmv, epi), tuple(edges), tuple(inputs), epi.name, usage, payload))
    return modes
