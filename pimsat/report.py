"""report.json (the contract of BRIEF §7) and the rich summary printed after a solve."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from solver.alternatives import offered
from solver.bound_parts import streaming_parts
from solver.problem import ProofScope, Status

from .mac_stream import Held, describe, describe_distance, distance, mac_stream
from .pipeline import RunResult


def proven_bound(r: RunResult) -> int | None:
    """CP-SAT's bound, made valid for the real makespan: the model measures tasks to their quiet
    end, the real makespan to the last completion, which can be earlier by at most the tail."""
    if r.solution.bound is None:
        return None
    return max(0, int(r.solution.bound) - r.lowering.max_tail)


def report_dict(r: RunResult) -> dict[str, Any]:
    """Two gaps, each against bounds of its own space:
    - `model_gap`: CP-SAT's objective against its proven bound, both in the task-level model
      (tasks to their quiet end, refresh lumped per round). None without a bound (heuristics).
    - `gap`: the program against the best bound that holds for every program decoded from the
      task space (the hardware bound, or the mode bound: the critical path over the fastest
      modes), and `hardware_gap` against the hardware bound alone (every program whatever its
      emitter). The model's bound is not among them: it bounds the programs decoded from the
      task space only, less the largest task tail (`bound_cycles`), and a program can end
      below the model's objective (`decode_minus_model_cycles` says by how much). (The example
      this docstring gave, gemv-4096-b4-hbm2-64ch at 42,430 cycles under a model bound of
      42,437, was a wrong proof: a long task's own REFs credited below the model's charge per
      round on shared command pairs, fixed in solver/lower.py `refresh_credit`.)"""
    sim = r.sim
    predicted = r.compiled.predicted_cycles
    bound = proven_bound(r)
    lb = r.bounds.cycles  # the best solver-free bound: hardware, or the mode bound of the task space
    model_obj, model_bound = r.solution.objective, r.solution.bound
    ms = None
    if getattr(sim, "log", None) is not None:
        streams, times = r.compiled.streams.channels, sim.channel_times
        ms = mac_stream(sim.log, r.hardware, int(sim.cycles), lambda ch: Held.of(streams[ch], times[ch]))
    parts = None if ms is None else streaming_parts(r.hardware, r.program, r.bounds.hardware)
    return {
        "instance": r.instance.name,
        "hardware": r.hardware.name,
        "method": str(r.solution.method),
        "status": str(r.solution.status),  # final (pimsat.pipeline.final_status)
        "proof_scope": str(ProofScope.TASKS if r.solution.status == Status.OPTIMAL else ProofScope.NONE),
        "search_end": None if r.solution.search_end is None else str(r.solution.search_end),
        "objective_cycles": predicted,
        "bound_cycles": bound,
        "lower_bound_cycles": r.bounds.hardware.cycles,  # physical: hardware + op graph only
        "simulated_cycles": int(sim.cycles),
        "outputs_match": r.outputs_match,
        "max_abs_error": r.max_abs_error,
        "bit_exact": r.bit_exact,
        "violations": int(getattr(sim, "violations", 0)),
        "solve_seconds": round(r.solve_seconds, 3),
        "utilization": round(float(sim.utilization), 4),
        "gap": round((predicted - lb) / predicted, 5) if predicted else None,
        "model_objective_cycles": model_obj,
        "model_bound_cycles": None if model_bound is None else int(model_bound),
        "model_gap": (
            round((model_obj - model_bound) / model_obj, 5) if model_bound is not None and model_obj else None
        ),
        "decode_minus_model_cycles": None if model_obj is None else predicted - int(model_obj),
        "bandwidth_bound_cycles": r.bounds.bandwidth_cycles,
        "bandwidth_refresh_bound_cycles": r.bounds.bandwidth_refresh_cycles,
        "mode_bound_cycles": r.bounds.mode_bound_cycles,
        "hardware_bound_cycles": r.bounds.hardware.cycles,
        "bound_terms": r.bounds.hardware.as_dict(),
        "binding_term": str(r.bounds.hardware.binding),
        "hardware_gap": round((predicted - r.bounds.hardware.cycles) / predicted, 5) if predicted else None,
        "predicted_minus_simulated": predicted - int(sim.cycles),
        "time_ns": round(int(sim.cycles) * r.hardware.timing.tCK_ns, 1),
        "channels": r.hardware.organization.channels,
        "groups": len(r.problem.groups),
        "jobs": len(r.problem.jobs),
        "modes": {j: m for j, m in sorted(r.solution.modes.items())},
        # modes of each alternative the lowering offered (`--without` withholds; solver/alternatives.py)
        "offered": offered(r.problem),
        "instructions": r.compiled.streams.instruction_count(),
        # channels the simulator ran; the others had a twin's identical stream (sim/twins.py)
        "channels_run": getattr(sim, "channels_run", None),
        "busy_channels": sum(1 for s in r.compiled.streams.channels if len(s)),
        "commands": {k: int(v) for k, v in sorted(getattr(sim, "command_counts", {}).items())},
        "message": r.solution.message,
        "history": [list(h) for h in r.solution.history],
        "phase_seconds": {k: round(v, 3) for k, v in r.timings.items()},
        "functional": r.outputs_match is not None,
        # the critical channel's makespan term by term (pimsat/mac_stream.py; runs with a command log)
        "mac_stream": ms,
        # ... against the hardware bound's streaming parts (solver/bound_parts.py)
        "distance": None if ms is None or parts is None else distance(ms, parts),
    }


def print_summary(rep: dict[str, Any], console: Console | None = None) -> None:
    console = console or Console()
    t = Table(
        title=f"pimsat solve — {rep['instance']} on {rep['hardware']} ({rep['channels']} channels)", show_header=False
    )
    t.add_column("what", style="bold")
    t.add_column("value", justify="right")

    def cyc(x):
        return "—" if x is None else f"{x:,}"

    end = {
        "work budget": " (search ended by its work budget: reproducible)",
        "wall clock": " (search cut short by the wall clock: not reproducible)",
    }.get(rep.get("search_end") or "", "")
    scope = " (over the task-level model)" if rep.get("proof_scope") == ProofScope.TASKS else ""
    t.add_row("method / status", f"{rep['method']} / {rep['status']}{scope}{end}")
    t.add_row("predicted makespan", f"{cyc(rep['objective_cycles'])} cycles ({rep['time_ns'] / 1000:,.1f} µs)")
    t.add_row("simulated", f"{cyc(rep['simulated_cycles'])} cycles")
    gap = "—" if rep["model_gap"] is None else f"{rep['model_gap'] * 100:.2f} %"
    t.add_row(
        "model objective / bound (task level)",
        f"{cyc(rep['model_objective_cycles'])} / {cyc(rep['model_bound_cycles'])} (model gap {gap})",
    )
    if rep["decode_minus_model_cycles"]:
        t.add_row("decoded − model objective", f"{rep['decode_minus_model_cycles']:+,} cycles")
    terms = ", ".join(f"{k.replace('_', ' ')} {cyc(v)}" for k, v in rep["bound_terms"].items())
    t.add_row("hardware bound", f"{cyc(rep['hardware_bound_cycles'])} ({rep['binding_term']}; {terms})")
    t.add_row("mode bound (lowered modes)", cyc(rep["mode_bound_cycles"]))
    t.add_row("gap to hardware or mode bound", "—" if rep["gap"] is None else f"{rep['gap'] * 100:.2f} %")
    t.add_row("gap to hardware bound", "—" if rep["hardware_gap"] is None else f"{rep['hardware_gap'] * 100:.2f} %")
    if rep.get("mac_stream"):
        t.add_row("where the cycles go (MAC stream)", describe(rep["mac_stream"]))
    if rep.get("distance"):
        t.add_row("above the hardware bound, by term", describe_distance(rep["distance"]))
    t.add_row(
        "outputs match reference",
        {True: "yes", False: "NO", None: "timing-only"}[rep["outputs_match"]]
        + ("" if rep["max_abs_error"] is None else f" (max |err| {rep['max_abs_error']:.3g})"),
    )
    t.add_row(
        "equals bit-true model",
        {True: "yes (every tensor, exactly)", False: "NO", None: "timing-only"}[rep.get("bit_exact")],
    )
    t.add_row("violations", str(rep["violations"]))
    t.add_row("PIM utilisation", f"{rep['utilization'] * 100:.1f} %")
    t.add_row("solve time", f"{rep['solve_seconds']:.2f} s")
    t.add_row("instructions", f"{rep['instructions']:,}")
    busy = rep.get("busy_channels")
    if rep.get("channels_run") is not None and busy and rep["channels_run"] < busy:
        t.add_row(
            "channels simulated", f"{rep['channels_run']} of {busy} (the others: identical streams, sim/twins.py)"
        )
    console.print(t)
