"""Trace exporters of the simulator: command log (CSV), Chrome/Perfetto trace (JSON), VCD waveform.

Inputs
------
The simulator, when recording, hands over

* a *command log*: a numpy structured array of dtype :data:`COMMAND_LOG_DTYPE`, one record per
  command issued on a channel's command bus::

      cycle    int64   issue cycle (memory clock)
      channel  int32   channel (pseudo-channel) index
      command  uint8   index into hwmodel.model.COMMANDS ("ACT","PRE","RD","WR","REF","MAC","WRGB","RDACC")
      bank     int32   bank within the channel (rank-major), or -1 for a multi-bank command
      mask     uint64  for bank == -1: the banks it acts on (bit b = bank b of the channel)
      row      int32   row, or -1 where not applicable
      col      int32   column (burst), or -1 where not applicable
      instr    int32   index of the issuing instruction in its channel stream

  A command with bank == -1 and mask == 0 acts on no particular bank (e.g. WRGB, the global
  buffer); a REF with bank == -1 and mask == 0 refreshes the whole channel.

* *host events*: a structured array of dtype :data:`HOST_EVENT_DTYPE` (start, end, op, kind with
  kind "HOP" or "EPI"), optionally with the op names as a list indexed by op.

Outputs
-------
* :func:`write_command_log` -- CSV ``cycle,command,channel,rank,bankgroup,bank,row,column``, one
  line per bank (multi-bank commands expanded), sorted by (cycle, channel). Vectorised.
* :func:`write_chrome_trace` -- Chrome trace-event JSON (Perfetto, chrome://tracing).
  **1 us in the viewer = 1 memory-clock cycle** (``ts`` = cycle, exact integers).
* :func:`write_vcd` -- VCD waveform (GTKWave). **1 cycle = 1 timescale unit.**
* :func:`summarise` -- command counts per command and per channel.

Every writer is atomic: it writes a temporary file beside the target and renames it over the
target only when complete; on any error the temporary file is removed and an existing target is
left untouched.
"""
from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any

import numpy as np

from hwmodel.model import COMMANDS, Hardware

__all__ = [
    "COMMAND_LOG_DTYPE",
    "HOST_EVENT_DTYPE",
    "command_log",
    "host_events",
    "slice_cycles",
    "summarise",
    "write_chrome_trace",
    "write_command_log",
    "write_vcd",
]

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

# Default cap on the slices of a Chrome trace: viewers become sluggish beyond a few million.
DEFAULT_MAX_EVENTS = 1_000_000
# Output lines (CSV) / events (JSON) formatted per chunk: bounds memory for 10^7+ commands.
_CHUNK = 1 << 19
# Track ids: Perfetto keys threads by tid, so tids are made globally unique (pid * stride + k).
_TID_STRIDE = 10_000


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
def _check_log(log: np.ndarray, hw: Hardware) -> np.ndarray:
    """Checks a command log against the hardware (fields, ranges); returns it as a 1-D array."""
    if not isinstance(log, np.ndarray) or log.dtype.names is None:
        raise TypeError("command log must be a numpy structured array of COMMAND_LOG_DTYPE")
    missing = [f for f in COMMAND_LOG_DTYPE.names if f not in log.dtype.names]
    if missing:
        raise TypeError(f"command log lacks field(s) {', '.join(missing)}")
    log = log.reshape(-1)
    if log.size == 0:
        return log
    org = hw.organization
    bpc = org.banks_per_channel

    def bad(cond: np.ndarray, what: str) -> None:
        if cond.any():
            i = int(np.flatnonzero(cond)[0])
            r = log[i]
            raise ValueError(
                f"command log row {i} (cycle {int(r['cycle'])}, channel {int(r['channel'])}): {what}"
            )

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
    if not isinstance(events, np.ndarray) or events.dtype.names is None:
        raise TypeError("host events must be a numpy structured array of HOST_EVENT_DTYPE")
    missing = [f for f in HOST_EVENT_DTYPE.names if f not in events.dtype.names]
    if missing:
        raise TypeError(f"host events lack field(s) {', '.join(missing)}")
    events = events.reshape(-1)
    if events.size and (events["end"] < events["start"]).any():
        i = int(np.flatnonzero(events["end"] < events["start"])[0])
        raise ValueError(f"host event {i}: end {int(events['end'][i])} < start {int(events['start'][i])}")
    return events


# ----------------------------------------------------------------------------------------------
# Atomic output
# ----------------------------------------------------------------------------------------------
def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def _atomic_open(path: str | os.PathLike[str], binary: bool) -> Iterator[IO[Any]]:
    """Open a temporary file beside `path`; on success rename it over `path`, on error remove it."""
    target = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        if binary:
            f: IO[Any] = os.fdopen(fd, "wb")
        else:
            f = os.fdopen(fd, "w", encoding="utf-8", newline="\n")
        with f:
            yield f
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


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
# Bank expansion
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
    Returns (unit_mask uint64, multi bool, rank_level bool)."""
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
    return m, multi, rank_level


def _line_counts(cmd, bank, mask, hw, ref_per_rank: bool) -> np.ndarray:
    m, multi, _ = _unit_masks(cmd, bank, mask, hw, ref_per_rank)
    return np.where(multi, _popcount(m), 1)


def _expand(cmd, bank, mask, hw, ref_per_rank: bool):
    """Expand commands to one entry per unit (bank, or rank for a rank-level REF).

    Returns (src row index, unit, rank_level) per output entry, in row order then unit order.
    A command on no bank (bank -1, mask 0) yields one entry with unit -1."""
    m, multi, rank_level = _unit_masks(cmd, bank, mask, hw, ref_per_rank)
    counts = np.where(multi, _popcount(m), 1)
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


# ----------------------------------------------------------------------------------------------
# 1. Command log (CSV)
# ----------------------------------------------------------------------------------------------
CSV_HEADER = "cycle,command,channel,rank,bankgroup,bank,row,column"


def write_command_log(
    path: str | os.PathLike[str], log: np.ndarray, hw: Hardware, *, ref_per_bank: bool = False
) -> int:
    """Write the command log as CSV for replay by other DRAM tools; returns the number of lines.

    Header ``cycle,command,channel,rank,bankgroup,bank,row,column``; one line per (command, bank):
    a multi-bank (all-bank mode) command becomes one line per bank of its mask, all at the same
    cycle. `rank` is the rank in the channel, `bankgroup` the bank group within the rank, `bank`
    the bank within the bank group (Ramulator's address vector). Exceptions: REF is an all-bank
    refresh, a rank-level command, so it becomes one line per rank with bankgroup = bank = -1
    (`ref_per_bank=True`: one line per bank refreshed instead); a command on no bank (e.g. WRGB) is one line with rank = bankgroup = bank = -1.
    row/column are -1 where not applicable. PIM commands keep their mnemonic (MAC, WRGB, RDACC).
    Lines are sorted by (cycle, channel), stably (log order within a cycle and channel).
    """
    log = _check_log(log, hw)
    org = hw.organization
    bpr, bpg = org.banks_per_rank, org.banks_per_group
    order = _order_by(log["cycle"], log["channel"])
    counts = _line_counts(log["command"], log["bank"], log["mask"], hw, ref_per_rank=not ref_per_bank)
    if order is not None:
        counts = counts[order]
    ends = np.cumsum(counts)
    # Chunk boundaries (in sorted rows) of about _CHUNK output lines each.
    cuts = np.searchsorted(ends, np.arange(_CHUNK, int(ends[-1]) if ends.size else 0, _CHUNK), side="left") + 1
    bounds = np.unique(np.concatenate(([0], cuts, [log.size]))) if log.size else np.array([0])
    written = 0
    with _atomic_open(path, binary=True) as f:
        f.write((CSV_HEADER + "\n").encode())
        for a, b in zip(bounds[:-1], bounds[1:]):
            rows = log[order[a:b]] if order is not None else log[a:b]
            cmd = rows["command"]
            src, unit, rank_level = _expand(cmd, rows["bank"], rows["mask"], hw, ref_per_rank=not ref_per_bank)
            none = unit < 0
            rank = np.where(rank_level, unit, unit // bpr)
            bg = np.where(rank_level, -1, (unit % bpr) // bpg)
            bk = np.where(rank_level, -1, unit % bpg)
            rank[none], bg[none], bk[none] = -1, -1, -1
            text = _format_rows(
                src.size,
                [
                    _Dec(rows["cycle"][src]), b",", _Lut(COMMANDS, cmd[src]), b",",
                    _Dec(rows["channel"][src]), b",", _Dec(rank), b",", _Dec(bg), b",", _Dec(bk), b",",
                    _Dec(rows["row"][src]), b",", _Dec(rows["col"][src]), b"\n",
                ],
            )
            f.write(text)
            written += src.size
    return written


# ----------------------------------------------------------------------------------------------
# 2. Chrome / Perfetto trace (JSON)
# ----------------------------------------------------------------------------------------------
def slice_cycles(hw: Hardware) -> dict[str, int]:
    """Length in cycles of one command's slice in the Chrome trace: its occupancy of the channel.

    1 cycle (a command-bus slot) for ACT, PRE and REF; BL2 (one burst on the data bus) for the
    commands that move a burst: RD, WR, WRGB, RDACC; the MAC interval (the unit's time per MAC)
    for MAC. Slices are clipped at the next slice of their track so tracks never overlap."""
    burst = max(1, hw.timing.p("BL2"))
    one = {"ACT": 1, "PRE": 1, "REF": 1, "RD": burst, "WR": burst, "WRGB": burst, "RDACC": burst,
           "MAC": max(1, hw.mac_interval)}
    return {c: one[c] for c in COMMANDS}


def _clip_to_next(track: np.ndarray, ts: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Durations end - ts, clipped at the next start on the same track (inputs sorted by track, ts)."""
    dur = end - ts
    if ts.size > 1:
        same = track[1:] == track[:-1]
        gap = ts[1:] - ts[:-1]
        dur[:-1] = np.where(same, np.minimum(dur[:-1], gap), dur[:-1])
    return np.maximum(dur, 0)


def _pid_channel(ch: np.ndarray | int) -> Any:
    return ch + 1


def write_chrome_trace(
    path: str | os.PathLike[str],
    log: np.ndarray,
    host_events: np.ndarray | None,
    hw: Hardware,
    op_names: Sequence[str] | None = None,
    max_events: int | None = DEFAULT_MAX_EVENTS,
) -> dict[str, Any]:
    """Write a Chrome trace-event JSON file (opens in ui.perfetto.dev and chrome://tracing).

    Time: ``ts`` and ``dur`` are integer cycles written as microseconds, so **1 us in the viewer
    = 1 memory-clock cycle** (exact). ``displayTimeUnit`` is "ns" (chrome://tracing then labels
    1 cycle as "1,000 ns"; current Perfetto ignores the key and labels it "1us").

    Tracks: process "channel c" (pid c+1) per channel with a thread "command bus" and a thread
    "PU p (banks ...)" per PIM unit; process "host" (pid channels+1) with a thread "host unit".
    On the command bus each command is a slice of :func:`slice_cycles` cycles; a run of
    consecutive MACs of one instruction (a sweep) is merged into one slice "MAC" from its first
    issue to its last issue + the MAC interval, with args instr (instruction index), count (MACs
    merged), row, col (first column) and bank or mask. Each PIM unit addressed by a MAC run gets
    the same slice on its track. Host events are slices "<kind> <op name>" on the host unit.

    If there are more than `max_events` slices (None = no limit), the earliest `max_events`
    by ts are kept; ``otherData`` records ``truncated`` and ``dropped_events``.
    Returns {"events": slices written, "dropped": slices dropped, "tracks": tracks}.
    """
    log = _check_log(log, hw)
    host = _check_host(host_events)
    org = hw.organization
    bpp = hw.pim.banks_per_pu
    occ = np.array([slice_cycles(hw)[c] for c in COMMANDS], dtype=np.int64)
    mac_len = int(occ[_MAC])

    # --- command-bus slices: order by (channel, cycle), merge MAC runs ---------------------
    order = _order_by(log["channel"], log["cycle"])
    cols = {f: (log[f] if order is None else log[f][order]) for f in COMMAND_LOG_DTYPE.names}
    cyc, ch, cmd = cols["cycle"], cols["channel"], cols["command"]
    bank, mask, instr = cols["bank"], cols["mask"], cols["instr"]
    n = cyc.size
    is_mac = cmd == _MAC
    cont = np.zeros(n, dtype=bool)
    if n > 1:
        cont[1:] = (
            is_mac[1:] & is_mac[:-1] & (ch[1:] == ch[:-1]) & (instr[1:] == instr[:-1])
            & (bank[1:] == bank[:-1]) & (mask[1:] == mask[:-1])
        )
    first = np.flatnonzero(~cont)
    last = np.append(first[1:], n)[: first.size] - 1
    s_count = last - first + 1
    s_ts = cyc[first].astype(np.int64)
    s_end = cyc[last].astype(np.int64) + occ[cmd[first]]
    s_ch = ch[first].astype(np.int64)
    s_dur = _clip_to_next(s_ch, s_ts, s_end)
    s_cmd, s_bank, s_mask = cmd[first], bank[first], mask[first]
    s_row, s_col, s_instr = cols["row"][first], cols["col"][first], instr[first]
    s_is_mac = s_cmd == _MAC

    # --- PIM-unit slices: one per (MAC run, unit addressed) --------------------------------
    mac_ids = np.flatnonzero(s_is_mac)
    src, unit, _ = _expand(s_cmd[mac_ids], s_bank[mac_ids], s_mask[mac_ids], hw, ref_per_rank=False)
    src, unit = src[unit >= 0], unit[unit >= 0]  # (a MAC naming no bank has no unit track)
    pu = unit // bpp
    keep = np.ones(src.size, dtype=bool)
    if src.size > 1:
        keep[1:] = (src[1:] != src[:-1]) | (pu[1:] != pu[:-1])
    p_run = mac_ids[src[keep]]
    p_pu = pu[keep]
    p_ch = s_ch[p_run]
    p_ts = s_ts[p_run]
    p_end = cyc[last[p_run]].astype(np.int64) + mac_len
    p_order = np.lexsort((p_ts, p_pu, p_ch))
    p_run, p_pu, p_ch, p_ts, p_end = (a[p_order] for a in (p_run, p_pu, p_ch, p_ts, p_end))
    p_dur = _clip_to_next(p_ch * (hw.pus_per_channel + 1) + p_pu, p_ts, p_end)

    # --- host slices ------------------------------------------------------------------------
    h_ts = host["start"].astype(np.int64)
    h_dur = host["end"].astype(np.int64) - h_ts

    # --- event budget: keep the earliest max_events slices ---------------------------------
    total = s_ts.size + p_ts.size + h_ts.size
    dropped = 0
    s_keep = p_keep = h_keep = None
    if max_events is not None and total > max_events:
        all_ts = np.concatenate((s_ts, p_ts, h_ts))
        k = max(0, int(max_events))
        if k:
            cutoff = np.partition(all_ts, k - 1)[k - 1]  # the k-th smallest ts, in O(n)
            chosen = all_ts < cutoff
            ties = np.flatnonzero(all_ts == cutoff)[: k - int(chosen.sum())]
            chosen[ties] = True
        else:
            chosen = np.zeros(total, dtype=bool)
        s_keep, p_keep, h_keep = np.split(chosen, [s_ts.size, s_ts.size + p_ts.size])
        dropped = total - int(chosen.sum())

    def pick(keep_mask: np.ndarray | None, *arrays: np.ndarray) -> list[np.ndarray]:
        return [a if keep_mask is None else a[keep_mask] for a in arrays]

    s_ts, s_dur, s_ch, s_cmd, s_bank, s_mask, s_row, s_col, s_instr, s_count, s_is_mac = pick(
        s_keep, s_ts, s_dur, s_ch, s_cmd, s_bank, s_mask, s_row, s_col, s_instr, s_count, s_is_mac)
    p_run_k, p_pu, p_ch, p_ts, p_dur = pick(p_keep, p_run, p_pu, p_ch, p_ts, p_dur)
    host_k, h_ts, h_dur = pick(h_keep, host, h_ts, h_dur)

    # --- metadata: processes and threads ------------------------------------------------------
    host_pid = org.channels + 1
    meta: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": host_pid, "args": {"name": "host"}},
        {"ph": "M", "name": "process_sort_index", "pid": host_pid, "args": {"sort_index": 0}},
        {"ph": "M", "name": "thread_name", "pid": host_pid, "tid": host_pid * _TID_STRIDE,
         "args": {"name": "host unit"}},
    ]
    tracks = 1
    for c in range(org.channels):
        pid = _pid_channel(c)
        meta += [
            {"ph": "M", "name": "process_name", "pid": pid, "args": {"name": f"channel {c}"}},
            {"ph": "M", "name": "process_sort_index", "pid": pid, "args": {"sort_index": pid}},
            {"ph": "M", "name": "thread_name", "pid": pid, "tid": pid * _TID_STRIDE,
             "args": {"name": "command bus"}},
            {"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": pid * _TID_STRIDE,
             "args": {"sort_index": 0}},
        ]
        for p in range(hw.pus_per_channel):
            tid = pid * _TID_STRIDE + 1 + p
            lo, hi = p * bpp, p * bpp + bpp - 1
            banks = f"bank {lo}" if lo == hi else f"banks {lo}-{hi}"
            meta += [
                {"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": f"PU {p} ({banks})"}},
                {"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid, "args": {"sort_index": 1 + p}},
            ]
        tracks += 1 + hw.pus_per_channel
    written = int(s_ts.size + p_ts.size + h_ts.size)
    other = {
        "generator": "pimsat sim.traces",
        "hardware": hw.name,
        "time_unit": "1 us in the viewer = 1 memory-clock cycle",
        "tCK_ns": hw.timing.tCK_ns,
        "slice_cycles": slice_cycles(hw),
        "events": written,
        "truncated": bool(dropped),
        "dropped_events": dropped,
    }

    with _atomic_open(path, binary=True) as f:
        f.write(b'{"displayTimeUnit":"ns","traceEvents":[\n')
        f.write(",\n".join(json.dumps(m, separators=(",", ":")) for m in meta).encode())

        # Command-bus slices: four templates (single bank / bank set) x (MAC run / other).
        for single in (True, False):
            for mac in (False, True):
                sel = np.flatnonzero(((s_bank >= 0) == single) & (s_is_mac == mac))
                for a in range(0, sel.size, _CHUNK):
                    i = sel[a : a + _CHUNK]
                    pid = _pid_channel(s_ch[i])
                    parts: list[Any] = [
                        b',\n{"ph":"X","ts":', _Dec(s_ts[i]), b',"dur":', _Dec(s_dur[i]),
                        b',"pid":', _Dec(pid), b',"tid":', _Dec(pid * _TID_STRIDE),
                        b',"cat":"dram","name":"', _Lut(COMMANDS, s_cmd[i]),
                        b'","args":{"instr":', _Dec(s_instr[i]),
                    ]
                    if mac:
                        parts += [b',"count":', _Dec(s_count[i])]
                    if single:
                        parts += [b',"bank":', _Dec(s_bank[i])]
                    else:
                        parts += [b',"mask":"0x', _Hex(s_mask[i]), b'"']
                    parts += [b',"row":', _Dec(s_row[i]), b',"col":', _Dec(s_col[i]), b"}}"]
                    f.write(_format_rows(i.size, parts))

        # PIM-unit slices.
        for a in range(0, p_ts.size, _CHUNK):
            sl = slice(a, a + _CHUNK)
            r = p_run_k[sl]
            pid = _pid_channel(p_ch[sl])
            f.write(
                _format_rows(
                    r.size,
                    [
                        b',\n{"ph":"X","ts":', _Dec(p_ts[sl]), b',"dur":', _Dec(p_dur[sl]),
                        b',"pid":', _Dec(pid), b',"tid":', _Dec(pid * _TID_STRIDE + 1 + p_pu[sl]),
                        b',"cat":"pim","name":"MAC","args":{"instr":', _Dec(instr[first[r]]),
                        b',"count":', _Dec(last[r] - first[r] + 1),
                        b',"row":', _Dec(cols["row"][first[r]]), b',"col":', _Dec(cols["col"][first[r]]), b"}}",
                    ],
                )
            )

        # Host slices.
        names = list(op_names) if op_names is not None else None
        host_tid = host_pid * _TID_STRIDE
        out = []
        for e, ts, dur in zip(host_k, h_ts.tolist(), h_dur.tolist()):
            op, kind = int(e["op"]), str(e["kind"])
            opname = names[op] if names is not None and 0 <= op < len(names) else f"op {op}"
            out.append(
                ',\n{"ph":"X","ts":%d,"dur":%d,"pid":%d,"tid":%d,"cat":%s,"name":%s,"args":%s}'
                % (ts, dur, host_pid, host_tid, json.dumps(kind), json.dumps(f"{kind} {opname}"),
                   json.dumps({"op": op, "kind": kind, "op_name": opname}, separators=(",", ":")))
            )
            if len(out) >= 65536:
                f.write("".join(out).encode())
                out.clear()
        f.write("".join(out).encode())
        f.write(b'\n],"otherData":')
        f.write(json.dumps(other, separators=(",", ":")).encode())
        f.write(b"}\n")
    return {"events": written, "dropped": dropped, "tracks": tracks}


# ----------------------------------------------------------------------------------------------
# 3. VCD waveform
# ----------------------------------------------------------------------------------------------
_VCD_UNITS = (("s", 10**15), ("ms", 10**12), ("us", 10**9), ("ns", 10**6), ("ps", 10**3), ("fs", 1))
_IDLE = "-"


def vcd_timescale(hw: Hardware) -> tuple[str, bool]:
    """The VCD timescale for 1 cycle = 1 timescale unit: (timescale, exact).

    exact is True when tCK is 1, 10 or 100 of a VCD unit (then the timescale is tCK itself and
    times in the viewer are real); otherwise the timescale is a nominal "1 ns" per cycle."""
    fs = hw.timing.tCK_ns * 1e6
    if abs(fs - round(fs)) < 1e-6:
        fs_i = int(round(fs))
        for unit, size in _VCD_UNITS:
            for mag in (1, 10, 100):
                if mag * size == fs_i:
                    return f"{mag} {unit}", True
    return "1 ns", False


def write_vcd(
    path: str | os.PathLike[str],
    log: np.ndarray,
    hw: Hardware,
    channels: Iterable[int] | None = None,
    max_cycles: int | None = None,
) -> int:
    """Write a VCD waveform (GTKWave) of the command buses and bank states; returns the number of
    value changes submitted to the writer (unchanged values are not repeated in the file).

    **1 cycle = 1 timescale unit**: the timescale is tCK when VCD can express it (1 ns for
    hbm2-pim, 10 ns for fpga-proto), else a nominal 1 ns per cycle (said in the $comment).
    Per channel c, scope ``ch<c>`` holds

    * ``cmd`` (string): the mnemonic during the command's bus cycle, "-" when the bus is idle;
    * ``instr`` (integer): index of the instruction that issued the last command;
    * ``bank<b>`` (integer, b = bank within the channel): the open row, -1 when precharged
      (all banks start precharged; ACT opens, PRE and REF close).

    `channels` restricts the channels dumped (default all); `max_cycles` keeps the changes at
    cycles < max_cycles. Bank states are derived from the whole log, so a window is exact.
    """
    import vcd  # pyvcd

    log = _check_log(log, hw)
    org = hw.organization
    chans = list(range(org.channels)) if channels is None else sorted({int(c) for c in channels})
    for c in chans:
        if not 0 <= c < org.channels:
            raise ValueError(f"channel {c} out of range 0..{org.channels - 1}")
    sel = np.isin(log["channel"], chans)
    if max_cycles is not None:
        sel &= log["cycle"] < max_cycles
    sub = log[sel]
    order = _order_by(sub["channel"], sub["cycle"])
    if order is not None:
        sub = sub[order]
    cyc = sub["cycle"].astype(np.int64)
    ch = sub["channel"].astype(np.int64)
    cmd = sub["command"].astype(np.int64)
    n = cyc.size
    bpc = org.banks_per_channel
    slot = {c: k for k, c in enumerate(chans)}
    # Variable ids: per selected channel k: k*(2+bpc) + 0 = cmd, +1 = instr, +2+b = bank b.
    stride = 2 + bpc
    vbase = np.zeros(org.channels, dtype=np.int64)
    for c, k in slot.items():
        vbase[c] = k * stride
    base = vbase[ch]

    # Value changes as (time, var, value); string values index STRINGS.
    strings = list(COMMANDS) + [_IDLE]
    idle = len(COMMANDS)
    t_parts = [cyc, cyc]
    v_parts = [base, base + 1]
    x_parts = [cmd, sub["instr"].astype(np.int64)]
    # Bus back to idle one cycle after a command, unless the next command is then.
    nxt_same = np.zeros(n, dtype=bool)
    if n > 1:
        nxt_same[:-1] = (ch[1:] == ch[:-1]) & (cyc[1:] == cyc[:-1] + 1)
    gi = np.flatnonzero(~nxt_same)
    t_parts.append(cyc[gi] + 1)
    v_parts.append(base[gi])
    x_parts.append(np.full(gi.size, idle, dtype=np.int64))
    # Bank states.
    st = np.flatnonzero(np.isin(cmd, (_ACT, _PRE, _REF)))
    if st.size:
        src, unit, _ = _expand(sub["command"][st], sub["bank"][st], sub["mask"][st], hw, ref_per_rank=False)
        ok = unit >= 0
        src, unit = src[ok], unit[ok]
        rows = st[src]
        t_parts.append(cyc[rows])
        v_parts.append(base[rows] + 2 + unit)
        x_parts.append(np.where(cmd[rows] == _ACT, sub["row"][rows].astype(np.int64), -1))
    t = np.concatenate(t_parts)
    v = np.concatenate(v_parts)
    x = np.concatenate(x_parts)
    if max_cycles is not None:
        keep = t < max_cycles
        t, v, x = t[keep], v[keep], x[keep]
    o = np.argsort(t, kind="stable")
    t, v, x = t[o], v[o], x[o]
    end = int(max_cycles) if max_cycles is not None else (int(t[-1]) + 1 if t.size else 1)

    timescale, exact = vcd_timescale(hw)
    comment = (
        f"pimsat sim.traces: {hw.name}; 1 cycle = 1 timescale unit "
        f"(tCK = {hw.timing.tCK_ns} ns{'' if exact else '; timescale nominal'}); "
        f"bank<b> = open row or -1 when precharged"
    )
    changes = 0
    with _atomic_open(path, binary=False) as f:
        with vcd.VCDWriter(f, timescale=timescale, date="", comment=comment, version="pimsat") as w:
            variables: list[Any] = []
            is_str: list[bool] = []
            for c in chans:
                scope = f"ch{c}"
                variables.append(w.register_var(scope, "cmd", "string", init=_IDLE))
                variables.append(w.register_var(scope, "instr", "integer", size=32, init=-1))
                is_str += [True, False]
                for b in range(bpc):
                    variables.append(w.register_var(scope, f"bank{b}", "integer", size=32, init=-1))
                    is_str.append(False)
            for tt, vv, xx in zip(t.tolist(), v.tolist(), x.tolist()):
                w.change(variables[vv], tt, strings[xx] if is_str[vv] else xx)
                changes += 1
            w.close(end)
    return changes
