"""Decode: a Solution -> stamped per-channel streams + host stream, exact to the cycle.

1. Rows: each chosen mode gets its rows in every bank of its groups (allocated in job order).
2. Timeline: tasks are laid out in the order of the solution's start times, each at its earliest
   legal cycle given its resource, the internal edges of its mode, its job's dependencies (plus a
   sync between streams) and refresh, under the JEDEC rules (at most `max_postponed` REFs owed,
   at most `max_pulled_in` pulled in, at most `max_interval` x tREFI between two REFs): idle gaps
   on a group are filled with REFs as far as pulled-in credit goes; before a group task, REFs are
   issued whenever the task would otherwise end with too many owed, or reach its first REF (or
   its end) too long after the last one; a long task carries REFs of its own
   (solver/refresh_points.py), counted here at their exact relative cycles; at the end every owed
   REF is issued. Where those last REFs set the makespan (the group has no work left to hide
   them), the timeline is laid out again letting an idle gap take one more REF that outlasts it
   by up to a quarter, half or all of a REF (the next task waits that much), and the fastest of
   the timelines is kept (`_timeline`). Because each task was
   timed alone from a quiet state and its `duration` covers every constraint its commands start,
   the composed program is legal, and its makespan is known before it is simulated.
3. Streams: each task's commands stamped at start + relative issue cycle, with SIG after a task
   whose results another stream waits for and WAIT before a task that waits.
Deterministic: same problem and solution, same bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial

import numpy as np

from hwmodel.host_costs import chain_cycles, epilogue_chain_cycles, mv_chain_cycles
from hwmodel.isa import ISA_VERSION, Instruction, make
from hwmodel.isa_codec import no_gc
from hwmodel.streams import Placement, StreamSet
from hwmodel.table import encode_stream
from ir.ops import PIM_CAPABLE, RESIDENT_OPERAND

from . import assemble
from .assemble import HOST_STREAM, DecodeError, signal_plan  # noqa: F401  (DecodeError: part of the API)
from .emit_mv import MVEmitter
from .host_emit import emit_weight_read, encoded_weight_read, weight_read_key
from .kv_emit import emit_kv_append
from .layout import Layout
from .lower import Lowering
from .pair_bus import round_shift
from .payload import Role, TilingKind
from .problem import HOST, SchedulingProblem, Solution
from .refresh_fill import fill_rounds, filled
from .refresh_points import refresh_round, round_cycles, round_span
from .relocate import Relocations
from .symbols import Symbols, host_copy, staging
from .task_timing import StructureTimings, TaskTiming
from .tiling import slot_rows


@dataclass
class Compiled:
    streams: StreamSet
    predicted_cycles: int
    task_starts: dict[str, int]
    refreshes: dict[str, list[int]]
    rows_used: dict[str, int]


@dataclass
class _Placed:
    task: str
    resource: str
    start: int
    end: int  # quiet end (next command on the resource may follow)
    completion: int
    # channel (-1: host) -> (emit the commands, their relative issue cycles); a streamed decode adds
    # (the table of the commands given the task's cache, the key it is kept under there)
    per_channel: dict[int, tuple]


def _layouts(
    problem: SchedulingProblem, lowering: Lowering, chosen: dict
) -> tuple[dict[str, list[Layout]], dict[str, int]]:
    """Allocate rows for every tiling of every chosen mode, in job order, per group."""
    hw = lowering.hw
    groups = {g.name: g for g in problem.groups}
    used = {g.name: 0 for g in problem.groups}
    cap = {g.name: g.capacity_rows for g in problem.groups}
    out: dict[str, list[Layout]] = {}
    for job in problem.jobs:
        out[job.name] = []
        for pl in chosen[job.name].payload.tilings:
            tiling = lowering.tiling(pl.shape, pl.channels, pl.style, pl.kind)
            if pl.shares is not None:  # the same resident data, laid out alike: the rows of that tiling
                first = out[job.name][pl.shares]
                if replace(tiling, shape=first.t.shape) != first.t:  # (shapes differ in the rows they read only)
                    raise DecodeError(f"{job.name}: a tiling sharing rows lays its data out differently")
                out[job.name].append(Layout(hw, tiling, first.base_rows))
                continue
            probe = Layout(hw, tiling, 0)
            base = {}
            for g in pl.groups:
                for c in groups[g].channels:
                    base[c] = used[g]
                used[g] += probe.rows_per_bank
                if used[g] > cap[g]:
                    raise DecodeError(f"group {g}: {used[g]} rows per bank needed, {cap[g]} available")
            out[job.name].append(Layout(hw, tiling, base))
    return out, used


def _offsets(hw, busy: list[int], chained: int) -> tuple[int, ...]:
    """Issue offsets of one launch's host instructions (busy: each one's cycles, the first with
    the launch), the launch left out when the task continues the one before it."""
    busy = [busy[0] - hw.host.dispatch_cycles * chained, *busy[1:]]
    return tuple(sum(busy[:k]) for k in range(len(busy)))


def _task_commands(
    hw,
    program,
    sym: Symbols,
    op_index: dict[str, int],
    groups,
    task,
    role,
    tilings,
    layouts,
    timings: StructureTimings,
    encode=None,
    layers: Relocations | None = None,
):
    """Per channel: (a function that emits its unstamped commands, their relative issue cycles),
    and the task's duration and completion. On a shared-bus device the odd channel of each pair
    is timed yielding its bus to the even one's commands (solver/pair_bus.py). Emission is deferred
    to stream building, so the commands of the whole program never sit in memory twice."""
    kind, what = role
    first = int(task.chained)  # the first instruction's chain bit: it continues the launch before it
    if kind in (Role.EPI, Role.HOP):
        ins = make(kind.value, op=op_index[what], chain=first)
        return {-1: (lambda: [ins], (0,))}, task.duration, task.duration, {}
    if kind in (Role.EPI_HEADS, Role.HOP_HEADS):  # a head range of an attention op or its softmax
        op, head0, heads = what
        ins = make("EPI" if kind is Role.EPI_HEADS else "HOP", op=op_index[op], head0=head0, heads=heads, chain=first)
        return {-1: (lambda: [ins], (0,))}, task.duration, task.duration, {}
    if kind is Role.HMVS:  # rows of gemvs on the host, one launch
        seq = [
            make("HMV", op=op_index[o], row0=r0, rows=n, chain=int(k > 0 or first)) for k, (o, r0, n) in enumerate(what)
        ]
        busy = mv_chain_cycles(hw, program, [(op_index[o], n) for o, _r0, n in what])
        return {-1: (lambda: seq, _offsets(hw, busy, first))}, task.duration, task.duration, {}
    if kind in (Role.HOPS, Role.EPIS, Role.HOP_BATCH, Role.EPI_BATCH):  # one launch, the later ops chained
        ops, ranged = (
            (what, {}) if kind in (Role.HOPS, Role.EPIS) else (what[0], {"batch0": what[1], "batches": what[2]})
        )
        hop = kind in (Role.HOPS, Role.HOP_BATCH)
        seq = [
            make("HOP" if hop else "EPI", op=op_index[o], chain=int(k > 0 or first), **ranged)
            for k, o in enumerate(ops)
        ]
        cost = chain_cycles if hop else epilogue_chain_cycles
        busy = cost(hw, program, [op_index[o] for o in ops], ranged.get("batches", 0))
        return {-1: (lambda: seq, _offsets(hw, busy, first))}, task.duration, task.duration, {}
    pl, lay = tilings[what], layouts[what]
    g = groups[task.resource]
    cis = [pl.channels.index(c) for c in g.channels]
    per: dict[int, tuple] = {}
    if kind is Role.APPEND:
        # one channel per distinct slot rows is emitted and timed here (StructureTimings.appends),
        # every channel's commands are emitted when its stream is read
        timed = timings.append_timings(lay, sym, cis, *pl.append)  # (a pair's odd channel yielding)
        done = [tt for tt in timed.values() if tt is not None]
        end, comp = max((tt.duration for tt in done), default=0), max((tt.completion for tt in done), default=0)
        for ci in cis:
            rows = slot_rows(lay.t, ci)
            tt = timed[ci]
            per[pl.channels[ci]] = (
                lambda ci=ci: emit_kv_append(hw, lay, sym, ci, *pl.append),
                () if tt is None else tt.issue,
            )
            if encode is not None:  # the encoded table leaves out host offsets: equal for those channels
                per[pl.channels[ci]] += (
                    partial(_encoded_append, hw, lay, sym, ci, pl.append, rows, encode),
                    _append_key(rows),
                )
        return per, max(end, 1), comp, {}
    if kind is Role.MV:
        emitter = MVEmitter(hw, lay, sym, pl.style)

        def emit(ci: int) -> list[Instruction]:
            return emitter.emit(ci)
    else:

        def emit(ci: int) -> list[Instruction]:
            return emit_weight_read(hw, lay, sym, ci)

    # channels of one signature run in lockstep (same stamps), and so do the tasks of repeated
    # layers: each structure is timed once per decode (a channel with padding on its own)
    end = comp = 0
    # channel -> the task's own refresh rounds: (last refresh of each, first refresh of each)
    inner: dict[int, tuple[tuple[int, ...], tuple[int, ...]]] = {}
    tts: dict[int, TaskTiming] = {}
    at = {pl.channels[ci]: ci for ci in cis}
    for c in sorted(at):
        ci = at[c]
        key = timings.key(kind, pl.style, lay.t, ci)
        if hw.organization.shared_bus and c % 2 and c - 1 in at:  # yields the bus to its pair's even channel
            even = (timings.key(kind, pl.style, lay.t, at[c - 1]), tts[c - 1])
            tt = timings.paired(*even, key, lambda ci=ci: emit(ci))
        else:
            tt = timings.structure(key, lambda ci=ci: emit(ci))
        tts[c] = tt
        end, comp = max(end, tt.duration), max(comp, tt.completion)
        per[pl.channels[ci]] = ((lambda ci=ci: emit(ci)), tt.issue)
        if encode is not None:  # encoded from a template (assemble: the stream's rows), and its key
            per[pl.channels[ci]] += (
                (
                    (lambda cache, ci=ci: emitter.encoded(ci, cache, encode, layers)),
                    emitter.table_key(ci),
                )
                if kind is Role.MV
                else (
                    (lambda cache, ci=ci: encoded_weight_read(hw, lay, sym, ci, cache, encode, layers)),
                    weight_read_key(lay, ci),
                )
            )
    # a channel with fewer refresh rounds than another (its commands end early, or it has none)
    # gets the missing ones after its commands (solver/refresh_fill.py)
    fills = fill_rounds(hw, tts, end)
    for c, starts in fills.items():
        per[c] = _with_rounds(hw, per[c], tts[c], starts, encode)
    span = round_span(hw)
    for c, tt in tts.items():
        starts = fills.get(c, ())
        if tt.refreshes or starts:
            inner[c] = (tt.refreshes + tuple(s + span for s in starts), tt.refreshes_early + starts)
    return per, end, comp, inner


def _with_rounds(hw, own: tuple, tt: TaskTiming, starts: tuple[int, ...], encode) -> tuple:
    """A channel's (emit, relative issue cycles[, table, table key]) with refresh rounds at
    `starts` after its commands."""
    rounds, rel = filled(hw, starts)
    emit = own[0]
    out = (lambda: [*emit(), *rounds], np.concatenate([tt.issue, np.array(rel, dtype=np.int64)]))
    if len(own) > 2:
        table_of, key = own[2], own[3]
        extra = encode(rounds)
        out += ((lambda cache: np.concatenate([table_of(cache), extra])), (key, "refresh", starts))
    return out


def _append_key(rows: tuple) -> tuple:
    """The key `_encoded_append` keeps a channel's table under: its slots' rows."""
    return ("append", rows)


def _encoded_append(hw, lay: Layout, sym: Symbols, ci: int, append: tuple, rows: tuple, encode, cache: dict):
    """The encoded KV append of channel `ci`, shared through the task's `cache` with the channels
    whose slots hold the same rows (their commands differ only in host offsets, which the
    simulator's table does not hold)."""
    key = _append_key(rows)
    table = cache.get(key)
    if table is None:
        table = cache[key] = encode(emit_kv_append(hw, lay, sym, ci, *append))
    return table


@dataclass
class _Timeline:
    placed: dict[str, _Placed]
    refs: dict[str, list[int]]  # the REFs decode issues between tasks, per group
    makespan: int
    end_refreshes: bool  # REFs after every task's completion set the makespan


def _timeline(hw, problem: SchedulingProblem, groups, tasks, preds, commands, overhang: int) -> _Timeline:
    """Every task at its exact start in the solution's order, with the REFs decode issues between
    tasks under the JEDEC rules (module docstring). `overhang`: an idle gap before a task also
    takes one REF that outlasts it by at most this much (the task waits), where more REFs are
    owed at the end than gaps took (decode tries it when the end's REFs set the makespan)."""
    ref = problem.refresh
    rshift = round_shift(hw)  # a pair's odd channel refreshes this much after the even one
    # ... in a group that holds a pair (groups hold whole pairs; an odd channel count leaves one
    # channel without its partner)
    gshift = {
        g: rshift if any(c % 2 and c - 1 in groups[g].channels for c in groups[g].channels) else 0 for g in groups
    }
    ref_len = {g: round_cycles(hw) + gshift[g] for g in groups}  # a round keeps its group this long
    # a round issued at cycle `at` has refreshed every bank of every channel of its group only at
    # at + ref_lands[g]: its last REFSB (per-bank) on the pair's odd channel, which goes gshift later
    ref_lands = {g: (ref.span if ref else 0) + gshift[g] for g in groups}
    free = {r: 0 for r in problem.resources()}
    free[HOST] = problem.host_release  # a LAUNCH at cycle 0 (solver/launch_chain.py)
    refs: dict[str, list[int]] = {g: [] for g in groups}  # the REFs decode issues between tasks
    # every REF of a group, its own and its tasks', bounded over the group's channels (whose long
    # tasks may carry different numbers of REFs): `late` counts the REFs every channel has issued
    # (the k-th at the latest any channel issues one), `early` those some channel has (the k-th at
    # the earliest); `last` is the earliest any channel issued its last REF (0: the start)
    late: dict[str, list[int]] = {g: [] for g in groups}
    early: dict[str, list[int]] = {g: [] for g in groups}
    last: dict[str, int] = {g: 0 for g in groups}
    placed: dict[str, _Placed] = {}

    def owed(g: str, t: int) -> int:
        return t // ref.tREFI - len(late[g])

    def issue_ref(g: str, at: int) -> None:
        refs[g].append(at)
        late[g].append(at + ref_lands[g])  # per-bank: the round's last REFSB
        early[g].append(at)
        last[g] = at
        free[g] = at + ref_len[g]

    def earliest_credit(g: str) -> int:
        """The first cycle the group's next REF still earns credit (at most max_pulled_in ahead)."""
        return max(0, (len(early[g]) + 1 - ref.max_pulled_in) * ref.tREFI)

    for t in tasks:
        per, dur, comp, inner = commands[t.name]
        est = free[t.resource]
        for p, lag in preds[t.name]:
            if p not in placed:
                raise DecodeError(f"task {t.name} ordered before its predecessor {p}")
            est = max(est, placed[p].end + lag)
        if ref and t.resource != HOST:
            g = t.resource
            chans = groups[g].channels
            counts = [len(inner[c][0]) if c in inner else 0 for c in chans]
            n_min, n_max = min(counts), max(counts)
            late_rel = [max(inner[c][0][k] for c in chans) for k in range(n_min)]
            early_rel = [min(inner[c][1][k] for c, n in zip(chans, counts) if n > k) for k in range(n_max)]
            first = late_rel[0] if n_min else dur  # the task's first stretch without a REF
            gap = ref.max_interval * ref.tREFI
            # idle gap before the task: refresh there, due or not, as far as credit goes
            while free[g] + ref_len[g] <= est and earliest_credit(g) <= free[g]:
                issue_ref(g, free[g])
            if overhang and free[g] < est < free[g] + ref_len[g] <= est + overhang and earliest_credit(g) <= free[g]:
                issue_ref(g, free[g])
                est = free[g]

            def short(est: int) -> bool:
                """True if the group must refresh before a task starting at `est`."""
                n = len(late[g])
                if any(est + r >= (n + k + 1 + ref.max_postponed) * ref.tREFI for k, r in enumerate(late_rel)):
                    return True
                # ... or end owing so many that the round after it (at est + dur at the earliest)
                # lands on some channel after the next one falls due (a pair's odd channel, the
                # last REFSB of a per-bank round)
                if (est + dur + ref_lands[g]) // ref.tREFI - (n + n_min) > ref.max_postponed:
                    return True
                return est + first - last[g] > gap

            before = len(refs[g])
            # a cap on the REFs in front of one task: those that fall due in the idle time before
            # it (the group waiting, say, for a slow host: 51 tREFI on a naive gddr6-aim layer),
            # those owed or pulled in, plus those its own duration could need. Past it no start is
            # taken to be legal (a stretch of the task without REFs longer than the rules allow): a
            # lowering bug, reported, not a hang. (a cap, not a proven least: two first, tighter
            # ones refused legal programs)
            idle = max(0, est - free[g])
            most = (idle + dur) // ref.tREFI + ref.max_postponed + ref.max_pulled_in + 2
            while short(est):
                if len(refs[g]) - before > most:
                    raise DecodeError(
                        f"task {t.name} on {g} ({dur:,} cycles, {n_min} REFs of its own, the first after "
                        f"{first:,}) cannot start under the refresh rules (tREFI {ref.tREFI:,}, at most "
                        f"{ref.max_postponed} owed, {ref.max_interval} x tREFI between two REFs)"
                    )
                issue_ref(g, max(free[g], earliest_credit(g)))
                est = max(est, free[g])
            # the task's own REFs must earn credit too
            for k, r in enumerate(early_rel):
                est = max(est, (len(early[g]) + k + 1 - ref.max_pulled_in) * ref.tREFI - r)
            late[g].extend(est + r for r in late_rel)
            early[g].extend(est + r for r in early_rel)
            if n_min:
                last[g] = est + min(inner[c][1][-1] for c in chans)
        placed[t.name] = _Placed(t.name, t.resource, est, est + dur, est + comp, per)
        free[t.resource] = est + dur

    def makespan() -> int:
        last_done = max((p.completion for p in placed.values()), default=0)
        for g, rs in refs.items():
            if rs:
                last_done = max(last_done, rs[-1] + ref_len[g])
        return last_done

    if ref:
        while True:
            T = makespan()
            pending = [g for g in groups if owed(g, T) > 0 or T - last[g] > ref.max_interval * ref.tREFI]
            if not pending:
                break
            for g in pending:
                issue_ref(g, max(free[g], refs[g][-1] + ref_len[g] if refs[g] else 0, earliest_credit(g)))

    done = max((p.completion for p in placed.values()), default=0)
    return _Timeline(placed, refs, makespan(), makespan() > done)


def decode(
    problem: SchedulingProblem, lowering: Lowering, solution: Solution, placements: bool = True, lazy: bool = False
) -> Compiled:
    """`placements=False` skips the data layout records (timing-only runs of the largest programs).
    `lazy=True` returns channel streams that build their commands when read (LazyStream): for a
    streamed simulation of programs too large to hold.

    The cyclic garbage collector is paused: decoding allocates tens of millions of acyclic
    objects (instructions and their stamps) and keeps most of them in the streams, which the
    collector would traverse again and again (a third of the decode time of Llama-2-7B) to find
    a few dozen cyclic objects; reference counting frees everything else decode drops."""
    with no_gc():
        return _decode(problem, lowering, solution, placements, lazy)


def _decode(
    problem: SchedulingProblem, lowering: Lowering, solution: Solution, placements: bool, lazy: bool
) -> Compiled:
    want_placements = placements
    hw, program = lowering.hw, lowering.program
    groups = {g.name: g for g in problem.groups}
    sym = Symbols()
    for name in program.inputs:
        sym.id(name)
    op_index = {op.name: i for i, op in enumerate(program.ops)}
    chosen = {j.name: next(m for m in j.modes if m.name == solution.modes[j.name]) for j in problem.jobs}
    layouts, used = _layouts(problem, lowering, chosen)

    # ---- per task: commands (relative stamps) -------------------------------------------------
    commands: dict[str, tuple[dict[int, list[Instruction]], int, int]] = {}
    placements: list[Placement] = []
    in_banks: set[str] = set()
    timings = StructureTimings(hw, lowering.structures, lowering.shared)  # what lowering and the bound timed already
    encode = partial(encode_stream, hw) if lazy else None  # lazy streams also hand out encoded parts
    # ... shared by the layers' tasks of one structure, and with a TimingCache by the decodes of
    # every lowering of the same timing fingerprint (relocate.py: a table of the same structure,
    # its rows shifted and its symbols mapped by role, is what emitting it again would give)
    shared = lowering.shared if lowering.shared is not None and lowering.shared.share_layers else None
    layers = (Relocations() if shared is None else shared.layers) if lazy else None
    for job in problem.jobs:
        mode = chosen[job.name]
        tilings = mode.payload.tilings
        for pl, lay in zip(tilings, layouts[job.name]):
            if want_placements and pl.shares is None:
                placements.extend(lay.placements())
            in_banks.update(p.resident for p in pl.shape.parts) if pl.shape.parts else in_banks.add(pl.shape.resident)
            if pl.kind is TilingKind.HOSTGEMV:
                for res in (
                    dict.fromkeys(p.resident for p in pl.shape.parts) if pl.shape.parts else (pl.shape.resident,)
                ):
                    sym.id(host_copy(res))
        for role in mode.payload.roles.values():
            if role.role is Role.HMVS:  # the staging tensors the HMVs add into
                for o, _r0, _n in role.arg:
                    sym.id(staging(program.op(o).outputs[0]))
        for task in mode.tasks:
            commands[task.name] = _task_commands(
                hw,
                program,
                sym,
                op_index,
                groups,
                task,
                mode.payload.roles[task.name],
                tilings,
                layouts[job.name],
                timings,
                encode,
                layers,
            )
    # host memory: activations and the small weights the host reads (norms, biases, embeddings);
    # matrices that live in banks are not host tensors (a host GEMV reads them into W#host)
    host_ops = [
        o
        for j in problem.jobs
        for r in chosen[j.name].payload.roles.values()
        for o in (
            (r.arg,)
            if r.role is Role.HOP
            else r.arg
            if r.role is Role.HOPS
            else (r.arg[0],)
            if r.role is Role.HOP_HEADS
            else r.arg[0]
            if r.role is Role.HOP_BATCH
            else ()
        )
    ]
    # (a host GEMV or attention reads its bank-resident matrix through RD into X#host, not from host memory)
    host_reads = {
        n
        for o in host_ops
        for k, n in enumerate(program.op(o).inputs)
        if not (program.op(o).kind in PIM_CAPABLE and k == RESIDENT_OPERAND[program.op(o).kind])
    }
    for t in program.tensors.values():
        if t.role.value != "kv_cache" and (t.name not in in_banks or t.name in host_reads):
            sym.id(t.name)  # (a tied embedding table is gathered by the host and streamed by PIM)

    # ---- exact timeline ------------------------------------------------------------------------
    job_of_task: dict[str, str] = {}
    for job in problem.jobs:
        for t in chosen[job.name].tasks:
            job_of_task[t.name] = job.name
    job_pos = {j.name: i for i, j in enumerate(problem.jobs)}
    tasks = [t for j in problem.jobs for t in chosen[j.name].tasks]
    tasks.sort(key=lambda t: (solution.starts.get(t.name, 0), job_pos[job_of_task[t.name]]))
    preds: dict[str, list[tuple[str, int]]] = {t.name: [] for t in tasks}
    res_of = {t.name: t.resource for t in tasks}
    for job in problem.jobs:
        mode = chosen[job.name]
        for e in mode.edges:
            preds[e.after].append((e.before, e.lag))
    for dep in problem.dependencies:
        for out, tin in problem.links(dep, chosen[dep.before], chosen[dep.after]):
            preds[tin].append((out, problem.lag(res_of[out], res_of[tin])))

    timeline = _timeline(hw, problem, groups, tasks, preds, commands, 0)
    if timeline.end_refreshes:  # owed REFs after the last task set the end: let idle gaps take more
        ref_len = round_cycles(hw)
        for overhang in (ref_len // 4, ref_len // 2, ref_len):
            other = _timeline(hw, problem, groups, tasks, preds, commands, overhang)
            if other.makespan < timeline.makespan:
                timeline = other
    placed, refs = timeline.placed, timeline.refs
    rshift = round_shift(hw)

    # ---- streams ----------------------------------------------------------------------------------
    def channels_of(resource: str) -> list[int]:
        return [HOST_STREAM] if resource == HOST else list(groups[resource].channels)

    order = sorted(placed.values(), key=lambda p: (p.start, job_pos[job_of_task[p.task]], p.task))
    plan = signal_plan(order, channels_of, preds, res_of)
    stream_channels, stream_host = assemble.streams(
        order,
        channels_of,
        plan,
        refs,
        partial(refresh_round, hw),
        {g: list(groups[g].channels) for g in groups},
        hw.organization.channels,
        lazy,
        encode,
        rshift,
        launch=problem.host_release > 0,
    )
    streams = StreamSet(hw.name, ISA_VERSION, sym.names, stream_channels, stream_host, placements)
    return Compiled(streams, timeline.makespan, {p.task: p.start for p in placed.values()}, refs, used)
