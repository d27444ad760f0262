"""The hardware bound's streaming term, split into the parts a program's MAC stream has (issue 16:
"the remaining distance explained term by term in the report").

`hardware_bound` takes the largest of several counts (solver/hardware_bound.py): the unit view,
the channel view at the best share of its gaps against link reads, each at the best fraction of
the gemvs on the host, and the other terms. For a report, this module counts one of them in
parts: every op in memory (no host share), the unit view or, where its buffer loads and
read-outs cost something (`phase_gaps`), the channel view at share 1, whichever is larger. Its
parts, in cycles of the busiest channel:

- `mac`: each unit's MACs at the MAC interval (the resident bursts x vectors / units);
- `row_changes`: with one bank per unit, each unit's row changes (the unit view);
- `boundaries`: the load or read-out boundaries the buffer and accumulator sizes force (the
  channel view);
- `first`: the first activation (unit view) or the first load (channel view);
- `refresh_and_end`: REFs with their row commands, and what follows the last MAC (read-out,
  sync, the least epilogue), as ChannelEnds stretches the work.

They sum to `total`. The bound itself differs from it by `relaxation` (the streaming term
minus `total`: negative where the host's share of gemvs, or in the channel view the share of the
gaps given to link reads, lowers the count; positive where the host's own work, which the
streaming term's T must also cover, raises it) and `other_term` (a larger term than streaming
binds: the critical path, the host): parts + relaxation + other_term = the hardware bound,
exactly.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from math import ceil

from hwmodel import Hardware
from ir import Program

from .hardware_bound import (
    HardwareBound,
    Term,
    first_activation,
    host_tail,
    op_work,
    resident_bursts,
    unit_ends,
    with_refresh,
)
from .mvshape import mv_shape
from .turnaround_bound import channel_ends, phase_gaps


@dataclass(frozen=True)
class StreamingParts:
    view: str  # "unit" or "channel"
    mac: int
    row_changes: int
    boundaries: int
    first: int
    refresh_and_end: int
    relaxation: int
    other_term: int

    @property
    def gaps(self) -> int:
        """What the bound counts between MACs: row changes and boundaries."""
        return self.row_changes + self.boundaries

    @property
    def total(self) -> int:
        """Every op in memory, in this view: the parts' sum."""
        return self.mac + self.row_changes + self.boundaries + self.first + self.refresh_and_end

    def as_dict(self) -> dict:
        return asdict(self)


def streaming_parts(hw: Hardware, program: Program, bound: HardwareBound) -> StreamingParts | None:
    """The parts (module docstring) of `bound`, the program's hardware bound; None for a program
    with no op in memory."""
    pus = hw.total_pus
    pim = [op for op in program.ops if op.pim_capable]
    if not pim:
        return None
    mac_work = sum(resident_bursts(hw, program, op.name) * mv_shape(program, op.name).vectors for op in pim)
    mac = mac_work / pus * hw.mac_interval
    t_refi = hw.timing.p("tREFI")
    views = []
    # the unit view: MACs, a one-bank unit's row changes, the first activation
    work = op_work(hw, program)
    rows = sum(w.pim for w in work) - mac
    first = first_activation(hw, reads=False)
    w = ceil(mac + rows + first - 1e-6)
    ends = unit_ends(hw, program, work)(False)
    total = ends.stretch(t_refi, w) if ends is not None else with_refresh(hw, w)
    views.append(("unit", round(rows), 0, first, w, total))
    gaps = phase_gaps(hw)
    if gaps.gap > 0:  # the channel view at share 1: MACs and the boundaries they force
        # per unit MAC one boundary per A x B MACs, less one: the first load (at most a boundary)
        boundaries = sum(x.pim for x in op_work(hw, program, gaps, 1.0)) - mac - gaps.gap
        fill = min(gaps.first_load, gaps.gap)
        w = ceil(mac + boundaries + fill - 1e-6)
        ends = channel_ends(hw, gaps, 1.0, host_tail(hw, program), reads=False)
        total = ends.stretch(t_refi, w) if ends.trfc else with_refresh(hw, w, gaps=gaps)
        views.append(("channel", 0, round(boundaries), round(fill), w, total))
    view, rows, boundaries, first, w, total = max(views, key=lambda v: v[-1])
    if boundaries < 0:  # fewer MACs than one phase holds: the count's share of the first load
        first, boundaries = max(0, first + boundaries), 0
    streaming = next(t.cycles for t in bound.terms if t.term is Term.STREAMING)
    mac_int = w - rows - boundaries - first  # (rounded so that the parts sum to w)
    return StreamingParts(
        view,
        mac_int,
        rows,
        boundaries,
        first,
        total - w,
        streaming - total,
        bound.cycles - streaming,
    )
