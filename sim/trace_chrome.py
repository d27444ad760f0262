"""Chrome trace-event JSON (:func:`write_chrome_trace`) for ui.perfetto.dev and chrome://tracing.

**1 us in the viewer = 1 memory-clock cycle** (``ts`` = cycle, exact integers).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from hwmodel.model import COMMANDS, Hardware

from .trace_common import (
    _CHUNK,
    _GENERATOR,
    _MAC,
    _atomic_open,
    _by_channel_cycle,
    _check_host,
    _check_log,
    _Dec,
    _expand,
    _format_rows,
    _Hex,
    _Lut,
)

# Default cap on the slices of a Chrome trace: viewers become sluggish beyond a few million.
DEFAULT_MAX_EVENTS = 1_000_000
# Track ids: Perfetto keys threads by tid, so tids are made globally unique (pid * stride + k).
_TID_STRIDE = 10_000


def slice_cycles(hw: Hardware) -> dict[str, int]:
    """Length in cycles of one command's slice in the Chrome trace: its occupancy of the channel.

    1 cycle (a command-bus slot) for ACT, PRE, REF and REFSB; BL2 (one burst on the data bus) for the
    commands that move a burst: RD, WR, WRGB, RDACC; the MAC interval (the unit's time per MAC)
    for MAC. Slices are clipped at the next slice of their track so tracks never overlap."""
    burst = max(1, hw.timing.p("BL2"))
    one = {
        "ACT": 1,
        "PRE": 1,
        "REF": 1,
        "REFSB": 1,
        "RD": burst,
        "WR": burst,
        "WRGB": burst,
        "RDACC": burst,
        "MAC": max(1, hw.mac_interval),
    }
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
    srt = _by_channel_cycle(log)
    cyc, ch, cmd = srt["cycle"], srt["channel"], srt["command"]
    bank, mask, instr = srt["bank"], srt["mask"], srt["instr"]
    n = cyc.size
    is_mac = cmd == _MAC
    cont = np.zeros(n, dtype=bool)
    if n > 1:
        cont[1:] = (
            is_mac[1:]
            & is_mac[:-1]
            & (ch[1:] == ch[:-1])
            & (instr[1:] == instr[:-1])
            & (bank[1:] == bank[:-1])
            & (mask[1:] == mask[:-1])
        )
    first = np.flatnonzero(~cont)
    last = np.append(first[1:], n)[: first.size] - 1
    s_count = last - first + 1
    s_ts = cyc[first].astype(np.int64)
    s_end = cyc[last].astype(np.int64) + occ[cmd[first]]
    s_ch = ch[first].astype(np.int64)
    s_dur = _clip_to_next(s_ch, s_ts, s_end)
    s_cmd, s_bank, s_mask = cmd[first], bank[first], mask[first]
    s_row, s_col, s_instr = srt["row"][first], srt["col"][first], instr[first]
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
        s_keep, s_ts, s_dur, s_ch, s_cmd, s_bank, s_mask, s_row, s_col, s_instr, s_count, s_is_mac
    )
    p_run_k, p_pu, p_ch, p_ts, p_dur = pick(p_keep, p_run, p_pu, p_ch, p_ts, p_dur)
    host_k, h_ts, h_dur = pick(h_keep, host, h_ts, h_dur)

    # --- metadata: processes and threads ------------------------------------------------------
    host_pid = org.channels + 1
    meta: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": host_pid, "args": {"name": "host"}},
        {"ph": "M", "name": "process_sort_index", "pid": host_pid, "args": {"sort_index": 0}},
        {
            "ph": "M",
            "name": "thread_name",
            "pid": host_pid,
            "tid": host_pid * _TID_STRIDE,
            "args": {"name": "host unit"},
        },
    ]
    tracks = 1
    for c in range(org.channels):
        pid = _pid_channel(c)
        meta += [
            {"ph": "M", "name": "process_name", "pid": pid, "args": {"name": f"channel {c}"}},
            {"ph": "M", "name": "process_sort_index", "pid": pid, "args": {"sort_index": pid}},
            {"ph": "M", "name": "thread_name", "pid": pid, "tid": pid * _TID_STRIDE, "args": {"name": "command bus"}},
            {"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": pid * _TID_STRIDE, "args": {"sort_index": 0}},
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
        "generator": _GENERATOR,
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
                        b',\n{"ph":"X","ts":',
                        _Dec(s_ts[i]),
                        b',"dur":',
                        _Dec(s_dur[i]),
                        b',"pid":',
                        _Dec(pid),
                        b',"tid":',
                        _Dec(pid * _TID_STRIDE),
                        b',"cat":"dram","name":"',
                        _Lut(COMMANDS, s_cmd[i]),
                        b'","args":{"instr":',
                        _Dec(s_instr[i]),
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
                        b',\n{"ph":"X","ts":',
                        _Dec(p_ts[sl]),
                        b',"dur":',
                        _Dec(p_dur[sl]),
                        b',"pid":',
                        _Dec(pid),
                        b',"tid":',
                        _Dec(pid * _TID_STRIDE + 1 + p_pu[sl]),
                        b',"cat":"pim","name":"MAC","args":{"instr":',
                        _Dec(instr[first[r]]),
                        b',"count":',
                        _Dec(last[r] - first[r] + 1),
                        b',"row":',
                        _Dec(srt["row"][first[r]]),
                        b',"col":',
                        _Dec(srt["col"][first[r]]),
                        b"}}",
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
                % (
                    ts,
                    dur,
                    host_pid,
                    host_tid,
                    json.dumps(kind),
                    json.dumps(f"{kind} {opname}"),
                    json.dumps({"op": op, "kind": kind, "op_name": opname}, separators=(",", ":")),
                )
            )
            if len(out) >= 65536:
                f.write("".join(out).encode())
                out.clear()
        f.write("".join(out).encode())
        f.write(b'\n],"otherData":')
        f.write(json.dumps(other, separators=(",", ":")).encode())
        f.write(b"}\n")
    return {"events": written, "dropped": dropped, "tracks": tracks}
