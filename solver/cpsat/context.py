"""The shared state of one CP-SAT model build: variables by problem entity.

Every constraint module (modes, precedence, resources, capacity, objective, refresh, symmetry)
reads and extends one `ModelContext`. Construction order is the problem's order throughout
(jobs, modes, tasks, dependencies, groups), so the model is byte-identical for identical input.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ortools.sat.python import cp_model

from solver.index import ProblemIndex
from solver.problem import Job, Mode, Range, SchedulingProblem


@dataclass
class ModelContext:
    problem: SchedulingProblem
    index: ProblemIndex
    horizon: int
    model: cp_model.CpModel = field(default_factory=cp_model.CpModel)
    # (job, mode) -> presence literal; None = the job's only live mode (fixed presence)
    lit: dict[tuple[str, str], cp_model.IntVar | None] = field(default_factory=dict)
    live: dict[str, list[Mode]] = field(default_factory=dict)  # job -> modes that fit the horizon
    dead: list[tuple[str, str]] = field(default_factory=list)  # modes excluded by the horizon
    start: dict[str, cp_model.IntVar] = field(default_factory=dict)  # task -> start var
    interval: dict[str, cp_model.IntervalVar] = field(default_factory=dict)
    by_resource: dict[str, list[str]] = field(default_factory=dict)  # resource -> task names
    # (job, op, part read) -> result ready
    ready: dict[tuple[str, str | None, Range | None], cp_model.LinearExprT] = field(default_factory=dict)
    ready_var: dict[tuple[str, str | None, Range | None], cp_model.IntVar] = field(
        default_factory=dict
    )  # only real vars
    # (job, op, part read, res)
    out_lit: dict[tuple[str, str | None, Range | None, str], cp_model.IntVar] = field(default_factory=dict)
    makespan: cp_model.IntVar | None = None
    n_ref: cp_model.IntVar | None = None
    symmetry_classes: list[list[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def enf(self, job: str, mode: str) -> list[cp_model.IntVar]:
        """Enforcement literals of constraints that hold only when `mode` is chosen."""
        lit = self.lit[(job, mode)]
        return [] if lit is None else [lit]

    def live_modes(self, job: Job | str) -> list[Mode]:
        return self.live[job if isinstance(job, str) else job.name]

    def end(self, task: str) -> cp_model.LinearExprT:
        return self.start[task] + self.index.tasks[task].task.duration

    def mode_terms(self, value: Callable[[Mode], int]) -> tuple[int, list, list[int]]:
        """Sum over jobs of `value(chosen mode)` as a linear form: (constant from the jobs with one
        live mode, literals of the others' modes, their coefficients); zero values are left out."""
        const = 0
        lits, coefs = [], []
        for job in self.problem.jobs:
            for mode in self.live_modes(job):
                v = value(mode)
                if v == 0:
                    continue
                lit = self.lit[(job.name, mode.name)]
                if lit is None:
                    const += v
                else:
                    lits.append(lit)
                    coefs.append(v)
        return const, lits, coefs

    def work_expr(self, resource: str, refresh: bool = False) -> cp_model.LinearExprT:
        """Total busy time of `resource` under the chosen modes (a linear expression); with
        `refresh`, less the tasks' own REFs (Task.refresh_work): what lumped refresh stretches."""

        def busy(m: Mode) -> int:
            return sum(t.refresh_work if refresh else t.duration for t in m.tasks if t.resource == resource)

        const, lits, coefs = self.mode_terms(busy)
        if not lits:
            return cp_model.LinearExpr.constant(const)
        return cp_model.LinearExpr.weighted_sum(lits, coefs) + const

    def max_work(self, resource: str) -> int:
        """Largest possible busy time of `resource` (for domains)."""
        total = 0
        for job in self.problem.jobs:
            total += max(
                (sum(t.duration for t in m.tasks if t.resource == resource) for m in self.live_modes(job)), default=0
            )
        return total
