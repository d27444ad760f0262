"""VCD waveform (:func:`write_vcd`) of the command buses and bank states, for GTKWave.

**1 cycle = 1 timescale unit.**
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

import numpy as np

from hwmodel.model import COMMANDS, Hardware

from .trace_common import _ACT, _GENERATOR, _PRE, _REF, _atomic_open, _by_channel_cycle, _check_log, _expand

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
    sub = _by_channel_cycle(sub)
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
        f"{_GENERATOR}: {hw.name}; 1 cycle = 1 timescale unit "
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
