"""The command-level model (solver/cmdlevel) on a program the pipeline compiled: solve, re-emit
stamped, simulate, verify (issue 16, item 2a)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from solver.cmdlevel import CommandSchedule, restamp, solve

from .pipeline import simulate_program, verify_program


@dataclass
class CommandLevel:
    schedule: CommandSchedule
    simulated_cycles: int | None  # the re-emitted program, simulated
    bit_exact: bool | None  # functional runs: the re-emitted program's values == the bit-true model
    outputs_match: bool | None

    @property
    def proven(self) -> bool:
        return self.schedule.status == "OPTIMAL"

    def as_dict(self) -> dict:
        """The report's `command_level` block."""
        s = self.schedule
        return {
            "status": s.status,
            "objective_cycles": s.objective,
            "bound_cycles": s.bound,
            "gap": s.gap,
            "emitted_cycles": s.emitted,
            "simulated_cycles": self.simulated_cycles,
            "bit_exact": self.bit_exact,
            "seconds": s.seconds,
            "commands": s.stats["commands"],
            "free_pairs": s.stats["free_pairs"],
            "scope": SCOPE,
        }


SCOPE = (
    "this program's commands, every issue cycle free under the timing table, bus, data "
    "dependencies and SIG/WAIT, with each bank's, each accumulator's, the link's and the row "
    "commands' order kept and SIG/WAIT/REF as barriers (solver/cmdlevel)"
)


def inputs_of(run_result) -> tuple[list[np.ndarray], dict[int, int]]:
    """(per-channel command logs, host instruction durations) of a pipeline run (record=True)."""
    sim, streams = run_result.sim, run_result.compiled.streams
    if sim.log is None:
        raise ValueError("the command-level model needs the simulator's command log (record=True)")
    log = sim.log
    logs = [log[log["channel"] == c] for c in range(len(streams.channels))]
    ht = sim.host_times
    durations = {
        i: int(ht.done[i] - ht.issue[i]) for i, ins in enumerate(streams.host) if ins.op not in ("SIG", "WAIT")
    }
    return logs, durations


def command_level(run_result, time_limit: float = 50.0, workers: int = 1, simulate: bool = True) -> CommandLevel:
    """Solve the command-level model of the program `pimsat.pipeline.run` chose and simulated,
    with the emitted program as the hint; re-emit the best schedule stamped and simulate it
    (functional when the pipeline's run was): the simulator must accept it, with the model's
    makespan, and with functional runs the bit-true check must stay exact."""
    r = run_result
    streams = r.compiled.streams
    logs, durations = inputs_of(r)
    sched = solve(
        r.hardware,
        streams.channels,
        streams.host,
        logs,
        durations,
        int(r.sim.cycles),
        time_limit=time_limit,
        workers=workers,
    )
    if not simulate or sched.objective is None:
        return CommandLevel(sched, None, None, None)
    new = dataclasses.replace(r.compiled, streams=restamp(streams, sched), predicted_cycles=sched.objective)
    functional = bool(r.sim.functional)
    result, inputs, state = simulate_program(
        r.hardware, r.program, new, functional=functional, record=False, values=r.instance.values
    )
    verdict = verify_program(r.hardware, r.program, new, result, inputs, state)  # raises on a mismatch
    return CommandLevel(sched, int(result.cycles), verdict.bit_exact, verdict.outputs_match)
