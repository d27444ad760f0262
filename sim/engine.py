"""Timing of all streams together: channels (the kernel) and host, coupled by SIG/WAIT.

Channels share no timing state, so each stream runs as far as it can; a WAIT on an unset signal
parks it until some stream sets the signal. When every unfinished stream is parked, the program
deadlocks (SimulationError kind "deadlock", naming each parked stream, instruction and signal).
After the run: the refresh rule at the end, and every bank must be precharged at the end (so the
next program starts from closed banks, as ACT and REF require).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from hwmodel import bus
from hwmodel.isa import Instruction
from hwmodel.model import COMMANDS, Hardware
from hwmodel.record_stream import RecordStream

from . import channel as K
from .encode import C_BANK, C_N, C_OP, C_STAMP, C_SYM, OP_SIG, OP_WAIT, OPCODES, SignalMap, encode_stream, sync_rows
from .errors import SimulationError
from .host import HostRunner
from .pairs import PairCheck
from .records import ops_and_symbols, record_rows_ops
from .result import LOG_DTYPE
from .timing import TimingTables, compile_tables
from .twins import SignalSetTwice, Twins, twins_enabled

_RANGE_FIELD = {
    K.F_BANK: "bank",
    K.F_MASK: "mask",
    K.F_ROW: "row",
    K.F_COL: "column",
    K.F_GB: "global-buffer burst",
    K.F_ACC: "accumulator",
    K.F_COUNT: "count",
}


@dataclass
class Timed:
    """What the timing pass produced (inputs to SimResult and to the functional pass)."""

    tables: TimingTables
    channels: list[dict[str, np.ndarray]]
    host: HostRunner
    signal_ids: np.ndarray
    signal_time: np.ndarray
    makespan: int
    stalls: dict[str, int] = field(default_factory=dict)
    phases: dict[str, float] = field(default_factory=dict)
    log: np.ndarray | None = None
    channels_run: int = 0  # channels with instructions the kernel ran (the others: twins, sim/twins.py)


def _channel_error(hw: Hardware, tab: TimingTables, ch: int, stream: list[Instruction], s, sig_ids) -> SimulationError:
    e = s["err"]
    code, cycle, bank, i = (int(x) for x in e[[K.ERR_CODE, K.ERR_CYCLE, K.ERR_BANK, K.ERR_INSTR]])
    i += int(s["st"][K.ST_BASE])  # the kernel's index is into the slice it was fed
    row, needed, actual, x1, x2 = (int(x) for x in e[[K.ERR_ROW, K.ERR_NEEDED, K.ERR_ACTUAL, K.ERR_X1, K.ERR_X2]])
    ins = stream[i]
    cyc = None if cycle < 0 else cycle
    kw = dict(cycle=cyc, stream=ch, bank=bank, instr=i, instruction=ins)
    if code == K.E_TIMING:
        violated = tuple(tab.names[k] for k in np.flatnonzero(s["viol"][: tab.rows]))
        err = SimulationError("timing", "", constraint=tab.names[row], needed=needed, actual=actual, **kw)
        err.violated = violated
        return err
    if code == K.E_GB:
        err = SimulationError(
            "timing",
            f"global-buffer burst {x1} written by a WRGB {actual} cycles earlier",
            constraint=tab.names[tab.rows + 2],
            needed=needed,
            actual=actual,
            **kw,
        )
        err.violated = (err.constraint,)
        return err
    if code == K.E_BUS:
        return SimulationError(
            "bus",
            f"the channel's previous command issued at cycle {x1} (one command per cycle, in stream order)",
            needed=needed,
            actual=actual,
            **kw,
        )
    if code == K.E_SYNC:
        return SimulationError("sync", f"a WAIT before it releases at cycle {x1}", needed=needed, actual=actual, **kw)
    if code == K.E_CLOSED:
        return SimulationError("bank_state", f"bank {bank} is precharged (closed); {ins.op} needs an open row", **kw)
    if code == K.E_OPEN:
        return SimulationError(
            "bank_state", f"bank {bank} is open (row {x1}, activated by instr {x2}); ACT needs it precharged", **kw
        )
    if code == K.E_REFOPEN:
        return SimulationError(
            "bank_state",
            ("REF needs every bank precharged" if ins.op == "REF" else "REFSB needs its bank precharged")
            + f"; bank {bank} is open (row {x1}, activated by instr {x2})",
            **kw,
        )
    if code == K.E_PU:
        return SimulationError("pim_unit", f"mask has two banks of PIM unit {x1} (at most one per unit)", **kw)
    if code == K.E_RANGE:
        what = _RANGE_FIELD[x1]
        if x1 == K.F_MASK:
            msg = f"mask 0x{x2:X} is empty or names banks >= {hw.organization.banks_per_channel}"
        elif x1 == K.F_COUNT:
            msg = "count must be >= 1"
        else:
            has = {
                K.F_BANK: f"the channel has {x2} banks",
                K.F_ROW: f"a bank has {x2} rows",
                K.F_COL: f"col + count runs past the {x2} columns of a row",
                K.F_GB: f"gb + count runs past the {x2} bursts of the global buffer",
                K.F_ACC: f"a PIM unit has {x2} accumulators",
            }[x1]
            msg = f"{what} out of range: {has}"
        return SimulationError("range", msg, **kw)
    of_bank = f" of bank {bank}" if bank >= 0 else ""
    if code == K.E_REFLATE:
        return SimulationError(
            "refresh",
            f"refresh #{x1}{of_bank} issued at cycle {x2}: at cycle {cycle} more than "
            f"max_postponed_refresh={hw.timing.max_postponed_refresh} refreshes were owed "
            f"(one is due every tREFI={hw.timing.p('tREFI')})",
            **kw,
        )
    if code == K.E_REFEARLY:
        return SimulationError(
            "refresh",
            f"refresh #{x1}{of_bank} issued at cycle {actual}: more than max_pulled_in_refresh="
            f"{hw.timing.max_pulled_in_refresh} pulled in (REF #{x1} earns credit from cycle "
            f"{needed}, one due every tREFI={hw.timing.p('tREFI')})",
            needed=needed,
            actual=actual,
            **kw,
        )
    if code == K.E_REFGAP:
        return SimulationError(
            "refresh",
            f"refresh #{x1}{of_bank} issued {actual} cycles after the previous one (cycle {x2}): "
            f"at most max_refresh_interval={hw.timing.max_refresh_interval} x tREFI="
            f"{needed} between two REFs",
            needed=needed,
            actual=actual,
            **kw,
        )
    if code == K.E_SIGTWICE:
        return SimulationError("signal", f"signal {int(sig_ids[x1])} set twice (first at cycle {x2})", **kw)
    if code == K.E_NOPERBANK:
        return SimulationError(
            "stream",
            "REFSB (per-bank refresh) on a device without it: timing.refresh_mode = "
            f"{hw.timing.refresh_mode}, REF refreshes all banks",
            **kw,
        )
    if code == K.E_STREAM:
        return SimulationError(
            "stream", f"{ins.op} is a host instruction; channel streams run DRAM/PIM commands, SIG and WAIT", **kw
        )
    raise AssertionError(f"unknown kernel error code {code}")


# Instructions per encoded slice of a channel stream in a streamed run (timing-only, no command
# log): the kernel's tables then take O(channels x SLICE) memory instead of O(instructions).
SLICE = 1 << 16
PROGRESS_EVERY = 0.5  # seconds between progress reports of a streamed run


class _Feed:
    """One channel stream as the kernel reads it: whole, or a slice at a time (`slice_len`)."""

    def __init__(
        self,
        hw: Hardware,
        stream: list[Instruction],
        signals: SignalMap,
        slice_len: int,
        n_symbols: int | None,
        ch: int,
        defer: bool = False,
    ):
        """defer: the first slice is read later (`load_first`: sim/parallel reads it on a thread)."""
        self.hw, self.stream, self.signals, self.n_symbols, self.ch = hw, stream, signals, n_symbols, ch
        self.slice_len = max(1, slice_len)
        # a stream whose parts come encoded is read into one buffer, slice after slice
        self._buf = (
            np.empty((min(self.slice_len, len(stream)), K.WIDTH), dtype=np.int64)
            if getattr(stream, "has_rows", False) and len(stream)
            else None
        )
        self._pool = self._spare = self._ahead = None  # (read ahead: see prefetch)
        #: rows of the first slice (sizes the kernel's per-instruction arrays)
        self.first_len = min(self.slice_len, len(stream))
        self.base, self.table = 0, None
        if not defer:
            self._load(0)

    def load_first(self) -> None:
        """Read the first slice of a feed made with defer=True (once)."""
        if self.table is None:
            self._load(0)

    def _load(self, start: int) -> None:
        """Encode the slice from stream index `start`: `table` (rows), `prog` (the kernel's flat view)."""
        self.base = start  # stream index of the current table's first instruction
        self.table = self._encode(start)
        self.prog = np.ascontiguousarray(self.table.reshape(-1))
        if self._pool is not None:
            self._read_ahead()

    def can_prefetch(self) -> bool:
        """A stream read from a file, of more than one slice."""
        return isinstance(self.stream, RecordStream) and self.slice_len < len(self.stream)

    def prefetch(self, pool) -> None:
        """From now on, read the next slice on `pool`'s thread while the kernel runs this one: the
        records -> rows conversion (the file read and the compiled conversion both release the
        GIL) into a second buffer, the two taken in turn. What follows the conversion (signals,
        the checks that refuse a slice) still runs when the slice is reached, in the same order."""
        self._pool, self._spare = pool, np.empty_like(self._buf)
        self._read_ahead()

    def _read_ahead(self) -> None:
        start = self.base + len(self.table)
        self._ahead = None
        if start < len(self.stream):
            job = self._pool.submit(record_rows_ops, self.hw, self.stream, start, start + self.slice_len, self._spare)
            self._ahead = (start, job)

    def _encode(self, start: int) -> np.ndarray:
        present = -1  # bitmask of the opcodes in the slice (-1: not known, check them all)
        if self._ahead is not None and self._ahead[0] == start:  # read ahead (into the spare buffer)
            t, present = self._ahead[1].result()  # (raises what reading raised, where the read would)
            self._buf, self._spare = self._spare, self._buf
        elif isinstance(self.stream, RecordStream):  # read from a file: records -> rows, compiled
            t, present = record_rows_ops(self.hw, self.stream, start, start + self.slice_len, self._buf)
        elif self._buf is not None:  # a LazyStream whose parts come encoded
            t = self.stream.rows(start, start + self.slice_len, self._buf)
        else:
            whole = self.slice_len >= len(self.stream) and isinstance(self.stream, list)
            part = (
                self.stream if whole else self.stream[start : start + self.slice_len]
            )  # (a LazyStream slice: built now)
            t = encode_stream(self.hw, part)
        top = None  # the largest symbol index (None: not scanned)
        if present < 0 or self.n_symbols is not None:
            found, top = ops_and_symbols(t)
            present = found if present < 0 else present
        if present & (1 << OP_SIG | 1 << OP_WAIT):  # (no SIG or WAIT: nothing to densify or refuse)
            sync = sync_rows(t)
            if len(sync):
                t = self.signals.densify(t, sync)
                refuse_sync_stamps(t, self.stream, self.ch, start, sync)
        if present & (1 << OPCODES["RDACC"]):
            refuse_unit_alias(self.hw, t, self.stream, self.ch, start)
        if self.n_symbols is not None and top >= self.n_symbols:
            bad = np.flatnonzero(t[:, C_SYM] >= self.n_symbols)
            if len(bad):
                i = int(bad[0])
                raise SimulationError(
                    "symbol",
                    f"symbol index {int(t[i, C_SYM])} out of range ({self.n_symbols} symbols)",
                    stream=self.ch,
                    instr=start + i,
                    instruction=self.stream[start + i],
                )
        return t

    def commands(self) -> int:
        """Bus commands of the whole stream (sizes the command log; whole streams only)."""
        t = self.table
        return int(t[t[:, C_OP] < K.NCMD, C_N].clip(min=0).sum()) if len(t) else 0

    def advance(self, state: dict[str, np.ndarray]) -> bool:
        """Load the next slice into the kernel state; False at the end of the stream."""
        nxt = self.base + len(self.table)
        if nxt >= len(self.stream):
            return False
        self._load(nxt)
        state["st"][K.ST_POS] = 0
        state["st"][K.ST_BASE] = nxt
        return True


def refuse_sync_stamps(table: np.ndarray, stream, ch, start: int, sync: np.ndarray | None = None) -> None:
    """SIG and WAIT act when the stream reaches them: an issue stamp on one would be ignored.
    `sync`: the indices of the SIG and WAIT rows (sim.encode.sync_rows; found here if None)."""
    sync = sync_rows(table) if sync is None else sync
    bad = sync[table[sync, C_STAMP] >= 0]
    if len(bad):
        i = int(bad[0])
        ins = stream[start + i]
        raise SimulationError(
            "stream",
            f"{ins.op} carries an issue stamp @{int(table[i, C_STAMP])}; SIG and WAIT "
            "take effect when the stream reaches them and take no stamp",
            stream=ch,
            instr=start + i,
            instruction=ins,
        )


def refuse_unit_alias(hw: Hardware, table: np.ndarray, stream, ch, start: int) -> None:
    """RDACC names its PIM unit by the unit's first bank: another bank of the unit would be an
    alias the hardware cannot tell apart (a field bit that means nothing)."""
    bpp = hw.pim.banks_per_pu
    if bpp == 1:
        return
    rd = np.flatnonzero(table[:, C_OP] == OPCODES["RDACC"])
    bad = rd[table[rd, C_BANK] % bpp != 0]
    if len(bad):
        i = int(bad[0])
        b = int(table[i, C_BANK])
        raise SimulationError(
            "range",
            f"RDACC bank={b}: a PIM unit is named by its first bank ({b - b % bpp}, unit {b // bpp} of {bpp} banks)",
            stream=ch,
            instr=start + i,
            instruction=stream[start + i],
            bank=b,
        )


def run_timing(
    hw: Hardware,
    channels: list[list[Instruction]],
    host: list[Instruction],
    program,
    record: bool,
    n_symbols: int | None = None,
    streamed: bool = False,
    progress=None,
    jobs: int = 1,
    yield_to: dict[int, np.ndarray] | None = None,
) -> Timed:
    """n_symbols: check src/dst symbol indices against it (None: not checked). streamed: feed the
    channel streams to the kernel a SLICE at a time (no command log, and the per-instruction
    times of `Timed.channels` hold only the last slice's). progress (streamed runs): called as
    progress(channel instructions read, channel instructions) as slices are read, at most every
    PROGRESS_EVERY seconds. jobs: threads running channel kernels at once (sim/parallel.py;
    1: one after another, here); the result and any error are the same whatever it is."""
    if len(channels) > hw.organization.channels:
        raise SimulationError(
            "range", f"{len(channels)} channel streams, but {hw.name} has {hw.organization.channels} channels"
        )
    if hw.organization.banks_per_channel > 62:
        raise SimulationError("range", "the simulator supports at most 62 banks per channel")
    if streamed and record:
        raise ValueError("a streamed run keeps no command log (record=False)")
    tab = compile_tables(hw)
    args = (hw, tab, channels, host, program, record, n_symbols, streamed, progress, jobs, yield_to)
    twins = Twins.of(hw, channels) if streamed and not yield_to and twins_enabled() else None
    if twins is not None:
        twins.unread(channels)
        try:
            return _timing(*args, twins)
        except (SimulationError, SignalSetTwice, _TwinsFailed):
            pass  # an erroneous program: the run without twins raises the plain run's error
    return _timing(*args, None)


class _TwinsFailed(Exception):
    """A run with twins ended with parked streams (sim/engine runs it again without them)."""


def _timing(hw, tab, channels, host, program, record, n_symbols, streamed, progress, jobs, yield_to, twins) -> Timed:
    t0 = time.perf_counter()
    parallel = jobs > 1 and sum(1 for ch in channels if len(ch)) > 1  # (one channel: nothing to share)
    # (a parallel streamed run reads each channel's first slice on the threads too)
    run = _Run(hw, tab, channels, host, program, record, n_symbols, streamed, defer=parallel, twins=twins)
    t1 = time.perf_counter()
    run.allocate()
    for c, records in (yield_to or {}).items():
        K.yield_to(run.states[c], records, bus.act_bus_cycles(hw))
    t2 = time.perf_counter()
    if parallel:
        from .parallel import Fallback, run_parallel

        try:
            blocked, in_kernel = run_parallel(run, jobs, progress, PROGRESS_EVERY)
        except Fallback:
            if twins is not None:
                raise _TwinsFailed() from None
            # an error or a deadlock: the serial run from the start says which one is first
            run = _Run(hw, tab, channels, host, program, record, n_symbols, streamed)
            run.allocate()
            blocked, in_kernel = run_serial(run, progress)
    else:
        blocked, in_kernel = run_serial(run, progress)
    if blocked:
        if twins is not None:
            raise _TwinsFailed()
        raise _deadlock(channels, host, run.states, run.hr, blocked, run.signals.ids)
    if run.pairs is not None:
        run.pairs.finish()  # (sim/pairs.py: the earliest collision of a pseudo-channel pair)
    return _finish(run, (t0, t1, t2), in_kernel)


class _Run:
    """Everything one timing run works on: the encoded streams (feeds), each channel's kernel
    state, the host runner, the signals and the command log."""

    def __init__(self, hw, tab, channels, host, program, record, n_symbols, streamed, defer=False, twins=None):
        """defer (streamed runs): the channels' first slices are read later (sim/parallel).
        twins (sim/twins.py; streamed runs): only leaders are read and run."""
        self.hw, self.tab, self.channels, self.host, self.program = hw, tab, channels, host, program
        self.record, self.twins = record, twins
        self.signals = SignalMap()
        self.host_table = self.signals.densify(encode_stream(hw, host))
        refuse_sync_stamps(self.host_table, host, "host", 0)
        self.feeds = [
            _Feed(hw, s, self.signals, SLICE if streamed else len(s), n_symbols, c, defer and streamed and len(s) > 0)
            if twins is None or twins.runs(c)
            else None
            for c, s in enumerate(channels)
        ]

    def runs(self, c: int) -> bool:
        """Channel c has instructions and is run (not a twin handed its leader's state)."""
        return len(self.channels[c]) > 0 and (self.twins is None or self.twins.runs(c))

    def read(self) -> int:
        """Channel instructions read so far (a twin's: its leader's)."""
        size = self.twins.size if self.twins is not None else None
        return sum(f.base * (size[c] if size else 1) for c, f in enumerate(self.feeds) if f is not None)

    def relay(self, c: int, **how) -> None:
        """After a kernel call of channel c: its twins' SIGs that it has set (sim/twins.py)."""
        if self.twins is not None:
            self.twins.relay_signals(c, self.signals, **how)

    def allocate(self) -> None:
        tab, feeds, record = self.tab, self.feeds, self.record
        # the command log: one array, channel after channel, each channel's rows in issue order
        self.ends = ends = np.cumsum([0] + [f.commands() for f in feeds]) if record else None
        self.log = log = np.empty(int(ends[-1]), dtype=LOG_DTYPE) if record else None
        idle = K.new_state(tab, 0, None)  # shared, read-only: channels without instructions never run
        self.states = [
            K.new_state(tab, f.first_len, None if log is None else log[ends[c] : ends[c + 1]])
            if f is not None and f.first_len
            else idle
            for c, f in enumerate(feeds)
        ]
        twins = frozenset(self.twins.twins()) if self.twins is not None else frozenset()
        for c in twins:  # (the leader's state object: filled in as the leader runs)
            self.states[c] = self.states[self.twins.leader[c]]
        self.pairs = None
        if self.hw.organization.shared_bus:  # a channel whose partner issues nothing records no bus occupancy
            n = len(feeds)
            for c, f in enumerate(feeds):
                if f is not None and f.first_len and not (c ^ 1 < n and len(self.channels[c ^ 1])):
                    self.states[c]["hwp"][K.HWP_BUSREC] = 0
            self.pairs = PairCheck(self.hw, self.channels, self.states, twins)
        self.hr = HostRunner(self.hw, self.program, self.host, self.host_table)

    def channel_error(self, s: int) -> SimulationError:
        return _channel_error(self.hw, self.tab, s, self.channels[s], self.states[s], self.signals.ids)


def run_serial(run: _Run, progress=None) -> tuple[dict[int, int], float]:
    """Run every stream as far as it goes, one at a time (streams 0..C-1 channels, C host), the
    last one made runnable first; ({blocked stream: signal index} at the end, seconds in the
    kernel). The first error met in this order is the one raised: the reference for sim/parallel."""
    channels, feeds = run.channels, run.feeds
    C = len(channels)
    pending = [c for c in range(C) if run.runs(c)] + [C]
    pool = None
    if len(pending) == 2 and feeds[pending[0]].can_prefetch():
        # one channel stream read from a file: its next slice is read on a second thread while the
        # kernel runs (one more buffer; with more channels, one more per channel: not done)
        from concurrent.futures import ThreadPoolExecutor

        pool = ThreadPoolExecutor(1, thread_name_prefix="pimsat-read")
        feeds[pending[0]].prefetch(pool)
    try:
        return _run_serial(run, pending, progress)
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)


def _run_serial(run: _Run, pending: list[int], progress) -> tuple[dict[int, int], float]:
    channels, feeds, states, hr, signals, tab = run.channels, run.feeds, run.states, run.hr, run.signals, run.tab
    C = len(channels)
    blocked: dict[int, int] = {}
    total, told = sum(len(ch) for ch in channels), time.monotonic()
    in_kernel = 0.0
    twins = run.twins
    while pending:
        s = pending.pop()
        if s == C:
            if not hr.run(signals.time):
                blocked[s] = hr.block
        else:
            tk = time.perf_counter()
            status = K.call(tab, feeds[s].prog, states[s], signals.time)
            in_kernel += time.perf_counter() - tk
            if status == K.ERROR:
                raise run.channel_error(s)
            if twins is not None:
                run.relay(s)
            finished = False
            if status == K.BLOCKED:
                blocked[s] = int(states[s]["st"][K.ST_BLOCK])
            elif feeds[s].advance(states[s]):
                pending.append(s)
                if progress is not None and time.monotonic() - told >= PROGRESS_EVERY:
                    progress(run.read(), total)
                    told = time.monotonic()
            else:
                finished = True
            if run.pairs is not None:
                run.pairs.stopped(s, finished)
        sig = signals.time
        for b, sid in list(blocked.items()):
            if sig[sid] >= 0:
                del blocked[b]
                pending.append(b)
    return blocked, in_kernel


def _finish(run: _Run, t: tuple[float, float, float], in_kernel: float) -> Timed:
    hw, tab, channels, states, hr, log, ends = run.hw, run.tab, run.channels, run.states, run.hr, run.log, run.ends
    sig = run.signals.time
    makespan = max([int(s["st"][K.ST_MAXDONE]) for s in states] + [hr.max_end] + [int(sig.max()) if len(sig) else 0])
    for ch, s in enumerate(states):
        _check_end(hw, ch, channels[ch], s, makespan)
    stalls: dict[str, int] = {}
    for s in states:
        for k in np.flatnonzero(s["stall"]):
            stalls[tab.names[k]] = stalls.get(tab.names[k], 0) + int(s["stall"][k])
    for k, v in hr.stall.items():
        if v:
            stalls[f"host {k}"] = v
    if log is not None:
        for c, s in enumerate(states):
            m = int(s["st"][K.ST_LOG])
            if m < 2:
                log[ends[c] : ends[c] + m] = s["log"][:m]
            log["channel"][ends[c] : ends[c] + m] = c
    # issue: the run over all streams, of which kernel: the channel kernel alone (the rest of a
    # streamed run is reading the next slices, and the host); with jobs > 1 kernel is the sum
    # over the threads, and may exceed issue
    t0, t1, t2 = t
    phases = {"encode": t1 - t0, "allocate": t2 - t1, "issue": time.perf_counter() - t2, "kernel": in_kernel}
    ids = run.signals.ids
    ran = sum(1 for c in range(len(channels)) if run.runs(c))
    return Timed(tab, states, hr, ids, sig[: len(ids)], makespan, stalls, phases, log, ran)


def _deadlock(channels, host, states, hr, blocked, signal_ids) -> SimulationError:
    C = len(channels)
    set_by_someone = {i.args[0] for stream in channels + [host] for i in stream if i.op == "SIG"}
    parts = []
    first = None
    for s, sid in sorted(blocked.items()):
        pos = hr.pos if s == C else int(states[s]["st"][K.ST_POS] + states[s]["st"][K.ST_BASE])
        name = "host" if s == C else f"channel {s}"
        ins = (host if s == C else channels[s])[pos]
        sig_id = int(signal_ids[sid])
        why = "never set by any SIG" if sig_id not in set_by_someone else "its SIG is behind a WAIT that never releases"
        parts.append(f"{name} instr {pos} WAIT id={sig_id} ({why})")
        if first is None:
            first = (s if s < C else "host", pos, ins)
    err = SimulationError(
        "deadlock",
        "every unfinished stream waits: " + "; ".join(parts),
        stream=first[0],
        instr=first[1],
        instruction=first[2],
    )
    err.blocked = parts
    return err


def _check_end(hw: Hardware, ch: int, stream, s, T: int) -> None:
    trefi, maxp = hw.timing.p("tREFI"), hw.timing.max_postponed_refresh
    # refresh counts per bank (equal on all-bank devices): the bank refreshed least, and the one
    # refreshed longest ago, are named where the device refreshes per bank
    per_bank = hw.timing.refresh_mode == "per_bank"
    least, oldest = int(np.argmin(s["brefs"])), int(np.argmin(s["blastref"]))
    n = int(s["brefs"][least])
    who = f" of bank {least}" if per_bank else ""
    REFs = "refreshes" if per_bank else "REFs"
    if (n + 1 + maxp) * trefi <= T:
        cyc = (n + 1 + maxp) * trefi
        raise SimulationError(
            "refresh",
            f"{n} {REFs}{who} issued before cycle {cyc}: {maxp + 1} owed, more than "
            f"max_postponed_refresh={maxp} (one due every tREFI={trefi})",
            cycle=cyc,
            stream=ch,
        )
    if n < T // trefi:
        raise SimulationError(
            "refresh",
            f"program ends at cycle {T} owing {T // trefi - n} refresh(es): "
            f"{n} {REFs}{who} issued, {T // trefi} due (one every tREFI={trefi})",
            cycle=T,
            stream=ch,
        )
    gap = hw.timing.max_refresh_interval * trefi
    last = int(s["blastref"][oldest])
    if T - last > gap:
        who = f" of bank {oldest}" if per_bank else ""
        raise SimulationError(
            "refresh",
            f"program ends at cycle {T}, {T - last} cycles after the last refresh{who} (cycle "
            f"{last}): at most max_refresh_interval={hw.timing.max_refresh_interval} x tREFI={gap} "
            "between two REFs",
            cycle=last + gap,
            stream=ch,
            needed=gap,
            actual=T - last,
        )
    open_banks = np.flatnonzero(s["openrow"] >= 0)
    if len(open_banks):
        b = int(open_banks[0])
        i = int(s["openinstr"][b])
        raise SimulationError(
            "bank_state",
            f"bank {b} is still open (row {int(s['openrow'][b])}) at the end of "
            "the program; every bank must be precharged at the end",
            cycle=T,
            stream=ch,
            bank=b,
            instr=i,
            instruction=stream[i],
        )


def command_names() -> tuple[str, ...]:
    return COMMANDS
