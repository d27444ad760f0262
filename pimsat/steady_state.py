"""The steady state of each task loop of a compiled program, as a modulo schedule with a proven
initiation interval (solver/cmdlevel/modulo.py; issue 16, item 2b): `pimsat solve --steady-state`.

The loops are read on the critical channel (the one whose last command issues last) and, on a
shared-bus device, the channel it shares its command buses with. Each segment of that stream
(between SIG/WAIT, one task or a piece of one) with a loop of at least three iterations gets its
period solved; the report's `steady_state` block lists them with the task each belongs to.
"""

from __future__ import annotations

from hwmodel import bus
from solver.cmdlevel.commands import Command, expand
from solver.cmdlevel.modulo import SteadyState, buffer_slots, find_periods, solve_period

from .command_level import inputs_of

SCOPE = (
    "periodic schedules of one loop period's commands (every iteration the same issue cycles, "
    "shifted by II) under the timing table, the bus (and a channel pair's shared buses), the "
    "global-buffer data dependencies, with each bank's, each accumulator's, the link's and the "
    "row commands' order kept within and across iterations; refresh, the loop's prologue and "
    "epilogue, and the tiling are outside it (solver/cmdlevel/modulo.py)"
)


def critical_channel(logs) -> int:
    """The channel whose last command issues last (the first of equals)."""
    ends = [int(log["cycle"][-1]) if len(log) else -1 for log in logs]
    return max(range(len(ends)), key=lambda c: (ends[c], -c))


def task_at(run_result, channel: int, cycle: int) -> str | None:
    """The task of `channel`'s group that started last at or before `cycle`."""
    groups = [g.name for g in run_result.problem.groups if channel in g.channels]
    resource = {t.name: t.resource for j in run_result.problem.jobs for m in j.modes for t in m.tasks}
    started = [
        (s, name) for name, s in run_result.compiled.task_starts.items() if resource.get(name) in groups and s <= cycle
    ]
    return max(started)[1] if started else None


def channel_commands(run_result, channel: int, logs=None) -> list[Command]:
    """One channel's commands, expanded (solver/cmdlevel/commands.expand). `logs`: the per-channel
    command logs (`inputs_of`), if already split."""
    if logs is None:
        logs, _ = inputs_of(run_result)
    return expand(run_result.hardware, [run_result.compiled.streams.channels[channel]], [logs[channel]])[1]


def steady_states(run_result, time_limit: float = 30.0, workers: int = 1) -> dict:
    """The report's `steady_state` block: each loop of the critical channel, its period solved."""
    r = run_result
    hw = r.hardware
    logs, _ = inputs_of(r)
    c = critical_channel(logs)
    cmds = channel_commands(r, c, logs)
    partner = channel_commands(r, bus.partner(c), logs) if hw.organization.shared_bus else None
    theirs = find_periods(partner, buffer_slots(hw)) if partner is not None else None
    loops = []
    for period in find_periods(cmds, buffer_slots(hw)):
        st: SteadyState = solve_period(
            hw, cmds, period, partner, time_limit=time_limit, workers=workers, partner_loops=theirs
        )
        loops.append(
            {
                "task": task_at(r, c, st.period.start_cycle),
                **st.as_dict(),
                "cycles": st.period.repeats * st.period.emitted_ii,
                "emitted_proven_optimal": st.proven and st.ii == st.period.emitted_ii,
            }
        )
    return {
        "channel": c,
        "loops": loops,
        # the critical channel's cycles in loops whose emitted II is proven the least, of all
        "proven_loop_cycles": sum(lp["cycles"] for lp in loops if lp["emitted_proven_optimal"]),
        "cycles": int(r.sim.cycles),
        "scope": SCOPE,
    }


def describe(block: dict) -> list[str]:
    """One line per loop, for the summary."""
    out = []
    for lp in block["loops"]:
        name = lp["task"] or f"segment {lp['segment']}"
        runs = f", {lp['repeats']} in all its runs" if lp["repeats"] > lp["iterations"] else ""
        head = f"{name}: {lp['commands_per_period']} commands x {lp['iterations']}{runs}"
        if lp["status"] == "UNSUPPORTED":
            out.append(f"{head}: not modelled ({lp['reason']})")
            continue
        if lp["emitted_proven_optimal"]:
            verdict = "the emitted loop is optimal"
        elif lp["status"] == "OPTIMAL":
            verdict = f"least II {lp['ii']:,}"
        elif lp["ii"] is None:
            verdict = f"none found in the time limit (recurrence bound {lp['recurrence_bound']:,})"
        else:
            verdict = f"best {lp['ii']:,}, bound {lp['bound_ii']:,}"
        out.append(
            f"{head}, emitted II {lp['emitted_ii']:,} cycles: {lp['status']}, {verdict} "
            f"(MAC floor {lp['mac_floor']:,}; {lp['seconds']:.1f} s)"
        )
    if block["loops"]:
        share = block["proven_loop_cycles"] / max(1, block["cycles"])
        out.append(
            f"in loops proven optimal: {block['proven_loop_cycles']:,} of {block['cycles']:,} cycles ({share:.0%})"
        )
    return out
