"""Lowering: ir.Program + Hardware -> SchedulingProblem with exact task durations.

Jobs follow the program in topological order:
- a gemv becomes a job whose modes are PIM tilings over channel-group subsets (all groups,
  each half, each single group) and, as dispatch alternatives, the host (weights read over
  the link, GEMM on the host matrix unit) and a split of its rows between both (solver/split.py);
- kv_append + attn_score and kv_append + attn_context become one job each (the append writes
  where the attention op's layout keeps the cache), PIM over group subsets, and pipelined by
  head groups (solver/head_groups.py: the score job, the softmax between them and the context
  job each get modes that run one head group at a time);
- every other op is a host job (one HOP task);
- at batch 4 or more, every job also gets modes that run it as micro-batches
  (solver/micro_batch.py), so that one micro-batch's host work overlaps another's GEMVs.
Every task's duration comes from emitting its commands and issuing them with the hardware
model's timing rules (`task_timing`), on every distinct channel of its group: a group's task
lasts what its slowest channel takes, as in the decoded program. Durations are cached per
channel signature (op shape, tiling, channel position): repeated layers cost one emission. With a
`TimingCache` handed in, they are shared with every lowering of hardware of the same timing
fingerprint (a sweep over host fields emits and times no task twice).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from hwmodel import Hardware
from hwmodel.host_costs import chain_cycles, epilogue_chain_cycles, epilogue_cycles, host_op_cycles
from ir import OpKind, Program

from .alternatives import Alternative
from .emit_mv import MVEmitter
from .fusion import fusion_groups, host_chains
from .head_groups import attention_head_group_modes, softmax_head_group_modes
from .host_emit import emit_weight_read
from .ksplit import k_halves, ksplit_modes
from .launch_chain import chain_launches
from .layout import Layout
from .micro_batch import host_micro_batch_modes, mv_micro_batch_modes
from .mvshape import MVShape, fused_shape, mv_shape
from .pair_bus import round_shift
from .payload import ModePayload, MVPayload, Role, Style, TaskRole, TilingKind, TooBig
from .problem import HOST, Dependency, Edge, Group, Job, Mode, Refresh, SchedulingProblem, Task
from .refresh_points import round_busy, round_span
from .split import split_modes
from .symbols import Symbols
from .task_timing import StructureTimings, TaskTiming, TimingCache, TimingStore
from .tiling import Tiling, channel_signature, make_tiling, structure_key


@dataclass(frozen=True)
class LowerOptions:
    groups: int = 4
    style: Style = Style.OVERLAP
    host_gemv: bool = True  # offer host dispatch for gemv
    subsets: str = "all"  # "all" (every candidate subset) | "full" (only all groups)
    fuse: bool = True  # offer fused modes for gemvs that share their input
    k_split: bool = True  # offer gemvs split along k over two halves of the groups (solver/ksplit.py)
    head_groups: bool = True  # offer attention by head groups (solver/head_groups.py)
    micro_batch: bool = True  # offer batches run as micro-batches (solver/micro_batch.py)

    def __post_init__(self) -> None:
        object.__setattr__(self, "style", Style(self.style))  # accept the value's string too

    @staticmethod
    def without(withheld, **kw) -> LowerOptions:
        """Options offering every Alternative but those `withheld`."""
        w = {Alternative(a) for a in withheld}
        return LowerOptions(
            host_gemv=Alternative.HOST_GEMV not in w,
            fuse=Alternative.FUSION not in w,
            k_split=Alternative.K_SPLIT not in w,
            head_groups=Alternative.HEAD_GROUPS not in w,
            micro_batch=Alternative.MICRO_BATCH not in w,
            **kw,
        )


@dataclass(frozen=True)
class ChannelPart:
    """The tilings one lowering worker times (solver/lower_parallel.py): those over a channel
    count in `counts`, or with `others` over any other count. The parts of one op split its
    candidates between processes; whatever none of them times, the serial pass times."""

    counts: frozenset[int]
    others: bool = False

    def covers(self, channels: int) -> bool:
        return (channels in self.counts) != self.others


class OtherPart(TooBig):
    """A tiling another worker's part times: not a candidate here (only raised in a worker)."""

    def __init__(self) -> None:
        super().__init__(0)


@dataclass
class Lowering:
    hw: Hardware
    program: Program
    options: LowerOptions
    groups: list[Group]
    timings: dict[tuple, TaskTiming] = field(default_factory=dict)
    # timings by task structure (StructureTimings): what lowering timed, then what the bound's
    # exact durations and every decode of this lowering time
    structures: dict[tuple, TaskTiming] = field(default_factory=dict)
    max_tail: int = 0  # max over timed tasks of duration - completion (quiet end after last data)
    # the timings shared with other lowerings of the same timing fingerprint (None: not shared)
    shared: TimingStore | None = None

    # timed choices per (shape, channels, style) of an MV tiling: split MAC runs, vectors per group
    split_macs: dict[tuple, bool] = field(default_factory=dict)
    vector_groups: dict[tuple, int] = field(default_factory=dict)
    double_buffers: dict[tuple, bool] = field(default_factory=dict)

    def tiling(self, shape: MVShape, channels: tuple[int, ...], style: str, kind: TilingKind = TilingKind.MV) -> Tiling:
        """The tiling lowering timed (and decode lays out): for MV tilings with the choices made
        when they were timed; a weight read (host GEMV) keeps the default vector groups."""
        key = (_signature(shape), len(channels), style)
        split = self.split_macs.get(key, True)
        mv = kind == TilingKind.MV
        vg = self.vector_groups.get(key) if mv else None
        overlap = style == Style.OVERLAP
        double = self.double_buffers.get(key, overlap) if mv else overlap
        return make_tiling(
            self.hw, shape, channels, double_buffer=double, interleave=overlap, split_macs=split, max_vg=vg
        )


def make_groups(hw: Hardware, count: int, capacity_rows: int) -> list[Group]:
    """`count` groups of consecutive channels (fewer where they do not divide the channels); on a
    shared-bus device (organization.command_bus = shared_pair) each group holds whole pairs, so
    the two channels of a pair never run different groups' tasks (solver/pair_bus.py)."""
    ch = hw.organization.channels
    count = max(1, min(count, ch))
    pairs = hw.organization.shared_bus
    while ch % count or (pairs and count > 1 and (ch // count) % 2):
        count -= 1
    size = ch // count
    return [Group(f"g{i}", tuple(range(i * size, (i + 1) * size)), capacity_rows) for i in range(count)]


def group_subsets(groups: list[Group], which: str) -> list[tuple[int, ...]]:
    n = len(groups)
    subsets = [tuple(range(n))]
    if which == "full" or n == 1:
        return subsets
    if n >= 4:
        subsets += [tuple(range(n // 2)), tuple(range(n // 2, n))]
    subsets += [(i,) for i in range(n)]
    return subsets


def _vector_group_candidates(vg: int) -> list[int]:
    """Vectors per group to time, most first: the default, then halving down to one."""
    out = [vg]
    while out[-1] > 1:
        out.append(out[-1] // 2)
    return out


def _signature(shape: MVShape) -> tuple:
    return (shape.kind_key, shape.matrices, shape.rows, shape.k, shape.vectors)


class Lowerer:
    def __init__(self, hw: Hardware, program: Program, options: LowerOptions, timings: TimingCache | None = None):
        self.hw, self.p, self.opt = hw, program, options
        self.groups = make_groups(hw, options.groups, hw.organization.rows)
        shared = None if timings is None else timings.store(hw, renew=False)
        self.lowering = Lowering(hw, program, options, self.groups, shared=shared)
        self.structures = StructureTimings(hw, self.lowering.structures, shared)  # what decode will look up
        self.host_cycles = HostCosts(hw, program)
        self._round_charge: int | None = None  # Refresh.tRFC, once a task carries refreshes
        self.too_big: dict[str, int] = {}  # job -> rows per bank its smallest rejected tiling needs
        # MV structure -> its emission split a MAC run (shared with the timings: a structure timed
        # by another lowering is not emitted here)
        self._split_used: dict[tuple, bool] = {} if shared is None else shared.split_used
        self._keys: dict[int, tuple] = {}  # id(tiling) -> (tiling, structure_key, {ci: signature})
        self._part: ChannelPart | None = None  # (a worker's: build(part=...))

    def _key(self, kind: str, style: str, t: Tiling, ci: int) -> tuple:
        """StructureTimings.key, its parts computed once per tiling and channel."""
        memo = self._keys.get(id(t))
        if memo is None or memo[0] is not t:
            memo = self._keys[id(t)] = (t, structure_key(t), {})
        sig = memo[2].get(ci)
        if sig is None:
            sig = memo[2][ci] = channel_signature(t, ci)
        return (kind, style, memo[1]), sig

    # ---- timing of one task (cached) ---------------------------------------------------------
    def _channel_timing(
        self, layout: Layout, kind: str, style: str, ci: int, even: tuple[tuple, TaskTiming] | None = None
    ) -> TaskTiming:
        """The task of channel `ci` of `layout`, emitted and timed once per channel signature
        (channels of one signature run the same commands: StructureTimings); even: (structure
        key, timing) of the other pseudo-channel of its pair on a shared bus, to which it yields."""
        key = self._key(kind, style, layout.t, ci)
        if kind == "mv":

            def emit():
                emitter = MVEmitter(self.hw, layout, Symbols(), style)
                seq = emitter.emit(ci)
                self._split_used[key] = emitter.split_used
                return seq
        else:
            emit = lambda: emit_weight_read(self.hw, layout, Symbols(), ci)
        tt = self.structures.structure(key, emit) if even is None else self.structures.paired(*even, key, emit)
        self.lowering.max_tail = max(self.lowering.max_tail, tt.duration - tt.completion)
        return tt

    def _split(self, layout: Layout, style: str, ci: int) -> bool:
        """Whether channel `ci`'s emission split a MAC run (unknown: assume it did)."""
        return self._split_used.get(self._key("mv", style, layout.t, ci), True)

    def _slowest(self, layout: Layout, kind: str, style: str, cis) -> TaskTiming:
        """The slowest of channels `cis` (positions in the tiling): every distinct channel timed,
        as the decoder does, so a group's task lasts what its slowest channel takes (on a
        shared-bus device: the later of each pair's two copies, the odd one staggered as the
        decoder staggers it, solver/pair_bus.py)."""
        at = {layout.t.channels[ci]: ci for ci in cis}
        tts: dict[int, TaskTiming] = {}
        for c in sorted(at):
            even = None
            if self.hw.organization.shared_bus and c % 2 and c - 1 in at:
                even = (self._key(kind, style, layout.t, at[c - 1]), tts[c - 1])
            tts[c] = self._channel_timing(layout, kind, style, at[c], even)
        return max(tts.values(), key=lambda tt: tt.duration)

    def group_timings(self, layout: Layout, kind: str, style: str, gnames) -> dict[str, TaskTiming]:
        """Per group of the tiling: the timing of its slowest channel."""
        pos = {c: i for i, c in enumerate(layout.t.channels)}
        return {g: self._slowest(layout, kind, style, [pos[c] for c in self._group(g).channels]) for g in gnames}

    def mv_timing(self, shape: MVShape, channels: tuple[int, ...], style: str, kind: str) -> tuple[TaskTiming, Layout]:
        """The tiling of `shape` over `channels` (its timed choices made on first use) and the
        timing of its slowest channel."""
        if self._part is not None and not self._part.covers(len(channels)):
            raise OtherPart()
        tiling = self.lowering.tiling(shape, channels, style, TilingKind.MV if kind == "mv" else TilingKind.HOSTGEMV)
        layout = Layout(self.hw, tiling)
        if layout.rows_per_bank > self.hw.organization.rows:
            raise TooBig(layout.rows_per_bank)
        every = range(len(channels))
        key = (kind, _signature(shape), len(channels), style)
        if key not in self.lowering.timings:
            if kind == "mv":
                # vectors per group and split MAC runs (to carry global-buffer loads): whichever
                # makes the slowest channel faster; fewer vectors per group are tried while they
                # keep getting faster. The naive lowering (the vendor-library baseline) keeps the
                # default grouping.
                # The overlap style also times a single global buffer (chunks of the whole
                # buffer, loaded between chunks, rows still ping-ponged): where buffer writes go
                # over the data bus each load block pays both read/write turnarounds wherever it
                # sits, so half as many blocks beat loads hidden under the MACs.
                choice_key = (_signature(shape), len(channels), style)
                best = None
                overlap = style == Style.OVERLAP
                for double in (True, False) if overlap and tiling.double_buffer else (tiling.double_buffer,):
                    first = (
                        tiling
                        if double == tiling.double_buffer
                        else make_tiling(self.hw, shape, channels, double_buffer=double, interleave=overlap)
                    )
                    best_db = None
                    tried = _vector_group_candidates(first.vg) if self.opt.style == Style.OVERLAP else [first.vg]
                    for vg in tried:
                        base = (
                            first
                            if vg == first.vg
                            else make_tiling(
                                self.hw, shape, channels, double_buffer=double, interleave=first.interleave, max_vg=vg
                            )
                        )
                        if Layout(self.hw, base).rows_per_bank > self.hw.organization.rows:
                            continue
                        best_here = None
                        for split in (True, False):
                            lay = Layout(self.hw, replace(base, split_macs=split))
                            tt = self._slowest(lay, kind, style, every)
                            if best_here is None or tt.duration < best_here[2].duration:
                                best_here = (vg, split, tt, lay, double)
                            if not any(self._split(lay, style, ci) for ci in every):
                                break  # no MAC run was split: the unsplit tiling emits the same commands
                        if best_db is not None and best_here[2].duration >= best_db[2].duration:
                            break
                        best_db = best_here
                    if best_db is not None and (best is None or best_db[2].duration < best[2].duration):
                        best = best_db
                vg, self.lowering.split_macs[choice_key], tt, layout, double = best
                self.lowering.vector_groups[choice_key] = vg
                self.lowering.double_buffers[choice_key] = double
            else:
                tt = self._slowest(layout, kind, style, every)
            self.lowering.timings[key] = tt
        return self.lowering.timings[key], layout

    def refresh_credit(self, timing: TaskTiming) -> int:
        """The lumped refresh's charge per round (Refresh.tRFC: round_busy + round_shift, the
        pair's odd channel refreshing a cycle later between tasks) for each round of refreshes
        the task carries itself (on the channel it was timed on). The same charge the model adds
        per round, so a task's own rounds cost it nothing twice; a credit of round_busy alone let
        the model charge round_shift for each of them, and its proven bound exceeded a program
        by as much (GEMV 4096 b2 on 16 hbm2-pim channels, shared command pairs: 85,404 against
        85,384 for 20 rounds of its own; bench/whatif_fuzz.py --size large case 528)."""
        if not timing.refreshes:
            return 0
        if self._round_charge is None:
            self._round_charge = round_busy(self.hw) + round_shift(self.hw)
        return self._round_charge * len(timing.refreshes)

    def _append_timing(self, layout: Layout, new: str, position: int, group: str) -> int:
        """The KV append of one group: its longest channel's (1 when it writes nothing there),
        as the decoder emits it (cached per tiling structure, channels, group, position and the
        channels' slots). Keyed by the shape alone, two tilings of one shape shared a timing: the
        vendor-style twin of a context op took the overlap tiling's append, which writes other
        banks (4,319 cycles on a pair of hbm2-pim channels where its own takes 4,315), and
        CP-SAT's proven bound exceeded the program by 4 (bench/whatif_fuzz.py --size small
        case 379)."""
        pos = {c: i for i, c in enumerate(layout.t.channels)}
        cis = tuple(pos[c] for c in self._group(group).channels)
        slots = tuple(layout.t.slots[ci] for ci in cis)
        key = ("append", structure_key(layout.t), layout.t.channels, layout.t.double_buffer, position, cis, slots)
        if key in self.lowering.timings:
            return self.lowering.timings[key].duration
        worst = 0
        for tt in self.structures.append_timings(layout, Symbols(), cis, new, position).values():
            if tt is not None:
                worst = max(worst, tt.duration)
                self.lowering.max_tail = max(self.lowering.max_tail, tt.duration - tt.completion)
        worst = max(1, worst)
        self.lowering.timings[key] = TaskTiming((), worst, worst)
        return worst

    def epilogue_task(self, name: str, tag: str, shape: MVShape) -> tuple[Task, TaskRole]:
        """The host task finishing mode `tag` of job `name` over `shape`, and its role: one
        launch for a fused group (EPI, then chained EPIs), else the op's EPI."""
        index = {op.name: i for i, op in enumerate(self.p.ops)}
        if len(shape.ops) > 1:
            busy = epilogue_chain_cycles(self.hw, self.p, [index[op] for op in shape.ops])
            return Task(f"{name}/{tag}/epi", HOST, max(1, sum(busy))), TaskRole(Role.EPIS, tuple(shape.ops))
        op = shape.ops[0]
        return Task(f"{name}/{tag}/epi/{op}", HOST, self.host_cycles.epilogue(index[op])), TaskRole(Role.EPI, op)

    def _group(self, name: str) -> Group:
        return next(g for g in self.groups if g.name == name)

    # ---- jobs --------------------------------------------------------------------------------
    def _pim_modes(
        self,
        name: str,
        shape: MVShape,
        append: tuple[str, int] | None,
        tag_prefix: str = "pim",
        subsets: str | None = None,
        append_op: str | None = None,
    ) -> list[Mode]:
        """PIM modes over every candidate group subset: per group one task (+ its KV append),
        then the epilogues of the covered ops on the host, one after another (one kernel launch
        when the mode covers a fused group). The append reads only the new K/V (op `append_op`),
        the attention task only the attention op's other input: each waits for its own producer."""
        modes = []
        index = {op.name: i for i, op in enumerate(self.p.ops)}
        variants = [(subset, self.opt.style) for subset in group_subsets(self.groups, subsets or self.opt.subsets)]
        if self.opt.style == Style.OVERLAP:
            # the vendor-style emission is a tiling alternative too (it wins where ping-pong and
            # double buffering cannot help, e.g. one bank per unit and short rows)
            variants.append((tuple(range(len(self.groups))), Style.NAIVE))
        for subset, style in variants:
            gnames = tuple(self.groups[i].name for i in subset)
            channels = tuple(c for i in subset for c in self.groups[i].channels)
            closed = "-closed" if style != self.opt.style else ""
            tag = f"{tag_prefix}{closed}[{'all' if len(subset) == len(self.groups) else ','.join(gnames)}]"
            try:
                timing, layout = self.mv_timing(shape, channels, style, "mv")
            except TooBig as e:
                self.too_big[name] = min(self.too_big.get(name, e.rows), e.rows)
                continue  # this tiling does not fit a bank: not a candidate
            tasks, edges, inputs, reads = [], [], [], {}
            if len(shape.ops) > 1:  # a fused group's epilogues: one launch (EPI, then chained EPIs)
                busy = epilogue_chain_cycles(self.hw, self.p, [index[op] for op in shape.ops])
                epis = [Task(f"{name}/{tag}/epi", HOST, max(1, sum(busy)))]
            else:
                epis = [Task(f"{name}/{tag}/epi/{op}", HOST, self.host_cycles.epilogue(index[op])) for op in shape.ops]
            per_group = self.group_timings(layout, "mv", style, gnames)
            for g in gnames:
                t = Task(f"{name}/{tag}/{g}", g, per_group[g].duration, self.refresh_credit(per_group[g]))
                if append is not None:
                    a = Task(f"{name}/{tag}/{g}/append", g, self._append_timing(layout, *append, g))
                    tasks.append(a)
                    inputs.append(a.name)
                    edges.append(Edge(a.name, t.name, 0))
                    if append_op is not None:
                        reads[a.name], reads[t.name] = (append_op,), tuple(shape.ops)
                tasks.append(t)
                inputs.append(t.name)
                edges.append(Edge(t.name, epis[0].name, self.hw.host.sync_cycles))
            for a, b in zip(epis, epis[1:]):
                edges.append(Edge(a.name, b.name, 0))
            usage = {g: layout.rows_per_bank for g in gnames}
            roles = {t.name: TaskRole(Role.APPEND if t.name.endswith("/append") else Role.MV, 0) for t in tasks}
            if len(shape.ops) > 1:
                roles[epis[0].name] = TaskRole(Role.EPIS, tuple(shape.ops))
            else:
                roles[epis[0].name] = TaskRole(Role.EPI, shape.ops[0])
            payload = ModePayload((MVPayload(TilingKind.MV, name, shape, gnames, channels, style, append),), roles)
            modes.append(
                Mode(
                    tag,
                    tuple(tasks) + tuple(epis),
                    tuple(edges),
                    tuple(inputs),
                    epis[-1].name,
                    usage,
                    payload,
                    reads=reads,
                )
            )
        return modes

    def _unfused_modes(self, name: str, ops: list[str], style: str | None = None, k_split: bool = False) -> list[Mode]:
        """The ops of a fusion group run one after another, each on all groups (each epilogue as
        soon as its op is done). `style` other than the lowering's: the vendor-style (closed-page)
        emission as an alternative, "unfused-closed[all]" (what `naive` runs for a fused group).
        `k_split`: each op split along k over the two halves of the groups (solver/ksplit.py),
        "unfused-ksplit[all]"."""
        try:
            return self._unfused_modes_unchecked(name, ops, style or self.opt.style, k_split)
        except TooBig as e:
            self.too_big[name] = min(self.too_big.get(name, e.rows), e.rows)
            return []

    def _unfused_modes_unchecked(self, name: str, ops: list[str], style: str, k_split: bool) -> list[Mode]:
        tag = "unfused" if style == self.opt.style else "unfused-closed"
        tag += "-ksplit" if k_split else ""
        index = {op.name: i for i, op in enumerate(self.p.ops)}
        tasks, edges, inputs, payloads, usage, roles = [], [], [], [], {}, {}
        prev_epi = None
        for op in ops:
            shape = mv_shape(self.p, op)
            parts = k_halves(self, shape, op) if k_split else [(tuple(self.groups), shape)]
            if parts is None:
                return []
            epi = Task(f"{name}/{tag}/epi/{op}", HOST, self.host_cycles.epilogue(index[op]))
            for groups, part in parts:
                gnames = tuple(g.name for g in groups)
                channels = tuple(c for g in groups for c in g.channels)
                _, layout = self.mv_timing(part, channels, style, "mv")
                per_group = self.group_timings(layout, "mv", style, gnames)
                for g in gnames:
                    tg = per_group[g]
                    t = Task(f"{name}/{tag}/{op}/{g}", g, tg.duration, self.refresh_credit(tg))
                    roles[t.name] = TaskRole(Role.MV, len(payloads))
                    tasks.append(t)
                    inputs.append(t.name)
                    edges.append(Edge(t.name, epi.name, self.hw.host.sync_cycles))
                    usage[g] = usage.get(g, 0) + layout.rows_per_bank
                payloads.append(MVPayload(TilingKind.MV, op, part, gnames, channels, style))
            if prev_epi is not None:
                edges.append(Edge(prev_epi.name, epi.name, 0))
            tasks.append(epi)
            roles[epi.name] = TaskRole(Role.EPI, op)
            prev_epi = epi
        outputs = {op: f"{name}/{tag}/epi/{op}" for op in ops}  # each op's result after its own epilogue
        return [
            Mode(
                f"{tag}[all]",
                tuple(tasks),
                tuple(edges),
                tuple(inputs),
                prev_epi.name,
                usage,
                ModePayload(tuple(payloads), roles),
                outputs=outputs,
            )
        ]

    def _host_gemv_mode(self, name: str, op_index: int, shape: MVShape) -> Mode:
        """Weights stay in all groups' banks (same layout as the all-group PIM mode), are read over
        the link, and the GEMM runs on the host matrix unit."""
        channels = tuple(c for g in self.groups for c in g.channels)
        _, layout = self.mv_timing(shape, channels, self.opt.style, "rd")
        per_group = self.group_timings(layout, "rd", self.opt.style, [g.name for g in self.groups])
        hop = Task(f"{name}/host/hop", HOST, self.host_cycles.op(op_index))
        tasks, edges = [], []
        for g in self.groups:
            tg = per_group[g.name]
            if tg.duration == 0:  # the group holds none of the matrix (a few rows on few channels)
                continue
            t = Task(f"{name}/host/{g.name}", g.name, tg.duration, self.refresh_credit(tg))
            tasks.append(t)
            edges.append(Edge(t.name, hop.name, self.hw.host.sync_cycles))
        usage = {g.name: layout.rows_per_bank for g in self.groups}
        tiling = MVPayload(
            TilingKind.HOSTGEMV,
            self.p.ops[op_index].name,
            shape,
            tuple(g.name for g in self.groups),
            channels,
            self.opt.style,
        )
        roles = {t.name: TaskRole(Role.RD, 0) for t in tasks}
        roles[hop.name] = TaskRole(Role.HOP, self.p.ops[op_index].name)
        return Mode(
            "host", tuple(tasks) + (hop,), tuple(edges), (hop.name,), hop.name, usage, ModePayload((tiling,), roles)
        )

    def build(
        self, only: frozenset[str] | None = None, part: ChannelPart | None = None
    ) -> tuple[SchedulingProblem, Lowering] | None:
        """The problem and its lowering. `only`: lower just these ops (their tasks timed into the
        shared store, solver/lower_parallel.py) and return None; `part`: with `only`, time just
        the tilings over these channel counts."""
        self._part = part if only is not None else None
        p = self.p
        index = {op.name: i for i, op in enumerate(p.ops)}
        producers = p.producers()
        jobs: list[Job] = []
        deps: set[tuple[str, str]] = set()
        absorbed: dict[str, str] = {}  # kv_append op -> attention job
        ops = p.topo_order()
        appends = {op.outputs[0]: op for op in ops if op.kind is OpKind.kv_append}
        fusion = fusion_groups(p) if self.opt.fuse else {}
        chains = host_chains(p) if self.opt.fuse else {}
        for op in ops:
            if op.kind is OpKind.kv_append or absorbed.get(op.name):
                continue
            if only is not None and op.name not in only:
                continue
            i = index[op.name]
            covered = [op.name]
            if op.kind in (OpKind.attn_score, OpKind.attn_context):
                ap = appends.get(op.inputs[1])
                append = (ap.inputs[1], ap.attrs["position"]) if ap is not None else None
                if ap is not None:
                    covered.insert(0, ap.name)
                    absorbed[ap.name] = op.name
                shape = mv_shape(p, op.name)
                append_op = ap.name if ap is not None else None
                modes = self._pim_modes(op.name, shape, append, append_op=append_op)
                modes += attention_head_group_modes(self, op.name, shape, append, append_op)
                modes += mv_micro_batch_modes(self, op.name, shape, append, append_op)
            elif op.kind is OpKind.gemv and op.name in fusion:
                members = fusion[op.name]
                covered = list(members)
                for m in members[1:]:
                    absorbed[m] = op.name
                name = "+".join(members)
                shape = fused_shape(p, members, name)
                modes = self._pim_modes(name, shape, None, "fused")
                if self.opt.style != Style.NAIVE:
                    modes += self._unfused_modes(name, members)
                    modes += self._unfused_modes(name, members, Style.NAIVE)
                    modes += split_modes(self, name, shape, "fused-split")
                    modes += ksplit_modes(self, name, shape, "fused-ksplit")
                    modes += self._unfused_modes(name, members, k_split=True)
                    modes += mv_micro_batch_modes(self, name, shape)
                else:
                    modes = self._unfused_modes(name, members)
                jobs.append(self._job(name, covered, modes))
                self._job_deps(name, covered, producers, absorbed, deps)
                continue
            elif op.kind is OpKind.gemv:
                shape = mv_shape(p, op.name)
                modes = self._pim_modes(op.name, shape, None)
                if self.opt.host_gemv and shape.k % self.hw.elements_per_burst == 0:
                    # (RD moves whole bursts: a row that ends mid-burst would spill into the next)
                    try:
                        modes.append(self._host_gemv_mode(op.name, i, shape))
                    except TooBig:
                        pass
                    modes += split_modes(self, op.name, shape)
                modes += ksplit_modes(self, op.name, shape)
                modes += mv_micro_batch_modes(self, op.name, shape)
            elif op.name in chains:
                members = chains[op.name]
                covered = list(members)
                for m in members[1:]:
                    absorbed[m] = op.name
                name = "+".join(members)
                modes = self._host_chain_modes(name, members) + host_micro_batch_modes(self, name, members)
                if self.opt.style == Style.NAIVE:
                    modes = [m for m in modes if m.name == "host"]
                jobs.append(Job(name, tuple(covered), tuple(modes), self._layer(covered)))
                self._job_deps(name, covered, producers, absorbed, deps)
                continue
            else:
                hop = Task(f"{op.name}/hop", HOST, self.host_cycles.op(i))
                head_groups = softmax_head_group_modes(self, op.name) if op.kind is OpKind.softmax else []
                modes = [
                    Mode(
                        "host",
                        (hop,),
                        (),
                        (hop.name,),
                        hop.name,
                        {},
                        ModePayload((), {hop.name: TaskRole(Role.HOP, op.name)}),
                    )
                ] + head_groups
                modes += host_micro_batch_modes(self, op.name, [op.name])
            if self.opt.style == Style.NAIVE:
                modes = modes[:1]
            jobs.append(self._job(op.name, covered, modes))
            self._job_deps(op.name, covered, producers, absorbed, deps)
        if only is not None:
            return None
        names = {j.name for j in jobs}
        job_name = {o: j.name for j in jobs for o in j.ops}
        position = {j.name: i for i, j in enumerate(jobs)}
        pairs: dict[tuple[str, str], set[tuple[str, str]]] = {}  # job pair -> (producer op, consumer op)
        for a, b in deps:
            if job_name[a] != job_name[b] and job_name[a] in names and job_name[b] in names:
                pairs.setdefault((job_name[a], job_name[b]), set()).add((a, b))
        dependencies = [
            Dependency(a, b, tuple(sorted(pairs[(a, b)], key=lambda ab: (index[ab[0]], index[ab[1]]))))
            for a, b in sorted(pairs, key=lambda d: (position[d[1]], position[d[0]]))
        ]
        t = self.hw.timing
        refresh = Refresh(
            t.p("tREFI"),
            round_busy(self.hw) + round_shift(self.hw),  # (a pair's odd channel refreshes later: pair_bus)
            t.max_postponed_refresh,
            t.max_pulled_in_refresh,
            t.max_refresh_interval,
            round_span(self.hw),
        )
        problem = SchedulingProblem(p.name, jobs, dependencies, self.groups, refresh, self.hw.host.sync_cycles)
        if self.opt.style != Style.NAIVE:  # (the vendor-library baseline launches every host task)
            chain_launches(problem, self.hw)
        problem.horizon = problem.trivial_horizon()
        return problem, self.lowering

    def _job(self, name: str, covered: list[str], modes: list[Mode]) -> Job:
        if not modes:
            org = self.hw.organization
            need = self.too_big.get(name)
            raise LoweringError(
                f"{name}: no tiling fits a bank: the smallest candidate needs {need:,} rows per bank "
                f"({need * org.row_bytes / 2**20:,.2f} MiB), a bank has {org.rows:,} rows "
                f"({org.bank_bytes / 2**20:,.2f} MiB); add channels or rows"
            )
        return Job(name, tuple(covered), tuple(modes), self._layer(covered))

    def _layer(self, covered: list[str]) -> int | None:
        """The decoder layer of a job: its ops' `layer` attribute when they all carry the same one."""
        layers = {self.p.op(o).attrs.get("layer") for o in covered}
        return layers.pop() if len(layers) == 1 else None

    def _host_chain_modes(self, name: str, ops: list[str]) -> list[Mode]:
        """A chain of host ops: one kernel launch for all (fused), or one launch each."""
        index = {op.name: i for i, op in enumerate(self.p.ops)}
        costs = [self.host_cycles.op(index[o]) for o in ops]
        fused = Task(f"{name}/fused", HOST, sum(chain_cycles(self.hw, self.p, [index[o] for o in ops])))
        modes = [
            Mode(
                "fused",
                (fused,),
                (),
                (fused.name,),
                fused.name,
                {},
                ModePayload((), {fused.name: TaskRole(Role.HOPS, tuple(ops))}),
            )
        ]
        tasks = [Task(f"{name}/host/{o}", HOST, c) for o, c in zip(ops, costs)]
        edges = tuple(Edge(a.name, b.name, 0) for a, b in zip(tasks, tasks[1:]))
        roles = {t.name: TaskRole(Role.HOP, o) for t, o in zip(tasks, ops)}
        modes.append(Mode("host", tuple(tasks), edges, (tasks[0].name,), tasks[-1].name, {}, ModePayload((), roles)))
        return modes

    def _job_deps(
        self,
        job: str,
        covered: list[str],
        producers: dict[str, str],
        absorbed: dict[str, str],
        deps: set[tuple[str, str]],
    ) -> None:
        """Op-level edges (producer op -> covered op); mapped to jobs once all jobs exist."""
        for cname in covered:
            for t in self.p.op(cname).inputs:
                src = producers.get(t)
                if src is not None and src not in covered:
                    deps.add((src, cname))


class LoweringError(ValueError):
    """The program cannot be mapped onto the hardware at all (message in hardware terms)."""


class HostCosts:
    """Host busy cycles of an op (HOP) or of a PIM op's epilogue (EPI): hwmodel/host_costs.py."""

    def __init__(self, hw: Hardware, program: Program):
        self.hw, self.p = hw, program

    def op(self, i: int) -> int:
        return max(1, host_op_cycles(self.hw, self.p, i))

    def epilogue(self, i: int) -> int:
        return max(1, epilogue_cycles(self.hw, self.p, i))


def lower(
    hw: Hardware, program: Program, options: LowerOptions | None = None, timings: TimingCache | None = None
) -> tuple[SchedulingProblem, Lowering]:
    """`timings`: task timings shared with other lowerings (TimingCache); the result is the same
    with or without it."""
    return Lowerer(hw, program, options or LowerOptions(), timings).build()
