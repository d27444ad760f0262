"""The timing table of a `Hardware`, compiled into flat integer arrays for the channel kernel.

Scopes and *units*: every channel has NU = banks + bank groups + ranks + 1 units; a command's
last issue time is kept per (command, unit). Unit u < NB is bank u, NB + g bank group g,
NB + NG + r rank r, and NB + NG + NR the channel. A command touching bank set S is recorded
once in every bank of S, once in every bank group and rank S touches, and once in the channel
(so an all-bank command counts once for bank_group / rank / channel rows). WRGB touches no
bank but all bank groups, ranks and the channel (the global buffer and data bus are channel-wide).

A row with window N (tFAW) keeps, per unit, a ring of the N most recent issue times of `prev`.

Sweep spacing: within a sweep of command c the commands follow at
``gap[c] = max(1, latency of every non-window row c->c)`` (one command per bus cycle), later
than that only where a global-buffer burst is not ready yet (MAC) or a window row c->c binds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hwmodel.model import COMMANDS, SCOPES, Hardware, completion_cycles

from .channel import (
    HWP_ACC,
    HWP_BPB,
    HWP_BUSREC,
    HWP_GB,
    HWP_LEN,
    HWP_MAXGAP,
    HWP_MAXP,
    HWP_MAXPULL,
    HWP_NB,
    HWP_NCOL,
    HWP_NG,
    HWP_NPU,
    HWP_NR,
    HWP_NROW,
    HWP_NU,
    HWP_PERBANK,
    HWP_R,
    HWP_SYNC,
    HWP_TGB,
    HWP_TREFI,
)

CMD = {c: i for i, c in enumerate(COMMANDS)}
NCMD = len(COMMANDS)
SCOPE = {s: i for i, s in enumerate(SCOPES)}

# Stall reasons beyond the table rows (index R + k; see channel.R_*).
EXTRA_REASONS = (
    "sync",
    "stamp",
    "WRGB->MAC global-buffer burst tGB",
    "REF pulled-in credit",
    "the other pseudo-channel's command on the shared bus",
)


def constraint_name(c) -> str:
    lat = c.latency if isinstance(c.latency, str) else str(c.latency)
    name = f"{c.prev}->{c.next} {c.scope} {lat}"
    return name + (f" (window {c.window})" if c.window else "")


@dataclass(frozen=True)
class TimingTables:
    """Flat arrays of one hardware's timing table (shared by every channel)."""

    names: tuple[str, ...]  # row names, then EXTRA_REASONS
    prev: np.ndarray  # [R] command index
    nxt: np.ndarray  # [R]
    scope: np.ndarray  # [R] 0 bank, 1 bank_group, 2 rank, 3 channel
    lat: np.ndarray  # [R] latency in cycles
    win: np.ndarray  # [R] window N (0 = none)
    wbase: np.ndarray  # [R] offset of the row's rings in the ring array
    ring_size: int
    rows_start: np.ndarray  # [NCMD+1] rows with next == c are rows_idx[rows_start[c]:rows_start[c+1]]
    rows_idx: np.ndarray
    gap: np.ndarray  # [NCMD] sweep spacing
    gap_row: np.ndarray  # [NCMD] row that sets it (-1: the bus)
    self_win: np.ndarray  # [NCMD] 1 if a window row c->c exists
    wprev: np.ndarray  # [NCMD] 1 if a window row has prev == c
    completion: np.ndarray  # [NCMD]
    bg_of: np.ndarray  # [NB]
    rank_of: np.ndarray  # [NB]
    pu_of: np.ndarray  # [NB]
    hwp: np.ndarray  # scalar parameters, see HWP_*

    @property
    def rows(self) -> int:
        return len(self.prev)


_CACHE: dict[str, TimingTables] = {}
_CACHE_SIZE = 16  # the tables of the last few devices: a long-lived sweep worker sees many


def compile_tables(hw: Hardware) -> TimingTables:
    key = hw.model_dump_json()
    tables = _CACHE.pop(key, None)
    if tables is None:
        tables = _compile(hw)
    _CACHE[key] = tables  # most recent last
    while len(_CACHE) > _CACHE_SIZE:
        _CACHE.pop(next(iter(_CACHE)))
    return tables


def _compile(hw: Hardware) -> TimingTables:
    org, t = hw.organization, hw.timing
    nb, ng, nr = org.banks_per_channel, org.ranks * org.bank_groups, org.ranks
    nu = nb + ng + nr + 1
    cons = list(t.constraints)
    R = len(cons)
    prev = np.array([CMD[c.prev] for c in cons], dtype=np.int64)
    nxt = np.array([CMD[c.next] for c in cons], dtype=np.int64)
    scope = np.array([SCOPE[c.scope] for c in cons], dtype=np.int64)
    # a unit with fewer lanes than a burst has elements needs several passes per MAC: the
    # MAC->MAC spacing is the hardware's mac_interval (tMAC x passes), not tMAC alone (the row of
    # tMAC; the read-to-read rows tCCD_L and tCCD_S hold as written)
    lat = np.array(
        [hw.mac_interval if (c.prev, c.next, c.latency) == ("MAC", "MAC", "tMAC") else t.latency_of(c) for c in cons],
        dtype=np.int64,
    )
    win = np.array([c.window or 0 for c in cons], dtype=np.int64)
    wbase = np.zeros(R, dtype=np.int64)
    size = 0
    for k in range(R):
        if win[k]:
            wbase[k] = size
            size += nu * int(win[k])
    order = np.argsort(nxt, kind="stable")
    rows_start = np.searchsorted(nxt[order], np.arange(NCMD + 1)).astype(np.int64)
    gap = np.ones(NCMD, dtype=np.int64)
    gap_row = np.full(NCMD, -1, dtype=np.int64)
    self_win = np.zeros(NCMD, dtype=np.int64)
    wprev = np.zeros(NCMD, dtype=np.int64)
    for k in range(R):
        if win[k]:
            wprev[prev[k]] = 1
        if prev[k] == nxt[k]:
            if win[k]:
                self_win[prev[k]] = 1
            elif lat[k] > gap[prev[k]]:
                gap[prev[k]] = lat[k]
                gap_row[prev[k]] = k
    done = completion_cycles(hw.timing)
    completion = np.array([done[c] for c in COMMANDS], dtype=np.int64)
    banks = np.arange(nb)
    hwp = np.zeros(HWP_LEN, dtype=np.int64)
    hwp[[HWP_NB, HWP_NG, HWP_NR, HWP_NPU, HWP_NU, HWP_NCOL, HWP_NROW, HWP_GB, HWP_ACC]] = (
        nb,
        ng,
        nr,
        hw.pus_per_channel,
        nu,
        org.columns,
        org.rows,
        hw.gb_bursts,
        hw.pim.acc_registers,
    )
    hwp[HWP_TREFI] = t.p("tREFI")
    hwp[HWP_MAXP] = t.max_postponed_refresh
    hwp[HWP_MAXPULL] = t.max_pulled_in_refresh
    hwp[HWP_MAXGAP] = t.max_refresh_interval
    hwp[HWP_PERBANK] = int(t.refresh_mode == "per_bank")
    hwp[HWP_BUSREC] = int(org.shared_bus)  # record bus occupancy: pairs are checked after the run
    hwp[HWP_SYNC] = hw.host.sync_cycles
    hwp[HWP_TGB] = t.p("tGB")
    hwp[HWP_R] = R
    hwp[HWP_BPB] = org.burst_bytes
    return TimingTables(
        names=tuple(constraint_name(c) for c in cons) + EXTRA_REASONS,
        prev=prev,
        nxt=nxt,
        scope=scope,
        lat=lat,
        win=win,
        wbase=wbase,
        ring_size=max(size, 1),
        rows_start=rows_start,
        rows_idx=order.astype(np.int64),
        gap=gap,
        gap_row=gap_row,
        self_win=self_win,
        wprev=wprev,
        completion=completion,
        bg_of=np.array([org.bank_group_of(int(b)) for b in banks], dtype=np.int64),
        rank_of=np.array([org.rank_of(int(b)) for b in banks], dtype=np.int64),
        pu_of=np.array([hw.pu_of(int(b)) for b in banks], dtype=np.int64),
        hwp=hwp,
    )
