"""The command-level CP-SAT model of a whole program: build, hint with the emitted program, solve."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from ortools.sat.python import cp_model

from hwmodel import Hardware, bus
from hwmodel.model import ROW_COMMANDS

from .commands import ChannelStream, Command, expand, fixed_edges
from .implied import mac_link_cumulative, tails
from .order import predecessors
from .sync import Sync
from .timing_rows import pairs, table_rows


@dataclass
class CommandSchedule:
    status: str  # OPTIMAL | FEASIBLE | UNKNOWN
    objective: int | None  # the model's makespan of the best schedule found
    bound: int  # CP-SAT's proven lower bound on the makespan over the model's space
    emitted: int  # the emitted program's makespan (the hint's value)
    seconds: float
    times: dict[int, int]  # command j -> issue cycle
    commands: list[Command]
    streams: list[ChannelStream]
    stats: dict[str, int] = field(default_factory=dict)

    @property
    def gap(self) -> float:
        return 0.0 if not self.objective else (self.objective - self.bound) / self.objective


def solve(
    hw: Hardware,
    channels,
    host,
    logs,
    host_durations: dict[int, int],
    emitted_cycles: int,
    time_limit: float = 50.0,
    workers: int = 1,
    hint: bool = True,
    implied: bool = True,
    params: dict | None = None,
) -> CommandSchedule:
    """Minimise the makespan of the program whose channel streams are `channels` (their command
    logs `logs` give the emitted cycles) and host stream `host`, over the command-level space
    (see the package docstring). `emitted_cycles`: the emitted program's simulated makespan,
    the horizon (the hint meets it). `implied`: add implied.py's redundant constraints."""
    t0 = time.perf_counter()
    streams, cmds = expand(hw, channels, logs)
    n, H = len(cmds), emitted_cycles
    edges = fixed_edges(hw, streams)
    pred = predecessors(streams, n, edges)
    m = cp_model.CpModel()
    t = [m.NewIntVar(0, H, f"t{x.j}") for x in cmds]
    stats = {
        "commands": n,
        "fixed_edges": len(edges),
        "fixed_pairs": 0,
        "free_pairs": 0,
        "window_pairs": 0,
        "mac_link_windows": 0,
    }
    for a, b, d in edges:
        m.Add(t[b] >= t[a] + d)
    order_vars: list[tuple[object, int, int]] = []
    per_channel = []
    for cs in streams:
        mine = [x for k, x in cs.items if k == "cmd"]
        if not mine:
            continue
        ps = add_channel(m, hw, mine, t, pred, order_vars)
        arcs = [(a, b, d) for a, b, d in edges] + [(a, b, d) for (a, b), d in ps.fixed.items()] + ps.windows
        per_channel.append((mine, ps, arcs))
        stats["fixed_pairs"] += len(ps.fixed)
        stats["free_pairs"] += len(ps.free)
        stats["window_pairs"] += len(ps.windows)
    if hw.organization.shared_bus:  # channels 2k, 2k+1 share a row and a column command bus
        for a in range(0, len(streams) - 1, 2):
            add_shared_buses(m, hw, [x for cs in streams[a : a + 2] for k, x in cs.items if k == "cmd"], t)
    sy = Sync(m, hw, H)
    for cs in streams:
        sy.channel(cs, t)
    sy.host(host, host_durations)
    makespan = m.NewIntVar(0, H, "makespan")
    m.AddMaxEquality(makespan, sy.ends + list(sy.sig.values()))
    if any(x.op in ("REF", "REFSB") for x in cmds):
        for cs in streams:
            sy.refresh(cs, t, makespan)
    if implied:
        after = sy.after_sig(host, host_durations)
        rows = table_rows(hw)
        for mine, ps, arcs in per_channel:
            if "MAC" in ps.overlap:
                tail = tails(mine, arcs, sy.compl, after)
                stats["mac_link_windows"] += mac_link_cumulative(
                    m, rows, mine, t, ps.overlap["MAC"], pred, makespan, tail
                )
    m.Minimize(makespan)
    if hint:
        complete_hint(m, [(t[x.j], x.t0) for x in cmds] + [(o, int(cmds[a].t0 < cmds[b].t0)) for o, a, b in order_vars])
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = time_limit
    solver.parameters.num_workers = workers
    solver.parameters.random_seed = 0
    # probing spent 17 of 50 s in presolve on gemv-128x256-fpga and moved no bound
    solver.parameters.cp_model_probing_level = 0
    for k, v in (params or {}).items():
        if isinstance(v, list):
            getattr(solver.parameters, k).extend(v)
        else:
            setattr(solver.parameters, k, v)
    st = solver.Solve(m)
    status = solver.StatusName(st)
    found = st in (cp_model.OPTIMAL, cp_model.FEASIBLE)
    return CommandSchedule(
        status=status,
        objective=int(solver.ObjectiveValue()) if found else None,
        bound=int(solver.BestObjectiveBound()) if found or st == cp_model.INFEASIBLE else 0,
        emitted=emitted_cycles,
        seconds=time.perf_counter() - t0,
        times={x.j: int(solver.Value(t[x.j])) for x in cmds} if found else {},
        commands=cmds,
        streams=streams,
        stats=stats,
    )


def add_channel(m: cp_model.CpModel, hw: Hardware, mine: list[Command], t: list, pred: list[int], order_vars: list):
    """One channel's constraints (its commands `mine`): one command per bus cycle, every timing
    row between its commands (timing_rows.pairs: fixed pairs, free pairs with an order Boolean
    each, appended to `order_vars` as (o, a, b), windows) and the NoOverlap of each command type
    whose rows to itself are channel-wide. Returns the pairs."""
    m.AddNoOverlap([m.NewFixedSizeIntervalVar(t[x.j], 1, f"u{x.j}") for x in mine])
    ps = pairs(hw, mine, pred)
    for (a, b), lat in ps.fixed.items():
        m.Add(t[b] >= t[a] + lat)
    for a, b, lab, lba in ps.free:
        o = m.NewBoolVar(f"o{a}_{b}")
        m.Add(t[b] >= t[a] + lab).OnlyEnforceIf(o)
        m.Add(t[a] >= t[b] + lba).OnlyEnforceIf(o.Not())
        order_vars.append((o, a, b))
    for a, b, lat in ps.windows:
        m.Add(t[b] >= t[a] + lat)
    for op, size in ps.overlap.items():
        xs = [x for x in mine if x.op == op]
        if len(xs) > 1:
            m.AddNoOverlap([m.NewFixedSizeIntervalVar(t[x.j], size, f"i{x.j}") for x in xs])
    return ps


def add_shared_buses(m: cp_model.CpModel, hw: Hardware, pair: list[Command], t: list) -> None:
    """The commands of two channels that share a row and a column command bus (shared_pair):
    their row commands do not overlap (an ACT holds the row bus tACT_BUS cycles), nor do their
    column commands."""
    act_w = bus.act_bus_cycles(hw)
    for row in (True, False):
        xs = [x for x in pair if (x.op in ROW_COMMANDS) == row]
        if len(xs) > 1:
            m.AddNoOverlap([m.NewFixedSizeIntervalVar(t[x.j], act_w if x.op == "ACT" else 1, f"b{x.j}") for x in xs])


def complete_hint(m: cp_model.CpModel, values: list[tuple[object, int]]) -> None:
    """Hint every variable of `m` with the emitted program: fix the given ones in a copy, solve it
    (propagation alone: the emitted schedule is feasible), and hint the whole solution (a partial
    hint is often lost by multi-worker search)."""
    fixed = m.clone()
    for v, val in values:
        fixed.Add(fixed.get_int_var_from_proto_index(v.Index()) == val)
    s = cp_model.CpSolver()
    s.parameters.num_workers = 1
    s.parameters.max_time_in_seconds = 10
    if s.Solve(fixed) not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        raise RuntimeError("the emitted program is not a solution of the command-level model")
    for i in range(len(m.Proto().variables)):
        m.AddHint(m.get_int_var_from_proto_index(i), s.Value(fixed.get_int_var_from_proto_index(i)))
