"""The scheduling problem the solvers see: jobs with alternative modes, tasks on resources.

This is solver-independent data, produced by `solver.lower` from an ir.Program and a Hardware
(every duration exact, computed by running the emitted commands through the simulator's timing
rules) and consumed by `solver.cpsat` and `solver.heuristics`, which return a `Solution`.

- A *resource* is the host unit or a *channel group*: a set of identical channels that run the
  same command stream in lockstep (on different data). Each resource executes one task at a time.
- A *job* is one ir op or a fusion group of ops (e.g. Q/K/V projections sharing their input).
  It has one or more *modes* (tiling, placement, fusion and dispatch alternatives); exactly one
  mode is chosen.
- A mode is a small DAG of *tasks* (fixed duration, fixed resource) with internal edges. Its
  `output` task makes the job's results available in host memory; its `inputs` tasks are the
  ones that read the job's inputs and must wait for the producers.
- A dependency a -> b: every input task t of b's mode starts no earlier than the end of a's
  output task plus `problem.lag(output resource, t.resource)` (a sync between streams costs
  `sync_cycles`; a task that follows on the same resource waits for nothing more).
  At op granularity (`Dependency.ops`, the (producer op, consumer op) pairs behind it): the
  producer op's result is ready at the end of `a_mode.outputs[op]` (an unfused Q/K/V mode
  finishes Q long before V), and only the input tasks that read the consumer op
  (`b_mode.reads[task]`, e.g. the KV append of an attention job reads the new K/V, not the
  softmax) wait for it. A mode pipelined by head groups refines this by heads
  (`Mode.heads`, `Mode.head_outputs`): an input task that reads heads [h0, h1) of a producer op
  waits for the producer mode's task that makes a head range covering them ready, if it has one
  (`Mode.output_for`); a batch run as micro-batches likewise by batch rows (`Mode.batch_rows`,
  `Mode.batch_outputs`). `SchedulingProblem.links` is the one place this rule is spelled out.
- Capacity: a mode uses `usage[group]` DRAM rows in every bank of every channel of that group;
  per group the sum over chosen modes (times `repeat`, for layer templates) must not exceed the
  group's `capacity_rows` (rows per bank left after the reserved KV cache and other fixed data).
- Refresh: every channel group owes one REF (tRFC busy cycles) every tREFI cycles.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum, StrEnum
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from .payload import ModePayload

HOST = "host"


class Axis(StrEnum):
    """What a mode cuts an op's result by, for readers that need only part of it."""

    HEADS = "heads"  # attention heads (solver/head_groups.py)
    BATCH = "batch"  # batch rows (solver/micro_batch.py)


class Range(NamedTuple):
    """Elements [lo, hi) along `axis` of a result."""

    axis: Axis
    lo: int
    hi: int


@dataclass(frozen=True)
class Task:
    name: str  # unique within the problem, e.g. "l0.q_proj/pim4/g2"
    resource: str  # HOST or a group name "g0", "g1", ...
    duration: int  # exact cycles, >= 1
    # cycles of `duration` a long task spends in REFs of its own (solver/refresh_points.py): tRFC x
    # the REFs its first channel issues; the lumped refresh relaxation does not count them twice
    refresh_credit: int = 0
    # a host task that continues the program's one host kernel launch (chain=1 on its first
    # instruction, ISA 1.6 LAUNCH): `duration` leaves out dispatch_cycles (solver/launch_chain.py)
    chained: bool = False

    @property
    def refresh_work(self) -> int:
        """The busy time the lumped refresh relaxation adds tRFC per owed REF to."""
        return self.duration - self.refresh_credit


@dataclass(frozen=True)
class Edge:
    before: str  # task name
    after: str  # task name
    lag: int = 0  # after.start >= before.end + lag


@dataclass(frozen=True)
class Mode:
    name: str  # e.g. "pim[g0,g1]", "pim-fused[all]", "host"
    tasks: tuple[Task, ...]
    edges: tuple[Edge, ...]
    inputs: tuple[str, ...]  # task names that read the job's inputs
    output: str  # task name whose end = job results in host memory
    usage: dict[str, int] = field(default_factory=dict)  # group -> DRAM rows per bank
    payload: ModePayload | None = None  # lowering data for the decoder (opaque to solvers)
    outputs: dict[str, str] = field(
        default_factory=dict
    )  # covered op -> task after which its result is ready (default: output)
    reads: dict[str, tuple[str, ...]] = field(
        default_factory=dict
    )  # input task -> covered ops whose inputs it reads (default: all)
    # attention pipelined by head groups: input task -> the heads [h0, h1) of the producer's
    # result it reads (default: all of it) ...
    heads: dict[str, tuple[int, int]] = field(default_factory=dict)
    # ... and covered op -> ((h0, h1, task), ...): after which task heads [h0, h1) of its result
    # are ready, ranges in head order, each task ending no earlier than the one before (the mode
    # chains them): a consumer reading heads [a, b) waits for the task of the range holding b - 1
    head_outputs: dict[str, tuple[tuple[int, int, str], ...]] = field(default_factory=dict)
    # a batch run as micro-batches (solver/micro_batch.py), likewise by batch rows: input task ->
    # the rows [b0, b1) of the producer's result it reads, and covered op -> ((b0, b1, task), ...)
    batch_rows: dict[str, tuple[int, int]] = field(default_factory=dict)
    batch_outputs: dict[str, tuple[tuple[int, int, str], ...]] = field(default_factory=dict)

    def output_of(self, op: str) -> str:
        return self.outputs.get(op, self.output)

    def reads_range(self, task: str) -> Range | None:
        """The part of its producers' results input task `task` reads: a head range, a batch-row
        range, or None (all of it)."""
        if task in self.heads:
            return Range(Axis.HEADS, *self.heads[task])
        if task in self.batch_rows:
            return Range(Axis.BATCH, *self.batch_rows[task])
        return None

    def ranges_of(self, op: str) -> tuple[tuple[int, int, str], ...]:
        """Every (lo, hi, task) range of `op`'s result this mode makes ready piece by piece."""
        return self.head_outputs.get(op, ()) + self.batch_outputs.get(op, ())

    def output_for(self, op: str | None, part: Range | None = None) -> str:
        """The task after which `op`'s result (None: the job's output) is ready for a reader of
        `part` (None: all of it): the task of the last range of that axis they reach (the ranges
        before it are ready by then), else the op's (a reader by heads of a result made ready
        by batch rows, or the reverse, waits for all of it)."""
        if op is None:
            return self.output
        if part is not None:
            pieces = self.head_outputs if part.axis is Axis.HEADS else self.batch_outputs
            for lo, hi, task in pieces.get(op, ()):
                if lo <= part.hi - 1 < hi:
                    return task
        return self.output_of(op)

    def reads_op(self, task: str, op: str) -> bool:
        ops = self.reads.get(task)
        return ops is None or op in ops

    def task(self, name: str) -> Task:
        for t in self.tasks:
            if t.name == name:
                return t
        raise KeyError(name)


@dataclass(frozen=True)
class Job:
    name: str
    ops: tuple[str, ...]  # ir op names covered
    modes: tuple[Mode, ...]
    layer: int | None = None  # the decoder layer of its ops (the IR's `layer` attr), None: outside or mixed


@dataclass(frozen=True)
class Dependency:
    before: str  # job name
    after: str  # job name
    ops: tuple[tuple[str, str], ...] = ()  # (producer op, consumer op) pairs; () = the whole jobs


@dataclass(frozen=True)
class Group:
    name: str
    channels: tuple[int, ...]
    capacity_rows: int  # DRAM rows per bank available for the jobs' modes


@dataclass(frozen=True)
class Refresh:
    tREFI: int
    tRFC: int
    max_postponed: int
    max_pulled_in: int = 8
    max_interval: int = 9  # tREFI intervals between two REFs at most
    # per-bank refresh: cycles from the first to the last refresh of a between-task round (0: one
    # REF); tRFC is then what a round keeps the group busy (solver.refresh_points.round_busy)
    span: int = 0

    def stretch(self, work: int, at_least: int = 0) -> int:
        """Smallest T >= max(work, at_least) with T >= work + tRFC * floor(T / tREFI): the time a
        resource busy for `work` cycles needs once the REFs owed by T are paid."""
        if self.tRFC >= self.tREFI:
            raise ValueError(f"refresh tRFC {self.tRFC} >= tREFI {self.tREFI}: no time left for work")
        t = max(work, at_least)
        while (nxt := max(t, work + self.tRFC * (t // self.tREFI))) != t:
            t = nxt
        return t


@dataclass
class SchedulingProblem:
    name: str
    jobs: list[Job]  # in a topological order of the dependencies
    dependencies: list[Dependency]
    groups: list[Group]
    refresh: Refresh | None
    sync_cycles: int
    repeat: int = 1  # capacity multiplier: the problem is a template repeated `repeat` times
    horizon: int = 0  # an upper bound on the makespan (0: sum of the longest modes)
    # the host is busy until this cycle: the LAUNCH of the program's one host kernel, which every
    # host task continues (ISA 1.6, solver/launch_chain.py); 0: each host task launches its own
    host_release: int = 0

    def lag(self, from_resource: str, to_resource: str) -> int:
        return 0 if from_resource == to_resource else self.sync_cycles

    def job(self, name: str) -> Job:
        return self._jobs_by_name()[name]

    def _jobs_by_name(self) -> dict[str, Job]:
        if not hasattr(self, "_by_name"):
            self._by_name = {j.name: j for j in self.jobs}
        return self._by_name

    def resources(self) -> list[str]:
        return [HOST] + [g.name for g in self.groups]

    @staticmethod
    def ports(d: Dependency, after: Mode) -> list[tuple[str | None, str | None, str]]:
        """(producer op, consumer op, input task of `after`) triples dependency `d` orders:
        the input task waits for the producer op's result (None, None: the producer job's
        output, for a dependency without op pairs)."""
        if not d.ops:
            return [(None, None, u) for u in after.inputs]
        return [(pop, cop, u) for pop, cop in d.ops for u in after.inputs if after.reads_op(u, cop)]

    def links(self, d: Dependency, before: Mode, after: Mode) -> list[tuple[str, str]]:
        """(output task of `before`, input task of `after`) pairs that dependency `d` orders when
        these modes are chosen: `after`'s input starts >= the output's end + lag."""
        out: list[tuple[str, str]] = []
        for pop, _cop, u in self.ports(d, after):
            pair = (before.output_for(pop, after.reads_range(u)), u)
            if pair not in out:
                out.append(pair)
        return out

    def predecessors(self, job: str) -> list[str]:
        return [d.before for d in self.dependencies if d.after == job]

    def trivial_horizon(self) -> int:
        total = sum(max(sum(t.duration for t in m.tasks) for m in j.modes) for j in self.jobs)
        total += len(self.jobs) * 2 * self.sync_cycles + self.host_release
        if self.refresh:
            total += (total // self.refresh.tREFI + 1) * self.refresh.tRFC * 2
        return total


class Method(StrEnum):
    """How a program is scheduled: CP-SAT, list scheduling (CP-SAT's hint), or the vendor-library
    baseline (solver/heuristics.py)."""

    NAIVE = "naive"
    GREEDY = "greedy"
    CPSAT = "cpsat"


class Status(StrEnum):
    """A solution's status. OPTIMAL/FEASIBLE/INFEASIBLE/UNKNOWN/MODEL_INVALID are CP-SAT's (optimal
    *within the model*); HEURISTIC is a heuristic's schedule (no proof)."""

    OPTIMAL = "OPTIMAL"
    FEASIBLE = "FEASIBLE"
    INFEASIBLE = "INFEASIBLE"
    UNKNOWN = "UNKNOWN"
    MODEL_INVALID = "MODEL_INVALID"
    HEURISTIC = "HEURISTIC"


class ProofScope(StrEnum):
    """What a proof of optimality covers. TASKS: the task-level model (each job's mode, the tasks'
    order and start cycles on the channel groups and the host; the commands inside a task are the
    emitter's, so a command-level reordering could still be faster). COMMANDS: every command's
    issue cycle (no model proves that yet: issue 16). NONE: no proof (a heuristic, or a search
    that stopped before it)."""

    COMMANDS = "commands"
    TASKS = "tasks"
    NONE = "none"


class SearchEnd(str, Enum):
    """What ended a CP-SAT search. `proof` and `work_budget` are reproducible (the same result on
    every run, whatever the machine's load); `wall_clock` is not."""

    proof = "proof"  # OPTIMAL or INFEASIBLE proven (or the hint met the lower bound)
    work_budget = "work budget"  # the deterministic-time budget ran out
    wall_clock = "wall clock"  # the wall-clock guard stopped it first: depends on the load

    def __str__(self) -> str:
        return self.value


# the earlier improving solutions a CP-SAT search hands back beside its last (Solution.incumbents)
EARLIER_INCUMBENTS = 3


@dataclass
class Solution:
    """What a solver decided: a mode per job and a start cycle per task of the chosen modes."""

    method: Method
    status: Status
    modes: dict[str, str]  # job name -> mode name
    starts: dict[str, int]  # task name -> start cycle (model time)
    objective: int | None  # model makespan
    bound: int | None  # proven lower bound (cpsat only)
    wall_seconds: float
    history: list[tuple[float, int | None, int | None]] = field(default_factory=list)  # (t, incumbent, bound)
    message: str = ""
    search_end: SearchEnd | None = None  # cpsat: what ended the search (None: a heuristic)
    deterministic_seconds: float | None = None  # cpsat: CP-SAT's deterministic time the search used
    # cpsat: the search's last earlier improving solutions (worse model objective), which the
    # pipeline's select_program also decodes: the model lumps refresh, so one may be faster
    incumbents: list[Solution] = field(default_factory=list)

    @property
    def gap(self) -> float | None:
        if self.objective is None or self.bound is None or self.objective == 0:
            return None
        return (self.objective - self.bound) / self.objective
