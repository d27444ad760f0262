"""The task chain of a mode that runs an MV job piece by piece: attention by head groups
(solver/head_groups.py) and a batch run as micro-batches (solver/micro_batch.py).

Per piece, on every channel group: its KV append (if the job has one), then its MV task, after
the previous piece's MV task there (the pieces are alike: their order only removes equivalent
schedules); then the piece's epilogue on the host, after all of the piece's MV tasks and the
sync, the epilogues in piece order. Which part of its producers' results a task reads and which
part of the job's result an epilogue makes ready are the caller's (`Mode.heads`,
`Mode.batch_rows`, ...).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .payload import ModePayload, MVPayload, Role, TaskRole
from .problem import Axis, Edge, Mode, Task

if TYPE_CHECKING:
    from .layout import Layout
    from .lower import Lowerer
    from .task_timing import TaskTiming


class PieceChain:
    def __init__(
        self,
        lw: Lowerer,
        name: str,
        tag: str,
        gnames: tuple[str, ...],
        append: tuple[str, int] | None,
        append_op: str | None,
        op: str,
    ):
        self.lw, self.name, self.tag, self.gnames = lw, name, tag, gnames
        self.append, self.append_op, self.op = append, append_op, op
        self.tasks: list[Task] = []
        self.edges: list[Edge] = []
        self.inputs: list[str] = []
        self.reads: dict[str, tuple[str, ...]] = {}
        self.roles: dict[str, TaskRole] = {}
        self.epis: list[Task] = []
        self._prev: dict[str, str] = {}  # channel group -> the previous piece's MV task there

    def add(
        self, i: int, label: str, per_group: dict[str, TaskTiming], layout: Layout, epi: Task, epi_role: TaskRole
    ) -> list[tuple[Task, Task | None]]:
        """Piece `i` (tiling i of the payload, its tasks named by `label`): per channel group its
        (MV task, KV append task or None)."""
        lw, name, tag = self.lw, self.name, self.tag
        sync = lw.hw.host.sync_cycles
        out = []
        for g in self.gnames:
            tg = per_group[g]
            t = Task(f"{name}/{tag}/{g}/{label}", g, tg.duration, lw.refresh_credit(tg))
            a = None
            if self.append is not None:
                a = Task(f"{name}/{tag}/{g}/{label}/append", g, lw._append_timing(layout, *self.append, g))
                self.tasks.append(a)
                self.inputs.append(a.name)
                self.edges.append(Edge(a.name, t.name, 0))
                self.roles[a.name] = TaskRole(Role.APPEND, i)
                if self.append_op is not None:
                    self.reads[a.name], self.reads[t.name] = (self.append_op,), (self.op,)
            if g in self._prev:
                self.edges.append(Edge(self._prev[g], t.name, 0))
            self._prev[g] = t.name
            self.tasks.append(t)
            self.inputs.append(t.name)
            self.roles[t.name] = TaskRole(Role.MV, i)
            self.edges.append(Edge(t.name, epi.name, sync))
            out.append((t, a))
        if self.epis:
            self.edges.append(Edge(self.epis[-1].name, epi.name, 0))
        self.epis.append(epi)
        self.roles[epi.name] = epi_role
        return out

    def mode(self, tag: str, usage: dict[str, int], tilings: tuple[MVPayload, ...], **ranges) -> Mode:
        """The mode: its tasks, the epilogues last; `ranges`: Mode's fields of what each task
        reads and when each part of the result is ready."""
        return Mode(
            tag,
            tuple(self.tasks) + tuple(self.epis),
            tuple(self.edges),
            tuple(self.inputs),
            self.epis[-1].name,
            usage,
            ModePayload(tilings, self.roles),
            reads=self.reads,
            **ranges,
        )


def host_pieces_mode(
    tag: str, tasks: list[Task], roles: dict[str, TaskRole], ranges: list[tuple[int, int]], axis: Axis, ops
) -> Mode:
    """A host job run piece by piece: one launch per range of `axis` (head or batch rows), the
    launches in range order, each reading that range of its producers' results and making that
    range of every op of `ops` ready."""
    reads = {t.name: r for t, r in zip(tasks, ranges)}
    ready = tuple((lo, hi, t.name) for (lo, hi), t in zip(ranges, tasks))
    by_axis = (
        {"heads": reads, "head_outputs": {o: ready for o in ops}}
        if axis is Axis.HEADS
        else {"batch_rows": reads, "batch_outputs": {o: ready for o in ops}}
    )
    return Mode(
        tag,
        tuple(tasks),
        tuple(Edge(x.name, y.name, 0) for x, y in zip(tasks, tasks[1:])),
        tuple(t.name for t in tasks),
        tasks[-1].name,
        {},
        ModePayload((), roles),
        **by_axis,
    )
