"""Exact timing of one task's command sequence, measured by a timing oracle: the simulator's own
issue rules (sim/oracle.py), handed in by whoever composes the pipeline (`use_oracle`; pimsat's
pipeline and the test suite hand in the simulator). The solver never imports the simulator.

A task runs alone on a channel from a quiet state (all banks precharged, no timing history).
Its `duration` is the cycle from which *any* command may follow (every constraint that its
commands start has expired), so tasks placed back to back on a channel stay legal;
`completion` is when its last data has landed (what a SIG after it waits for).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hwmodel import Hardware
from hwmodel.isa import ISA, Instruction
from hwmodel.model import COMMANDS, completion_cycles
from hwmodel.oracle import TimingOracle

from .kv_emit import emit_kv_append
from .tiling import channel_signature, slot_rows, structure_key


@dataclass(frozen=True, eq=False)
class TaskTiming:
    issue: np.ndarray  # relative issue cycle of every instruction (int64, read-only: 8 B each)
    duration: int
    completion: int
    refreshes: tuple[int, ...] = ()  # relative cycles of the task's own REFs (long tasks)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, TaskTiming)
            and (self.duration, self.completion) == (other.duration, other.completion)
            and np.array_equal(self.issue, other.issue)
        )

    __hash__ = None  # an array inside: compared by value, not hashable


_oracle: TimingOracle | None = None


def use_oracle(oracle: TimingOracle) -> None:
    """Hand lowering and decoding the oracle that times command sequences (sim.oracle.time_commands)."""
    global _oracle
    _oracle = oracle


def timing_oracle() -> TimingOracle:
    if _oracle is None:
        raise RuntimeError(
            "no timing oracle: call solver.task_timing.use_oracle(sim.oracle.time_commands) "
            "before lowering (pimsat.pipeline does)"
        )
    return _oracle


def _by_identity(fn):
    """Cache on the object's identity (Hardware holds dicts, so it is not hashable)."""
    cache: dict[int, tuple[object, object]] = {}

    def wrapper(hw):
        hit = cache.get(id(hw))
        if hit is None or hit[0] is not hw:
            hit = cache[id(hw)] = (hw, fn(hw))
        return hit[1]

    return wrapper


@_by_identity
def max_latency_after(hw: Hardware) -> dict[str, int]:
    """Per command: the longest any later command may have to wait for it (table rows and data)."""
    out = {c: 1 for c in COMMANDS}
    for c in hw.timing.constraints:
        out[c.prev] = max(out[c.prev], hw.timing.latency_of(c))
    # completion latencies (data) also bound what may follow safely
    comp = completion_cycles(hw.timing)
    comp["WRGB"] = max(comp["WRGB"], hw.timing.p("tGB"))  # a MAC may read its burst only tGB after
    for k, v in comp.items():
        out[k] = max(out[k], v)
    return out


@_by_identity
def _without_refresh(hw: Hardware) -> Hardware:
    """The same device with refresh never due: a task is timed alone, refresh is placed by the
    decoder between tasks."""
    params = dict(hw.timing.params)
    params["tREFI"] = 1 << 40
    # a long task carries REFs of its own (solver/refresh_points.py): timed alone, none is early
    return hw.model_copy(
        update={
            "timing": hw.timing.model_copy(
                update={"params": params, "max_pulled_in_refresh": 1 << 20, "max_refresh_interval": 1 << 20}
            )
        }
    )


def time_task(hw: Hardware, instrs: list[Instruction]) -> TaskTiming:
    """Issue `instrs` alone on a quiet device with refresh never due (the timing oracle), and read
    off the relative issue cycles, the duration and the completion."""
    if not instrs:
        return TaskTiming(np.zeros(0, dtype=np.int64), 0, 0)
    times = timing_oracle()(_without_refresh(hw), list(instrs))
    issue = np.array(times.issue, dtype=np.int64)
    issue.flags.writeable = False
    lat = max_latency_after(hw)
    quiet = 0
    if len(times.command_cycles):
        lat_arr = np.array([lat[c] for c in COMMANDS], dtype=np.int64)
        quiet = int((times.command_cycles.astype(np.int64) + lat_arr[times.commands]).max())
    duration = max(quiet, int(times.cycles), int(times.last[-1]) + 1)
    refs = tuple(int(c) for c in times.command_cycles[times.commands == COMMANDS.index("REF")])
    return TaskTiming(issue, duration, int(times.cycles), refs)


# fields that name host memory (tensor and element): they never change when a command may issue
TIMED_FIELDS = {
    op.mnemonic: tuple(i for i, f in enumerate(op.fields) if f.name not in ("src", "dst", "offset")) for op in ISA.ops
}


class StructureTimings:
    """Task timings by structure, shared by lowering, the bound's exact durations and decode
    (`Lowering.structures`): each structure is emitted and timed once per lowering. MV and
    weight-read tasks by (kind, style, tiling.structure_key) and channel signature; KV-cache
    appends by their commands' timed fields (the channels of a layer, and the layers, write the
    same banks, rows and columns from different host offsets)."""

    def __init__(self, hw: Hardware, seen: dict[tuple, TaskTiming] | None = None):
        self.hw = hw
        self._seen: dict[tuple, TaskTiming] = {} if seen is None else seen

    def time(self, seq: list[Instruction]) -> TaskTiming:
        """An append, by its commands' timed fields."""
        return self.structure(
            ("append", tuple((ins.op, *(ins.args[i] for i in TIMED_FIELDS[ins.op])) for ins in seq)), lambda: seq
        )

    def appends(self, lay, sym, cis, new: str, position: int) -> dict[tuple, TaskTiming | None]:
        """The KV append (new tensor, position) of each distinct slot rows (tiling.slot_rows) among
        channels `cis` of layout `lay` (None: no commands). Channels whose slots hold the same row
        ranges write the same banks, rows and columns, from other host offsets: one of them is
        emitted and timed."""
        out: dict[tuple, TaskTiming | None] = {}
        for ci in cis:
            rows = slot_rows(lay.t, ci)
            if rows not in out:
                seq = emit_kv_append(self.hw, lay, sym, ci, new, position)
                out[rows] = self.time(seq) if seq else None
        return out

    @staticmethod
    def key(kind: str, style: str, t, ci: int) -> tuple:
        """The structure of an MV ("mv") or weight-read ("rd") task on channel `ci` of tiling `t`."""
        return (kind, style, structure_key(t)), channel_signature(t, ci)

    def structure(self, key: tuple, commands) -> TaskTiming:
        """The timing of `commands()`, emitted only the first time `key` is seen."""
        tt = self._seen.get(key)
        if tt is None:
            tt = self._seen[key] = time_task(self.hw, commands())
        return tt
