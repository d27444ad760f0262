"""Exact timing of one task's command sequence, measured by a timing oracle: the simulator's own
issue rules (sim/oracle.py), handed in by whoever composes the pipeline (`use_oracle`; pimsat's
pipeline and the test suite hand in the simulator). The solver never imports the simulator.

A task runs alone on a channel from a quiet state (all banks precharged, no timing history).
Its `duration` is the cycle from which *any* command may follow (every constraint that its
commands start has expired), so tasks placed back to back on a channel stay legal;
`completion` is when its last data has landed (what a SIG after it waits for).

Timings depend on the hardware only through the fields `timing_fingerprint` names, so a
`TimingCache` (an explicit object the caller holds: a sweep worker keeps one across points) shares
them between hardware that differs elsewhere (the host's dispatch, sync and compute rates).
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np

from hwmodel import Hardware, bus
from hwmodel.isa import ISA, Instruction
from hwmodel.model import COMMANDS, completion_cycles
from hwmodel.oracle import TimingOracle

from .kv_emit import emit_kv_append
from .relocate import Relocations
from .tiling import channel_signature, slot_rows, structure_key


class TaskTiming:
    """A task's timing on its channel, as the oracle measured it alone.

    `issue`: the relative issue cycle of every instruction (int64, read-only). Held packed: as
    differences between consecutive issue cycles (an in-order stream's are >= 0 and small) in
    uint16 where they fit, else int32, else the int64 cycles themselves, 2 B an instruction in
    practice; unpacked on first read and kept (decode reads the chosen tasks'; lowering reads
    only durations, so the candidates it times and drops stay packed)."""

    __slots__ = ("_packed", "_delta", "_issue", "duration", "completion", "refreshes", "refreshes_early", "bus")

    def __init__(
        self,
        issue,
        duration: int,
        completion: int,
        refreshes: tuple[int, ...] = (),
        refreshes_early: tuple[int, ...] = (),
        bus: np.ndarray | None = None,
    ):
        self._packed, self._delta = _pack(np.asarray(issue, dtype=np.int64))
        self._issue = None
        self.duration, self.completion = duration, completion
        self.refreshes = refreshes  # relative cycles of the task's own REFs (long tasks)
        # per-bank refresh: round k (one refresh of every bank) ends at refreshes[k] and starts at
        # refreshes_early[k]; with all-bank REFs the two are equal
        self.refreshes_early = refreshes_early
        # organization.command_bus = shared_pair: the task's command-bus occupancy, relative
        # cycles (hwmodel/bus.py records, compacted: bus.expand; None on devices whose channels
        # have buses of their own, and for a pair's odd channel, whose records nobody reads)
        self.bus = bus

    @property
    def issue(self) -> np.ndarray:
        if self._issue is None:
            a = np.cumsum(self._packed, dtype=np.int64) if self._delta else self._packed.astype(np.int64)
            a.flags.writeable = False
            self._issue = a
        return self._issue

    @property
    def nbytes(self) -> int:
        """Bytes of its arrays (packed issue cycles, unpacked ones once read, bus records)."""
        return (
            self._packed.nbytes
            + (0 if self._issue is None else self._issue.nbytes)
            + (0 if self.bus is None else self.bus.nbytes)
        )

    def __reduce__(self):  # (pickled packed, e.g. from a lowering worker: solver/lower_parallel.py)
        return (
            _unpickle,
            (self._packed, self._delta, self.duration, self.completion, self.refreshes, self.refreshes_early, self.bus),
        )

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, TaskTiming)
            and (self.duration, self.completion) == (other.duration, other.completion)
            and np.array_equal(self.issue, other.issue)
        )

    def __repr__(self) -> str:
        return f"TaskTiming({len(self._packed)} instructions, duration={self.duration}, completion={self.completion})"

    __hash__ = None  # an array inside: compared by value, not hashable


def _pack(issue: np.ndarray) -> tuple[np.ndarray, bool]:
    """(packed, whether it holds differences): see TaskTiming."""
    if not len(issue):
        return np.zeros(0, dtype=np.uint16), True
    d = np.empty_like(issue)
    d[0] = issue[0]
    np.subtract(issue[1:], issue[:-1], out=d[1:])
    lo, hi = int(d.min()), int(d.max())
    if lo >= 0 and hi < 1 << 16:
        return d.astype(np.uint16), True
    if lo >= -(1 << 31) and hi < 1 << 31:
        return d.astype(np.int32), True
    return issue.copy(), False


def _unpickle(packed, delta, duration, completion, refreshes, refreshes_early, bus) -> TaskTiming:
    tt = TaskTiming.__new__(TaskTiming)
    tt._packed, tt._delta, tt._issue = packed, delta, None
    tt.duration, tt.completion, tt.refreshes, tt.refreshes_early, tt.bus = (
        duration,
        completion,
        refreshes,
        refreshes_early,
        bus,
    )
    return tt


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


_IDENTITY_CACHE_SIZE = 8  # the last few devices: a long-lived sweep worker sees a new one per point


def _by_identity(fn):
    """Cache on the object's identity (Hardware holds dicts, so it is not hashable), the last
    _IDENTITY_CACHE_SIZE objects kept (each entry holds its object, so an id is not reused while
    it is cached)."""
    cache: OrderedDict[int, tuple[object, object]] = OrderedDict()

    def wrapper(hw):
        hit = cache.get(id(hw))
        if hit is None or hit[0] is not hw:
            hit = cache[id(hw)] = (hw, fn(hw))
        cache.move_to_end(id(hw))
        while len(cache) > _IDENTITY_CACHE_SIZE:
            cache.popitem(last=False)
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


# What a task's timing does not read: the device's name and the host fields below never reach a
# channel's commands or their issue (a task holds no SIG/WAIT: the host stream and the sync
# latency are the decoder's). The oracle is handed the device with these at fixed values
# (`_without_refresh`), so the timing cannot depend on them, whoever emits the commands; the
# emitters do not read them (tests/solver/test_timing_cache.py watches every read).
UNREAD_HOST_FIELDS: dict[str, int | bool] = {
    "dispatch_cycles": 0,
    "sync_cycles": 0,
    "vector_elements_per_cycle": 1,
    "matrix_macs_per_cycle": 1,
    "persistent_kernel": True,
}
_TIMING_NAME = "task-timing"


def timing_fingerprint(hw: Hardware) -> str:
    """sha256 of every hardware field a task's emission and timing read: the organisation, the PIM
    units, the whole timing table (parameters, rows, refresh fields; tLINK, derived from the link
    rate, among the parameters), the ISA version and the host's link rate. Not the name, and not
    the host fields in UNREAD_HOST_FIELDS (dispatch, sync, vector and matrix rates): hardware that
    differs only there has the same task timings."""
    data = hw.model_dump(mode="json")
    host = data.pop("host")
    data.pop("name")
    data["host"] = {k: v for k, v in host.items() if k not in UNREAD_HOST_FIELDS}
    assert set(host) - set(data["host"]) == set(UNREAD_HOST_FIELDS), "a new host field: is it read by task timing?"
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


@_by_identity
def _without_refresh(hw: Hardware) -> Hardware:
    """The same device with refresh never due: a task is timed alone, refresh is placed by the
    decoder between tasks. Its name and the host fields task timing does not read are set to
    fixed values (UNREAD_HOST_FIELDS): every device of one timing_fingerprint times alike."""
    params = dict(hw.timing.params)
    params["tREFI"] = 1 << 40
    # a long task carries REFs of its own (solver/refresh_points.py): timed alone, none is early
    return hw.model_copy(
        update={
            "name": _TIMING_NAME,
            "host": hw.host.model_copy(update=UNREAD_HOST_FIELDS),
            "timing": hw.timing.model_copy(
                update={"params": params, "max_pulled_in_refresh": 1 << 20, "max_refresh_interval": 1 << 20}
            ),
        }
    )


def time_task(hw: Hardware, instrs: list[Instruction], yield_to: np.ndarray | None = None) -> TaskTiming:
    """Issue `instrs` alone on a quiet device with refresh never due (the timing oracle), and read
    off the relative issue cycles, the duration and the completion. yield_to (shared command
    buses): the other pseudo-channel's occupancy in the same task (its TaskTiming.bus), to which
    these commands yield their bus."""
    if not instrs:
        return TaskTiming(np.zeros(0, dtype=np.int64), 0, 0)
    oracle = timing_oracle()
    hw0 = _without_refresh(hw)
    times = oracle(hw0, list(instrs)) if yield_to is None else oracle(hw0, list(instrs), yield_to=yield_to)
    issue = np.array(times.issue, dtype=np.int64)
    issue.flags.writeable = False
    lat = max_latency_after(hw)
    quiet = 0
    if len(times.command_cycles):
        lat_arr = np.array([lat[c] for c in COMMANDS], dtype=np.int64)
        quiet = int((times.command_cycles.astype(np.int64) + lat_arr[times.commands]).max())
    duration = max(quiet, int(times.cycles), int(times.last[-1]) + 1)
    late, early = (), ()
    refreshing = np.isin(times.commands, _REFRESH)
    if refreshing.any():  # (the refresh instructions by the commands they issued)
        at = None if times.command_instrs is None else np.unique(times.command_instrs[refreshing])
        late, early = refresh_rounds(hw, instrs, issue, at)
    occ = None
    if hw.organization.shared_bus and yield_to is None:  # (an odd channel's records: nobody reads them)
        occ = bus.compact(bus.records_from_commands(times.command_cycles, times.commands, times.command_instrs))
        occ.flags.writeable = False
    return TaskTiming(issue, duration, int(times.cycles), late, early, occ)


_REFRESH = np.array([COMMANDS.index("REF"), COMMANDS.index("REFSB")])


def refresh_rounds(
    hw: Hardware, instrs: list[Instruction], issue: np.ndarray, at: np.ndarray | None = None
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(last, first) cycle of each round of refreshes in `instrs` (issued at `issue`): round k is
    every bank's k-th refresh (a REF refreshes every bank, a REFSB its own). at: the indices of
    every REF and REFSB among `instrs`, in order, where known (else all are looked at)."""
    nb = hw.organization.banks_per_channel
    per_bank: list[list[int]] = [[] for _ in range(nb)]
    index = range(len(instrs)) if at is None else at.tolist()
    for i in index:
        ins, t = instrs[i], int(issue[i])
        if ins.op == "REF":
            for b in range(nb):
                per_bank[b].append(t)
        elif ins.op == "REFSB":
            per_bank[ins.args[0]].append(t)
    rounds = min(len(x) for x in per_bank)
    late = tuple(max(x[k] for x in per_bank) for k in range(rounds))
    early = tuple(min(x[k] for x in per_bank) for k in range(rounds))
    return late, early


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

    def __init__(self, hw: Hardware, seen: dict[tuple, TaskTiming] | None = None, shared: TimingStore | None = None):
        self.hw = hw
        self._seen: dict[tuple, TaskTiming] = {} if seen is None else seen
        # timings of other lowerings of hardware with the same timing_fingerprint (TimingCache)
        self.shared = shared
        self._last: tuple[tuple, list[Instruction]] | None = None  # the commands timed last
        if shared is not None and shared.fingerprint != timing_fingerprint(hw):
            raise ValueError("a TimingStore of another hardware fingerprint")

    def time(self, seq: list[Instruction]) -> TaskTiming:
        """An append, by its commands' timed fields."""
        return self.structure(_append_key(seq), lambda: seq)

    def appends(
        self, lay, sym, cis, new: str, position: int, keys: dict | None = None
    ) -> dict[tuple, TaskTiming | None]:
        """The KV append (new tensor, position) of each distinct slot rows (tiling.slot_rows) among
        channels `cis` of layout `lay` (None: no commands). Channels whose slots hold the same row
        ranges write the same banks, rows and columns, from other host offsets: one of them is
        emitted and timed. keys: filled with each slot rows' structure key."""
        out: dict[tuple, TaskTiming | None] = {}
        keys = {} if keys is None else keys
        for ci in cis:
            rows = slot_rows(lay.t, ci)
            if rows in out:
                continue
            emit = lambda ci=ci: emit_kv_append(self.hw, lay, sym, ci, new, position)  # noqa: E731
            if self.shared is None:
                seq = emit()
                key = keys[rows] = _append_key(seq) if seq else None
                out[rows] = self.structure(key, lambda seq=seq: seq) if seq else None
                continue
            # with a shared store, the key of an append seen before is known without emitting it:
            # its timed fields follow from the tiling's structure, the channel's slots, its base
            # row and the position (kv_emit.emit_kv_append, Layout.locate; the device's fields
            # they read are in the fingerprint); names and host offsets are not timed
            seen = (structure_key(lay.t), lay.t.slots[ci], lay.base_rows[lay.t.channels[ci]], position)
            key = self.shared.append_keys.get(seen, _UNKNOWN)
            if key is _UNKNOWN:
                seq = emit()
                key = self.shared.append_keys[seen] = _append_key(seq) if seq else None
                out[rows] = None if key is None else self.structure(key, lambda seq=seq: seq)
            else:
                sym.id(new)  # what emitting it would have done to the symbol table (decode's)
                out[rows] = None if key is None else self.structure(key, emit)
            keys[rows] = key
        return out

    def append_timings(self, lay, sym, cis, new: str, position: int) -> dict[int, TaskTiming | None]:
        """The KV append's timing per channel position of `cis` (None: no commands); on a
        shared-bus device the odd channel of each pair timed yielding to the even one's (`paired`)."""
        keys: dict = {}
        timed = self.appends(lay, sym, cis, new, position, keys)
        out = {ci: timed[slot_rows(lay.t, ci)] for ci in cis}
        if not self.hw.organization.shared_bus:
            return out
        at = {lay.t.channels[ci]: ci for ci in cis}
        for c, ci in at.items():
            if c % 2 and c - 1 in at:
                re, ro = slot_rows(lay.t, at[c - 1]), slot_rows(lay.t, ci)
                if timed[re] is not None and timed[ro] is not None:
                    emit = lambda ci=ci: emit_kv_append(self.hw, lay, sym, ci, new, position)  # noqa: E731
                    out[ci] = self.paired(keys[re], timed[re], keys[ro], emit)
        return out

    def paired(self, even_key: tuple, even: TaskTiming, key: tuple, commands) -> TaskTiming:
        """The odd pseudo-channel's task `key` (commands()) timed with its commands yielding the
        shared command bus to the even channel's (`even`, structure `even_key`), both started in
        the same cycle: each of its commands goes at the first cycle the even channel leaves its
        bus free (organization.command_bus = shared_pair; solver/pair_bus.py)."""
        if even.bus is None or not len(even.bus):
            return self.structure(key, commands)
        last = self._last
        if last is not None and last[0] == key:  # (lockstep: the even channel's commands, just emitted)
            commands = lambda: last[1]  # noqa: E731
        tt = self.structure(("pair", even_key, key), commands, bus.expand(even.bus))
        self._last = None
        return tt

    @staticmethod
    def key(kind: str, style: str, t, ci: int) -> tuple:
        """The structure of an MV ("mv") or weight-read ("rd") task on channel `ci` of tiling `t`."""
        return (kind, style, structure_key(t)), channel_signature(t, ci)

    def structure(self, key: tuple, commands, yield_to: np.ndarray | None = None) -> TaskTiming:
        """The timing of `commands()`, emitted only the first time `key` is seen (here or, with a
        shared store, by any lowering of the same timing fingerprint); yield_to: see time_task."""
        tt = self._seen.get(key)
        if tt is None:
            if self.shared is not None:
                tt = self.shared.get(key)
            if tt is None:
                seq = commands()
                self._last = (key, seq)  # the odd pseudo-channel of a pair often runs the same commands
                tt = time_task(self.hw, seq, yield_to)
                if self.shared is not None:
                    self.shared.put(key, tt)
            self._seen[key] = tt
        return tt


_UNKNOWN = object()


def _append_key(seq: list[Instruction]) -> tuple:
    """An append's structure key: its commands' timed fields."""
    return ("append", tuple((ins.op, *(ins.args[i] for i in TIMED_FIELDS[ins.op])) for ins in seq))


@dataclass(eq=False)
class TimingStore:
    """The task timings of one timing fingerprint: by structure key (StructureTimings) and, per MV
    structure, whether its emission split a MAC run (a choice lowering makes from it); and the
    encoded commands of the structures streamed decodes emitted (relocate.Relocations: a decode
    relocates them instead of emitting the structure again)."""

    fingerprint: str
    timings: dict[tuple, TaskTiming] = field(default_factory=dict)
    split_used: dict[tuple, bool] = field(default_factory=dict)
    layers: Relocations = field(default_factory=Relocations)
    # KV appends: (tiling structure, the channel's slots, its base row, position) -> the append's
    # structure key (None: no commands), so that a lowering need not emit it to find its timing
    append_keys: dict[tuple, tuple | None] = field(default_factory=dict)
    hits: int = 0
    misses: int = 0
    # whether decodes keep their encoded tables here for later decodes (a sweep's TimingCache);
    # a lowering's own store (pipeline.lower_program without one) lets each decode's go with it
    share_layers: bool = True

    def get(self, key: tuple) -> TaskTiming | None:
        tt = self.timings.get(key)
        if tt is None:
            self.misses += 1
        else:
            self.hits += 1
        return tt

    def put(self, key: tuple, tt: TaskTiming) -> None:
        self.timings[key] = tt

    @property
    def nbytes(self) -> int:
        """Bytes of the issue cycles and encoded tables the store holds."""
        return sum(tt.nbytes for tt in self.timings.values()) + self.layers.nbytes


class TimingCache:
    """Task timings shared between lowerings, per timing fingerprint (the hardware fields task
    timing reads: `timing_fingerprint`): a lowering of hardware that differs from an earlier one
    only in fields timing does not read (host dispatch, sync, vector and matrix rates) emits and
    times no task again, and its streamed decodes emit no structure again. Bounded: the stores
    of the last `size` fingerprints are kept, and a store holding more than `max_bytes` is
    started afresh (a long sweep over program fields on one device). Explicit: whoever wants
    sharing holds one and passes it in (a sweep worker keeps one across its points:
    pimsat/sweep/run.py)."""

    def __init__(self, size: int = 4, max_bytes: int = 256 * 2**20):
        if size < 1:
            raise ValueError("a TimingCache holds at least one fingerprint")
        self.size, self.max_bytes = size, max_bytes
        self._stores: OrderedDict[str, TimingStore] = OrderedDict()

    def store(self, hw: Hardware, renew: bool = True) -> TimingStore:
        """The store of `hw`'s timing fingerprint (made on first use), now the most recent. One
        holding more than max_bytes is started afresh where `renew` (a lowering asks so once, at
        its start: pipeline.lower_program; the lowerings of both styles then read the same store,
        however large the first made it)."""
        fp = timing_fingerprint(hw)
        st = self._stores.pop(fp, None)
        if st is None or (renew and st.nbytes > self.max_bytes):
            st = TimingStore(fp)
        self._stores[fp] = st
        while len(self._stores) > self.size:
            self._stores.popitem(last=False)
        return st

    def __len__(self) -> int:
        return len(self._stores)

    @property
    def nbytes(self) -> int:
        """Bytes the cache holds, over all its stores."""
        return sum(st.nbytes for st in self._stores.values())

    def stores(self) -> tuple[TimingStore, ...]:
        """Oldest first (not reordered: reading them is not a use)."""
        return tuple(self._stores.values())

    @property
    def fingerprints(self) -> tuple[str, ...]:
        """Oldest first."""
        return tuple(self._stores)
