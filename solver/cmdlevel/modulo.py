"""The steady state of a task's row/chunk loop as a modulo schedule with a proven initiation
interval (issue 16, item 2b).

A real-size GEMV or attention task repeats one *period* of commands many times: on hbm2-pim a
4096 x 4096 GEMV's channel loads eight global-buffer bursts (WRGB), MACs them into eight
accumulators (64 MACs), and opens the next rows (PRE, ACT), 31 times over. The whole-program
model (model.py) cannot take such a program (tens of thousands of commands), but its steady
state is one period, which it can.

`find_periods` reads the period from the emitted program: per segment of a channel stream (between
SIG/WAIT), the run of commands whose signature (command, banks, accumulators, buffer burst) and
issue cycles repeat with a shift of `length` commands and `emitted_ii` cycles; the period that
covers the most commands, the shortest of those.

`solve_period` states the modulo schedule: iteration i's command x issues at t_x + i x II, for
every iteration. The model unrolls n consecutive iterations of the emitted commands (n >= 2,
enough that the emitted schedule is one of its solutions), ties each to the one before it by
t[x + length] = t[x] + II, and keeps every constraint of the whole-program model among them
(commands.py's fixed orders, timing_rows.py's rows, free pairs and windows, one command per cycle,
the MAC NoOverlap, and the shared row/column buses of a channel pair, whose partner's period is
modelled beside it). Iteration 0 spans at most n x II - L cycles, L the largest latency any of
those constraints holds: two commands n or more iterations apart are then L or more cycles
apart, so every constraint between them holds too, and the n unrolled iterations stand for all.
CP-SAT minimises II; OPTIMAL proves it the least over that space:

    periodic schedules of the period's commands (every iteration the same issue cycles, shifted
    by II), each bank's, each accumulator's, each global-buffer burst's, the link's and the row
    commands' order as emitted within and across iterations, one iteration within n x II - L
    cycles.

Not in the space: another tiling or layout (the task level's), refresh (a REF breaks the
period: the steady state is the stretch between REFs), and the prologue and epilogue of the loop.
A program whose emitted period equals the proven II has a steady state that no schedule of that
space beats: a real-size kernel inherits the proof for every iteration of its loop.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

import numpy as np
from ortools.sat.python import cp_model

from hwmodel import Hardware, bus

from .commands import ChannelStream, Command, fixed_edges
from .implied import link_windows, window_blocks
from .model import add_channel, add_shared_buses, complete_hint
from .order import predecessors
from .timing_rows import table_rows

MIN_ITERATIONS = 3  # a run shorter than this is not called a loop
MAX_LENGTH = 2048  # commands per period searched


@dataclass(frozen=True)
class Period:
    segment: int  # segment of the channel stream (between SIG/WAIT)
    first: int  # iteration 0's first command (index into the channel's expanded commands)
    length: int  # commands per iteration
    iterations: int  # consecutive iterations in the emitted program (same commands, same cycles)
    emitted_ii: int  # emitted cycles from one iteration to the next
    start_cycle: int  # the emitted issue cycle of iteration 0's first command
    # iterations of the same loop (same commands, same II) in the segment, in all its runs (REFs
    # cut a loop into runs), this one included
    repeats: int = 0

    @property
    def covered(self) -> int:
        return self.length * self.iterations


def signatures(cmds: list[Command], slots: int) -> list[tuple]:
    """What must repeat for two commands to be the same command of two iterations: the command,
    its banks, accumulators and segment, and its global-buffer burst as a step from the previous
    command's, modulo the buffer's `slots` bursts (a loop may cycle through the buffer as a ring:
    its iterations then use other bursts, the same way)."""
    out, last = [], 0
    for x in cmds:
        step = -1
        if x.gb >= 0:
            step, last = (x.gb - last) % slots, x.gb
        out.append((x.op, x.banks, x.accs, step, x.seg))
    return out


def find_periods(
    cmds: list[Command], slots: int, min_iterations: int = MIN_ITERATIONS, max_length: int = MAX_LENGTH
) -> list[Period]:
    """Per segment of one channel's commands (emitted order), its steady-state period, if it has
    one of at least `min_iterations` iterations: the period covering the most commands, the
    shortest of those. A period holds a command other than MAC (a load, a read-out or a row
    change: a run of MACs alone is one sweep, not a loop)."""
    n = len(cmds)
    if n < 2 * min_iterations:
        return []
    ids_of: dict[tuple, int] = {}
    ids = np.array([ids_of.setdefault(k, len(ids_of)) for k in signatures(cmds, slots)], dtype=np.int64)
    t = np.array([x.t0 for x in cmds], dtype=np.int64)
    other = np.cumsum([0] + [x.op != "MAC" for x in cmds])  # non-MAC commands before each index
    refresh = np.cumsum([0] + [x.op in ("REF", "REFSB") for x in cmds])
    best: dict[int, Period] = {}
    for p in range(1, min(max_length, n // min_iterations) + 1):
        for a, length in _runs(ids, t, p, (min_iterations - 1) * p):
            if other[a + p] - other[a] in (0, p) or refresh[a + p] > refresh[a]:
                continue
            per = Period(cmds[a].seg, a, p, (length + p) // p, int(t[a + p] - t[a]), int(t[a]))
            old = best.get(per.segment)
            if old is None or per.covered > old.covered:
                best[per.segment] = per
    return sorted((_with_repeats(q, ids, t) for q in best.values()), key=lambda q: q.first)


def _runs(ids: np.ndarray, t: np.ndarray, p: int, shortest: int = 1) -> list[tuple[int, int]]:
    """(first, length) of every maximal run of indices j with ids[j] == ids[j + p] and the same
    t[j + p] - t[j] throughout, `shortest` long at least: commands [first, first + length + p)
    repeat with shift p."""
    ok = ids[:-p] == ids[p:]
    d = t[p:] - t[:-p]
    cont = np.zeros(len(ok), dtype=bool)
    cont[1:] = ok[1:] & ok[:-1] & (d[1:] == d[:-1])
    firsts = np.flatnonzero(ok & ~cont)
    if not len(firsts):
        return []
    lengths = np.bincount(np.cumsum(ok & ~cont) * ok)[1:]
    keep = lengths >= shortest
    return list(zip(firsts[keep].tolist(), lengths[keep].tolist()))


def _with_repeats(q: Period, ids: np.ndarray, t: np.ndarray) -> Period:
    """`q` with its `repeats`: the iterations of every run of the same loop in its segment (the
    same commands from any one of them on, repeating with the same II)."""
    p, key = q.length, ids[q.first : q.first + q.length].tolist()
    twice = " " + " ".join(map(str, key + key)) + " "
    total = 0
    for a, length in _runs(ids, t, p, p):  # two iterations at least (of one segment: the signature holds it)
        if t[a + p] - t[a] != q.emitted_ii:
            continue  # another pace
        if " " + " ".join(map(str, ids[a : a + p].tolist())) + " " in twice:
            total += (length + p) // p
    return dataclasses.replace(q, repeats=max(total, q.iterations))


@dataclass
class SteadyState:
    period: Period
    channel: int
    status: str  # OPTIMAL | FEASIBLE | UNKNOWN | UNSUPPORTED
    ii: int | None  # the best initiation interval found
    bound: int  # CP-SAT's proven lower bound on II over the space
    mac_floor: int  # the period's MACs x the MAC -> MAC spacing: no schedule of any space is faster
    unrolled: int  # iterations in the model
    commands: int  # commands in the model (both channels of a shared pair)
    seconds: float
    reason: str = ""  # why UNSUPPORTED
    # the model's commands (n iterations of each channel, renumbered) and their issue cycles in the
    # best schedule found (empty if none)
    model_commands: list[Command] = dataclasses.field(default_factory=list)
    times: list[int] = dataclasses.field(default_factory=list)
    partner_period: Period | None = None  # the same loop on the other channel of a shared-bus pair
    # the two lower bounds on II stated before the search: the MAC stream's energy per period and
    # the fixed orders' recurrence (a path from a command to its copy one iteration later)
    energy: int = 0
    recurrence: int = 0

    @property
    def proven(self) -> bool:
        return self.status == "OPTIMAL"

    def as_dict(self) -> dict:
        p = self.period
        return {
            "channel": self.channel,
            "segment": p.segment,
            "start_cycle": p.start_cycle,
            "commands_per_period": p.length,
            "iterations": p.iterations,
            "repeats": p.repeats,
            "emitted_ii": p.emitted_ii,
            "status": self.status,
            "ii": self.ii,
            "bound_ii": self.bound,
            "mac_floor": self.mac_floor,
            "energy_bound": self.energy,
            "recurrence_bound": self.recurrence,
            "unrolled": self.unrolled,
            "commands": self.commands,
            "seconds": round(self.seconds, 3),
            **({"reason": self.reason} if self.reason else {}),
        }


def _slice(cmds: list[Command], first: int, count: int, base: int) -> list[Command]:
    """Commands [first, first + count) renumbered from `base`, as one segment."""
    return [dataclasses.replace(x, j=base + i, seg=0) for i, x in enumerate(cmds[first : first + count])]


def paired(
    period: Period, cmds: list[Command], partner: list[Command], slots: int, loops: list[Period] | None = None
) -> tuple[Period, Period] | None:
    """The iterations of `period` (of `cmds`) that the other channel of a shared-bus pair runs
    too, as one period of each channel: the partner's loop in the same segment with the same
    commands and II (`find_periods` on its commands), and of both only the iterations that
    overlap in time (each channel's k-th of them within half an II of the other's). None if the
    partner has no such loop, or it overlaps fewer than two iterations. `loops`:
    find_periods(partner, slots), if known."""
    p = period.length
    own = signatures(cmds[period.first : period.first + p], slots)
    for q in find_periods(partner, slots) if loops is None else loops:
        if (q.segment, q.length, q.emitted_ii) != (period.segment, p, period.emitted_ii):
            continue
        # the same loop may begin at another command of its period there: rotate it to ours
        # (the first command's buffer step is taken from the one before it, so not compared)
        theirs = signatures(partner[q.first : q.first + 2 * p], slots)
        turn = next((r for r in range(p) if theirs[r + 1 : r + p] == own[1:]), None)
        if turn is None:
            continue
        if turn:
            q = dataclasses.replace(
                q, first=q.first + turn, iterations=q.iterations - 1, start_cycle=partner[q.first + turn].t0
            )
        ii = period.emitted_ii
        off = round((q.start_cycle - period.start_cycle) / ii)  # the partner's iteration 0 ~ our `off`-th
        skip_c, skip_q = max(0, off), max(0, -off)
        count = min(period.iterations - skip_c, q.iterations - skip_q)
        if count < 2:  # (the model needs two emitted iterations at least)
            continue
        mine = dataclasses.replace(
            period,
            first=period.first + skip_c * period.length,
            iterations=count,
            start_cycle=period.start_cycle + skip_c * ii,
        )
        theirs = dataclasses.replace(
            q, first=q.first + skip_q * q.length, iterations=count, start_cycle=q.start_cycle + skip_q * ii
        )
        return mine, theirs
    return None


def _period_energy(hw: Hardware, s: list[Command], p: int, pred: list[int], overlap: dict[str, int]) -> int:
    """A lower bound on II from one channel's MAC stream (implied.py's energy, per period): the
    MAC intervals of a MAC -> MAC NoOverlap and the link commands' windows, disjoint but within a
    block (implied.window_blocks), take s x MACs + the blocks' unions of every II cycles of a
    periodic schedule. The blocks are those of iteration 1 (`s` holds iterations 0, 1, ...: the
    fixed orders of iteration 1's commands reach the iterations beside it). Where no MAC is fixed
    between iteration 0's last window and iteration 1's first, a block may run on into the next
    iteration's: only the larger of the first and the last block counts (the one block, if it is
    alone, not at all)."""
    size = overlap.get("MAC")
    if size is None:
        return 0
    rows = table_rows(hw)
    base = s[0].j
    macs = [x for x in s if x.op == "MAC"]
    per_iteration = sum(1 for x in macs if p <= x.j - base < 2 * p)
    windows, gap = link_windows(rows, s, size)
    one = [w for w in windows if p <= w[0].j - base < 2 * p]
    unions = window_blocks(rows, macs, one, pred, gap)[0] if one else []
    earlier = [w[0] for w in windows if w[0].j - base < p]
    if unions and earlier:
        last0, first1 = max(earlier, key=lambda y: y.j), min((w[0] for w in one), key=lambda y: y.j)
        if not any((pred[x.j] >> last0.j) & 1 and (pred[first1.j] >> x.j) & 1 for x in macs):
            unions[0 if len(unions) == 1 else (0 if unions[0] <= unions[-1] else -1)] = 0
    return size * per_iteration + sum(unions)


def _recurrence(s: list[Command], p: int, arcs, pred: list[int], overlap: dict[str, int]) -> int:
    """A lower bound on II from the fixed orders (the recurrence bound of modulo scheduling): a
    path of fixed arcs (a before b by at least d) from a command of iteration 0 to the same
    command of iteration 1 is at most II long. Arcs: the fixed edges, the fixed pairs' timing
    rows and windows, and between two commands of a NoOverlap type (MAC) in the fixed order its
    interval (they cannot overlap). All arcs point forward in the emitted order: longest paths in
    one pass per source, over the commands between it and its copy."""
    base, n = s[0].j, len(s)
    succ: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    for a, b, d in arcs:
        if base <= a < base + n and base <= b < base + n:
            succ[a - base].append((b - base, d))
    for op, size in overlap.items():
        xs = [x.j - base for x in s if x.op == op]
        for i, b in enumerate(xs):
            a = next((a for a in reversed(xs[:i]) if (pred[b + base] >> (a + base)) & 1), None)
            if a is not None:
                succ[a].append((b, size))
    best = 0
    for x in range(min(p, n - p)):
        dist = {x: 0}
        for i in range(x, x + p):
            di = dist.get(i)
            if di is None:
                continue
            for b, d in succ[i]:
                if b <= x + p and dist.get(b, -1) < di + d:
                    dist[b] = di + d
        best = max(best, dist.get(x + p, 0))
    return best


def buffer_slots(hw: Hardware) -> int:
    """Bursts the global buffer holds."""
    return max(1, hw.pim.global_buffer_bytes // hw.organization.burst_bytes)


def _longest_latency(hw: Hardware, ops: set[str]) -> int:
    """The longest latency any constraint of the model holds between two of the loop's commands
    (their types `ops`): a timing row between two of them, WRGB -> MAC tGB, an ACT's hold of a
    shared row bus, one bus cycle."""
    lat = max((r.lat for r in table_rows(hw) if r.prev in ops and r.next in ops), default=1)
    gb = hw.timing.p("tGB") if {"WRGB", "MAC"} <= ops else 1
    act = bus.act_bus_cycles(hw) if hw.organization.shared_bus and "ACT" in ops else 1
    return max(lat, 1, gb, act)


def solve_period(
    hw: Hardware,
    cmds: list[Command],
    period: Period,
    partner: list[Command] | None = None,
    time_limit: float = 30.0,
    workers: int = 1,
    ii_max: int | None = None,
    partner_loops: list[Period] | None = None,
) -> SteadyState:
    """The least initiation interval of `period` of one channel's commands (`cmds`, expanded in
    emitted order), as the module docstring states it. On a shared-bus device `partner` is the
    other channel of the pair (its commands): it must repeat the same period with the same II.
    `ii_max`: look only for II <= it (INFEASIBLE proves none exists). `partner_loops`: the
    partner's `find_periods`, if known."""
    t0 = time.perf_counter()
    p, ii_e = period.length, period.emitted_ii
    mac_floor = sum(1 for x in cmds[period.first : period.first + p] if x.op == "MAC") * hw.mac_interval
    lmax = _longest_latency(hw, {x.op for x in cmds[period.first : period.first + p]})

    channels: list[tuple[list[Command], Period]] = [(cmds, period)]
    energy = recurrence = 0

    def out(status: str, n: int, count: int, reason: str = "", ii=None, bound: int = 0, every=(), times=()):
        return SteadyState(
            period,
            cmds[0].ch,
            status,
            ii,
            bound,
            mac_floor,
            n,
            count,
            time.perf_counter() - t0,
            reason,
            every,
            times,
            channels[1][1] if len(channels) > 1 else None,
            energy,
            recurrence,
        )

    if hw.organization.shared_bus:
        if partner is None:
            return out("UNSUPPORTED", 0, 0, "shared command bus: the pair's other channel is not given")
        both = paired(period, cmds, partner, buffer_slots(hw), partner_loops)
        if both is None:
            return out("UNSUPPORTED", 0, 0, "the pair's other channel runs no such loop beside it")
        period = both[0]
        channels = [(cmds, period), (partner, both[1])]
    first_t = min(x.t0 for ch, q in channels for x in ch[q.first : q.first + p])
    span = max(x.t0 for ch, q in channels for x in ch[q.first : q.first + p]) - first_t
    n = max(2, -(-(span + lmax) // ii_e))
    if n > period.iterations:
        return out("UNSUPPORTED", n, 0, f"an iteration spans {span} cycles: needs {n} emitted iterations")
    slices = [_slice(ch, q.first, n * p, k * n * p) for k, (ch, q) in enumerate(channels)]
    streams = [ChannelStream(k, [("cmd", x) for x in s]) for k, s in enumerate(slices)]
    every = [x for s in slices for x in s]
    count = len(every)
    edges = fixed_edges(hw, streams)
    pred = predecessors(streams, count, edges)
    m = cp_model.CpModel()
    horizon = (n + 1) * ii_e + span + lmax
    t = [m.NewIntVar(0, horizon, f"t{x.j}") for x in every]
    least = max(1, mac_floor, p)  # (a bus cycle per command, tMAC per MAC)
    if ii_max is not None and ii_max < least:
        return out("INFEASIBLE", n, count, bound=least)
    ii = m.NewIntVar(least, ii_max or ii_e, "ii")
    for a, b, d in edges:
        m.Add(t[b] >= t[a] + d)
    order_vars = []
    for s in slices:
        ps = add_channel(m, hw, s, t, pred, order_vars)
        base = s[0].j
        arcs = list(edges) + [(a, b, d) for (a, b), d in ps.fixed.items()] + ps.windows
        recurrence = max(recurrence, _recurrence(s, p, arcs, pred, ps.overlap))
        energy = max(energy, _period_energy(hw, s, p, pred, ps.overlap))
        for i in range((n - 1) * p):  # every iteration repeats the one before it, II later
            m.Add(t[base + i + p] == t[base + i] + ii)
        for x in s[:p]:  # iteration 0 within [0, n II - L]: iterations n apart are L apart
            m.Add(t[x.j] + lmax <= n * ii)
    if len(slices) == 2:  # channels 2k, 2k+1 share a row and a column command bus
        add_shared_buses(m, hw, every, t)
    m.Add(ii >= max(energy, recurrence))
    m.Minimize(ii)
    emitted = {x.j: x.t0 - first_t for x in every}
    if ii_max is None or ii_max >= ii_e:  # the emitted schedule is one of the model's
        complete_hint(
            m,
            [(t[j], v) for j, v in emitted.items()]
            + [(ii, ii_e)]
            + [(o, int(emitted[a] < emitted[b])) for o, a, b in order_vars],
        )
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = time_limit
    solver.parameters.num_workers = workers
    solver.parameters.random_seed = 0
    solver.parameters.cp_model_probing_level = 0  # (as model.py: probing spends the budget, moves no bound)
    st = solver.Solve(m)
    found = st in (cp_model.OPTIMAL, cp_model.FEASIBLE)
    return out(
        solver.StatusName(st),
        n,
        count,
        ii=int(solver.ObjectiveValue()) if found else None,
        bound=int(solver.BestObjectiveBound()) if found else (ii_max or ii_e) + 1 if st == cp_model.INFEASIBLE else 0,
        every=every,
        times=[int(solver.Value(t[x.j])) for x in every] if found else [],
    )
