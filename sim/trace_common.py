"""Shared parts of the trace exporters (sim.trace_csv, sim.trace_chrome, sim.trace_vcd).

Inputs
------
The simulator, when recording, hands over

* a *command log*: a numpy structured array of dtype :data:`COMMAND_LOG_DTYPE`, one record per
  command issued on a channel's command bus::

      cycle    int64   issue cycle (memory clock)
      channel  int32   channel (pseudo-channel) index
      command  uint8   index into hwmodel.model.COMMANDS ("ACT","PRE","RD","WR","REF","MAC","WRGB","RDACC","REFSB")
      bank     int32   bank within the channel (rank-major), or -1 for a multi-bank command
      mask     uint64  for bank == -1: the banks it acts on (bit b = bank b of the channel)
      row      int32   row, or -1 where not applicable
      col      int32   column (burst), or -1 where not applicable
      instr    int32   index of the issuing instruction in its channel stream

  A command with bank == -1 and mask == 0 acts on no particular bank (e.g. WRGB, the global
  buffer); a REF with bank == -1 and mask == 0 refreshes the whole channel.

* *host events*: a structured array of dtype :data:`HOST_EVENT_DTYPE` (start, end, op, kind with
  kind "HOP", "EPI" or "HMV"), optionally with the op names as a list indexed by op.

This module holds the dtypes and their constructors (:func:`command_log`, :func:`host_events`),
input validation, the atomic writer (:func:`_atomic_open`: a temporary file beside the target,
renamed over it only when complete, removed on any error), vectorised text formatting, the
expansion of multi-bank commands, and :func:`summarise`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from hwmodel.atomic import atomic_open
from hwmodel.model import COMMANDS, Hardware

COMMAND_LOG_DTYPE = np.dtype(
    [
        ("cycle", np.int64),
        ("channel", np.int32),
        ("command", np.uint8),
        ("bank", np.int32),
        ("mask", np.uint64),
        ("row", np.int32),
        ("col", np.int32),
        ("instr", np.int32),
    ]
)
HOST_EVENT_DTYPE = np.dtype([("start", np.int64), ("end", np.int64), ("op", np.int32), ("kind", "U8")])

_CMD = {name: i for i, name in enumerate(COMMANDS)}
_ACT, _PRE, _REF, _MAC = _CMD["ACT"], _CMD["PRE"], _CMD["REF"], _CMD["MAC"]

# Output lines (CSV) / events (JSON) formatted per chunk: bounds memory for 10^7+ commands.
_CHUNK = 1 << 19
# Named as the generator in the Chrome trace's otherData and the VCD $comment.
_GENERATOR = "pimsat sim.traces"


# ----------------------------------------------------------------------------------------------
# Construction helpers (used by tests and by the simulator)
# ----------------------------------------------------------------------------------------------
def command_log(records: Iterable[Sequence[Any]] = ()) -> np.ndarray:
    """A command log from tuples (cycle, channel, command, bank, mask, row, col, instr); `command`
    may be a mnemonic ("ACT") or its index in COMMANDS."""
    rows = []
    for r in records:
        r = list(r)
        if isinstance(r[2], str):
            r[2] = _CMD[r[2]]
        rows.append(tuple(r))
    return np.array(rows, dtype=COMMAND_LOG_DTYPE)


def host_events(records: Iterable[Sequence[Any]] = ()) -> np.ndarray:
    """Host events from tuples (start, end, op, kind)."""
    return np.array([tuple(r) for r in records], dtype=HOST_EVENT_DTYPE)


# ----------------------------------------------------------------------------------------------
# Validation
# ----------------------------------------------------------------------------------------------
def _check_fields(arr: np.ndarray, dtype: np.dtype, what: str, lack: str, dtype_name: str) -> np.ndarray:
    """Checks that `arr` is a structured array with the fields of `dtype`; returns it as 1-D."""
    if not isinstance(arr, np.ndarray) or arr.dtype.names is None:
        raise TypeError(f"{what} must be a numpy structured array of {dtype_name}")
    missing = [f for f in dtype.names if f not in arr.dtype.names]
    if missing:
        raise TypeError(f"{what} {lack} field(s) {', '.join(missing)}")
    return arr.reshape(-1)


def _first(cond: np.ndarray) -> int | None:
    """Index of the first True in `cond`, or None."""
    return int(np.flatnonzero(cond)[0]) if cond.any() else None


def _check_log(log: np.ndarray, hw: Hardware) -> np.ndarray:
    """Checks a command log against the hardware (fields, ranges); returns it as a 1-D array."""
    log = _check_fields(log, COMMAND_LOG_DTYPE, "command log", "lacks", "COMMAND_LOG_DTYPE")
    if log.size == 0:
        return log
    org = hw.organization
    bpc = org.banks_per_channel

    def bad(cond: np.ndarray, what: str) -> None:
        i = _first(cond)
        if i is not None:
            r = log[i]
            raise ValueError(f"command log row {i} (cycle {int(r['cycle'])}, channel {int(r['channel'])}): {what}")

    cmd = log["command"]
    bad(cmd >= len(COMMANDS), f"command index out of range 0..{len(COMMANDS) - 1}")
    ch = log["channel"]
    bad((ch < 0) | (ch >= org.channels), f"channel out of range 0..{org.channels - 1}")
    bank = log["bank"]
    bad((bank < -1) | (bank >= bpc), f"bank out of range -1..{bpc - 1}")
    bad(log["cycle"] < 0, "negative cycle")
    if bpc < 64:
        bad((log["mask"].astype(np.uint64) >> np.uint64(bpc)) != 0, f"mask names a bank >= {bpc}")
    return log


def _check_host(events: np.ndarray | None) -> np.ndarray:
    if events is None:
        return np.zeros(0, dtype=HOST_EVENT_DTYPE)
    events = _check_fields(events, HOST_EVENT_DTYPE, "host events", "lack", "HOST_EVENT_DTYPE")
    if events.dtype["kind"].kind in "ui":  # the simulator's records: kind is an index into HOST_KINDS
        from .result import HOST_KINDS

        events = host_events((int(e["start"]), int(e["end"]), int(e["op"]), HOST_KINDS[int(e["kind"])]) for e in events)
    i = _first(events["end"] < events["start"])
    if i is not None:
        raise ValueError(f"host event {i}: end {int(events['end'][i])} < start {int(events['start'][i])}")
    return events


# ----------------------------------------------------------------------------------------------
# Atomic output
# ----------------------------------------------------------------------------------------------
_atomic_open = atomic_open


# ----------------------------------------------------------------------------------------------
# Vectorised text formatting: rows of fixed-width byte fields, padding bytes (0) squeezed out
# ----------------------------------------------------------------------------------------------
class _Dec:
    """A column of integers in decimal."""

    def __init__(self, values: np.ndarray):
        v = np.asarray(values)
        if v.dtype.kind == "u":
            self.neg = None
            self.abs = v.astype(np.uint64)
        else:
            v = v.astype(np.int64)
            neg = v < 0
            self.neg = neg if neg.any() else None
            self.abs = np.abs(v)
        top = int(self.abs.max()) if self.abs.size else 0
        if top < 1 << 32:  # 32-bit division is several times faster
            self.abs = self.abs.astype(np.uint32)
        self.digits = len(str(top))
        self.width = self.digits + (self.neg is not None)

    def fill(self, buf: np.ndarray, at: int) -> None:
        x = self.abs
        ten = x.dtype.type(10)
        for k in range(self.digits):
            q = x // ten
            d = (x - q * ten).astype(np.uint8)
            d += np.uint8(48)
            if k:
                d[x == 0] = 0
            buf[:, at + self.width - 1 - k] = d
            x = q
        if self.neg is not None:
            buf[:, at] = np.where(self.neg, np.uint8(45), np.uint8(0))


class _Hex:
    """A column of unsigned integers in hexadecimal (no prefix)."""

    _DIGITS = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)

    def __init__(self, values: np.ndarray):
        self.abs = np.asarray(values).astype(np.uint64)
        top = int(self.abs.max()) if self.abs.size else 0
        self.width = max(1, (top.bit_length() + 3) // 4)

    def fill(self, buf: np.ndarray, at: int) -> None:
        x = self.abs
        for k in range(self.width):
            d = self._DIGITS[(x & np.uint64(15)).astype(np.intp)]
            if k:
                d[x == 0] = 0
            buf[:, at + self.width - 1 - k] = d
            x = x >> np.uint64(4)


class _Lut:
    """A column of names picked from a table by index."""

    def __init__(self, names: Sequence[str], index: np.ndarray):
        self.width = max(len(n.encode()) for n in names)
        table = np.zeros((len(names), self.width), dtype=np.uint8)
        for i, n in enumerate(names):
            b = n.encode()
            table[i, : len(b)] = np.frombuffer(b, dtype=np.uint8)
        self.table = table
        self.index = np.asarray(index).astype(np.intp)

    def fill(self, buf: np.ndarray, at: int) -> None:
        buf[:, at : at + self.width] = self.table[self.index]


def _format_rows(n: int, parts: Sequence[bytes | _Dec | _Hex | _Lut]) -> bytes:
    """n rows, each the concatenation of `parts` (literal bytes or columns), as one byte string."""
    if n == 0:
        return b""
    widths = [len(p) if isinstance(p, bytes) else p.width for p in parts]
    buf = np.zeros((n, sum(widths)), dtype=np.uint8)
    at = 0
    for p, w in zip(parts, widths):
        if isinstance(p, bytes):
            buf[:, at : at + w] = np.frombuffer(p, dtype=np.uint8)
        else:
            p.fill(buf, at)
        at += w
    flat = buf.reshape(-1)
    return flat[flat != 0].tobytes()


# ----------------------------------------------------------------------------------------------
# Bank expansion and ordering
# ----------------------------------------------------------------------------------------------
def _popcount(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.uint64)
    if hasattr(np, "bitwise_count"):
        return np.bitwise_count(x).astype(np.int64)
    x = x - ((x >> np.uint64(1)) & np.uint64(0x5555555555555555))
    x = (x & np.uint64(0x3333333333333333)) + ((x >> np.uint64(2)) & np.uint64(0x3333333333333333))
    x = (x + (x >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    return ((x * np.uint64(0x0101010101010101)) >> np.uint64(56)).astype(np.int64)


def _unit_masks(cmd: np.ndarray, bank: np.ndarray, mask: np.ndarray, hw: Hardware, ref_per_rank: bool):
    """Per command: the mask of units it expands to and whether it is multi-unit.

    Units are banks, except for REF when `ref_per_rank` (all-bank refresh is a rank-level
    command): then the units are the ranks that hold a bank of the mask (all ranks if mask == 0).
    With `ref_per_rank` False, a REF with mask == 0 expands to every bank of the channel.
    Returns (unit_mask uint64, multi bool, rank_level bool, count int64 = units per command)."""
    org = hw.organization
    m = mask.astype(np.uint64)
    multi = (bank < 0) & (m != 0)
    ref = (cmd == _REF) & (bank < 0)
    rank_level = np.zeros(cmd.shape, dtype=bool)
    if ref.any():
        sub = m[ref]
        if ref_per_rank:
            bpr = org.banks_per_rank
            rm = np.zeros(sub.shape, dtype=np.uint64)
            for r in range(org.ranks):
                lo = r * bpr
                if lo >= 64:
                    break
                width = min(bpr, 64 - lo)
                field = (sub >> np.uint64(lo)) & np.uint64((1 << width) - 1)
                rm |= (field != 0).astype(np.uint64) << np.uint64(r)
            rm[sub == 0] = np.uint64((1 << org.ranks) - 1)
            rank_level = ref
        else:
            nb = min(org.banks_per_channel, 64)
            rm = np.where(sub == 0, np.uint64((1 << nb) - 1), sub)
        m = m.copy()
        m[ref] = rm
        multi = multi | ref
    return m, multi, rank_level, np.where(multi, _popcount(m), 1)


def _line_counts(cmd, bank, mask, hw, ref_per_rank: bool) -> np.ndarray:
    """Number of entries each command expands to (see :func:`_expand`)."""
    return _unit_masks(cmd, bank, mask, hw, ref_per_rank)[3]


def _expand(cmd, bank, mask, hw, ref_per_rank: bool):
    """Expand commands to one entry per unit (bank, or rank for a rank-level REF).

    Returns (src row index, unit, rank_level) per output entry, in row order then unit order.
    A command on no bank (bank -1, mask 0) yields one entry with unit -1."""
    m, multi, rank_level, counts = _unit_masks(cmd, bank, mask, hw, ref_per_rank)
    src = np.repeat(np.arange(cmd.size), counts)
    unit = np.repeat(np.where(multi, -1, bank).astype(np.int64), counts)
    if multi.any():
        nb = min(hw.organization.banks_per_channel, 64)
        mm = m[multi]
        bits = ((mm[:, None] >> np.arange(nb, dtype=np.uint64)[None, :]) & np.uint64(1)).astype(bool)
        _, b = np.nonzero(bits)
        unit[multi[src]] = b
    return src, unit, rank_level[src]


def _order_by(primary: np.ndarray, secondary: np.ndarray) -> np.ndarray | None:
    """Stable order by (primary, secondary), or None when the arrays are already in that order."""
    if primary.size < 2:
        return None
    dp = np.diff(primary)
    if (dp > 0).all() or ((dp >= 0).all() and ((dp > 0) | (np.diff(secondary) >= 0)).all()):
        return None
    return np.lexsort((secondary, primary))


def _by_channel_cycle(log: np.ndarray) -> np.ndarray:
    """The log stably sorted by (channel, cycle) (the log itself when already in that order)."""
    order = _order_by(log["channel"], log["cycle"])
    return log if order is None else log[order]


# ----------------------------------------------------------------------------------------------
# Summary
# ----------------------------------------------------------------------------------------------
def summarise(log: np.ndarray, hw: Hardware) -> dict[str, Any]:
    """Command counts of a command log.

    Returns a JSON-serialisable dict::

        commands         total commands on the buses
        by_command       {mnemonic: count}
        by_channel       [{mnemonic: count} for each channel]  (length = hw channels)
        bank_operations  {mnemonic: count of (command, bank) pairs}  -- multi-bank commands
                          count once per bank; REF once per bank it refreshes
        first_cycle, last_cycle   (None for an empty log)
    """
    log = _check_log(log, hw)
    n_cmd = len(COMMANDS)
    channels = hw.organization.channels
    cmd = log["command"].astype(np.int64)
    ch = log["channel"].astype(np.int64)
    per = np.bincount(ch * n_cmd + cmd, minlength=channels * n_cmd).reshape(channels, n_cmd)
    total = per.sum(axis=0)
    if log.size:
        lines = _line_counts(log["command"], log["bank"], log["mask"], hw, ref_per_rank=False)
        ops = np.bincount(cmd, weights=lines, minlength=n_cmd).astype(np.int64)
    else:
        ops = np.zeros(n_cmd, dtype=np.int64)
    return {
        "commands": int(log.size),
        "by_command": {c: int(total[i]) for i, c in enumerate(COMMANDS)},
        "by_channel": [{c: int(per[k, i]) for i, c in enumerate(COMMANDS)} for k in range(channels)],
        "bank_operations": {c: int(ops[i]) for i, c in enumerate(COMMANDS)},
        "first_cycle": int(log["cycle"].min()) if log.size else None,
        "last_cycle": int(log["cycle"].max()) if log.size else None,
    }
