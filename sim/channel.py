"""The channel kernel: executes one channel's instruction table command by command.

`run_channel` issues instructions from position st[ST_POS] until the stream ends (returns
DONE), a WAIT finds its signal unset (BLOCKED; st[ST_BLOCK] = the dense signal index), or a
violation (ERROR; `err` holds the details, see E_* and ERR_*; ERR_INSTR indexes the table, add
st[ST_BASE] for the stream index). It is written in the subset of
Python that numba compiles (flat int64 arrays, scalars); without numba it runs as is.

Issue rule of one instruction (see sim/__init__ for the ISA-level description):
  ready    = previous command's cycle + 1 (one command per cycle on the bus, in stream order)
  earliest = max(ready, WAIT release, every timing row next=c over the units touched,
                 global-buffer burst readiness for MAC)
  stamped instructions issue their first command exactly at the stamp, which must be >= each
  of these bounds; unstamped ones at `earliest`.
Commands 2.. of a sweep follow at t_prev + gap[c] (or later while a global-buffer burst is not
ready, or a window row c->c binds). Constraints from commands before the sweep are the same for
every command of the sweep (same command, same banks), so checking the first one suffices.
"""

from __future__ import annotations

import numpy as np

from hwmodel.model import COMMANDS

from .jit import njit
from .result import LOG_DTYPE

# ---- the table layout of hwmodel/table.py, and the kernel's own constants -------------------------
# Defined here, not imported: numba's on-disk cache is keyed on this file only, so every constant
# the kernel reads must live in it (the layout ones are checked against hwmodel/table.py below).
ACT, PRE, RD, WR, REF, MAC, WRGB, RDACC, REFSB = range(9)
NCMD = 9
assert COMMANDS == ("ACT", "PRE", "RD", "WR", "REF", "MAC", "WRGB", "RDACC", "REFSB"), "update the kernel's commands"
OP_HOP, OP_SIG, OP_WAIT, OP_EPI, OP_HMV, OP_LAUNCH = 9, 10, 11, 12, 13, 14
# instruction table columns (see encode.py)
(C_OP, C_STAMP, C_MASK, C_ROW, C_COL, C_N, C_GB, C_ACC, C_CNT, C_BANK, C_SYM) = range(11)
WIDTH = 11


def _check_layout() -> None:
    """The kernel's copy of the table layout equals hwmodel/table.py's (the definition)."""
    from hwmodel.table import LAYOUT

    mine = {k: v for k, v in globals().items() if k in LAYOUT}  # (NCMD: the count of commands)
    assert mine == LAYOUT, f"sim/channel.py's table layout differs from hwmodel/table.py: {mine} != {LAYOUT}"


_check_layout()
# hardware scalars (see timing.py)
(
    HWP_NB,
    HWP_NG,
    HWP_NR,
    HWP_NPU,
    HWP_NU,
    HWP_NCOL,
    HWP_NROW,
    HWP_GB,
    HWP_ACC,
    HWP_TREFI,
    HWP_MAXP,
    HWP_SYNC,
    HWP_RECORD,
    HWP_TGB,
    HWP_R,
    HWP_BPB,
    HWP_MAXPULL,
    HWP_MAXGAP,
    HWP_PERBANK,
    HWP_BUSREC,
    HWP_BUSY,
    HWP_ACTW,
    HWP_WALK,
) = range(23)
HWP_LEN = 23
# HWP_BUSY: records in `busy`, a partner's bus occupancy (the timing oracle's pair timing: the
# channel's commands yield to it, hwmodel/bus.py); HWP_ACTW: cycles an ACT holds the row bus
# HWP_WALK: 1 reads every timing row unit by unit (no LATEST shortcut; the tests compare the two)
# stall reasons after the table rows (index R + k)
R_SYNC, R_STAMP, R_GB, R_REFCREDIT, R_PAIRBUS = 0, 1, 2, 3, 4
N_REASONS = 5

NEG = -(1 << 50)
# `last` holds, after the NCMD * NU per-unit times, LATEST values per command: the cycle of its
# latest issue, the bank, bank-group and rank masks it touched (before any: NEG and all units),
# and a flag: 1 while the per-unit times of those units lag that cycle. A run of one command on
# the same banks (a MAC after a MAC, one burst each) updates only the cycle; the per-unit times
# are written (`_settle`) when the command next goes to other banks, or before an error's
# unit-by-unit walk. Until then no read needs them: a row whose previous command is this one is
# read from the latest issue when the reader shares a unit with the run, else from units the run
# did not touch.
LATEST = 5
DONE, BLOCKED, ERROR, FULL = 0, 1, 2, 3
# FULL: the bus-occupancy buffer `occ` has no room for the next instruction's records (HWP_BUSREC
# devices only); `call` drains it and runs on. Records: OCC_WIDTH int64s each (hwmodel/bus.py:
# first cycle, step, commands, stream index of the instruction, command), st[ST_NOCC] of them.
OCC_WIDTH = 5
# scalar state
# ST_POS indexes the table passed in; ST_BASE is that table's first instruction in the whole stream
# (a stream may be fed a slice at a time): openinstr and the log hold stream indices
# ST_OPEN: bitmask of the banks with an open row (openrow[b] >= 0)
# Refresh is counted per bank, outside st: brefs[b] refreshes of bank b (a REF counts for every
# bank, a REFSB for its own), blastref[b] the cycle of its last one (0 before the first: the
# program starts refreshed).
(
    ST_POS,
    ST_BUS,
    ST_PREV,
    ST_MAXDONE,
    ST_WAIT,
    ST_LOG,
    ST_BLOCK,
    ST_BASE,
    ST_OPEN,
    ST_NOCC,
    ST_BUSYR,
    ST_BUSYC,
    ST_OCCWHOLE,
    ST_OCCLAST,
    ST_SEEN,
) = range(15)
ST_LEN = 15  # ST_BUSYR / ST_BUSYC: the first record of `busy` on the row / column bus not yet behind
# ST_OCCWHOLE: 1 if the buffer's last record holds whole instructions (from the first command of
# its instruction O_INSTR to the last of ST_OCCLAST, the ones between in stream order). The next
# instruction, if it is ST_OCCLAST + 1, of the same command and its sweep continues the record's
# progression, joins it (a MAC every 4 cycles over many one-MAC instructions is one record); a
# collision's instruction is then found by counting commands from O_INSTR (sim/pairs.py).
# ST_SEEN: bitmask of the commands the channel has met so far; the binding candidates (bstart,
# bidx: see _bind_rows) are the timing rows that can bind once those commands have issued.
# error codes
(
    E_NONE,
    E_TIMING,
    E_BUS,
    E_SYNC,
    E_CLOSED,
    E_OPEN,
    E_REFOPEN,
    E_PU,
    E_RANGE,
    E_REFLATE,
    E_SIGTWICE,
    E_STREAM,
    E_GB,
    E_REFEARLY,
    E_REFGAP,
    E_NOPERBANK,
) = range(16)
# err array slots
ERR_CODE, ERR_CYCLE, ERR_BANK, ERR_INSTR, ERR_ROW, ERR_NEEDED, ERR_ACTUAL, ERR_X1, ERR_X2 = range(9)
ERR_LEN = 9
# E_RANGE field codes (ERR_X1)
F_BANK, F_MASK, F_ROW, F_COL, F_GB, F_ACC, F_COUNT = range(7)


@njit(inline=True)
def _units(s, mask, gmask, rmask, nb, ng, nr, tz):
    """(first unit, unit bitmask from that unit) of scope s for a command touching mask / gmask /
    rmask; tz packs the index of each mask's lowest set bit (bank | group << 8 | rank << 16), so
    the walk over a mask's units starts at its first one."""
    if s == 0:
        t = tz & 255
        return t, mask >> t
    if s == 1:
        t = (tz >> 8) & 255
        return nb + t, gmask >> t
    if s == 2:
        t = tz >> 16
        return nb + ng + t, rmask >> t
    return nb + ng + nr, 1


@njit(inline=True)
def _requirement(
    c, mask, gmask, rmask, tz, hwp, last, ring, rhead, rows_start, rows_idx, prev, scope, lat, win, wbase, viol, t, fast
):
    """Earliest cycle the timing rows allow command c; binding row, unit, prev time. If t >= 0,
    also mark in viol[k] every row that t violates.

    fast: a row whose command p last issued on one of the units c touches is bound by that
    latest issue (issues only move forward, so it is the latest on every unit; see LATEST), read
    once instead of unit by unit. The earliest cycle and the binding row are the same either way;
    the unit and prev time reported are those of the slow walk only (errors take it)."""
    nb, ng, nr, nu = hwp[HWP_NB], hwp[HWP_NG], hwp[HWP_NR], hwp[HWP_NU]
    lp = NCMD * nu  # the LATEST records follow the per-unit times
    best, brow, bunit, bprev = NEG, -1, -1, NEG
    for j in range(rows_start[c], rows_start[c + 1]):
        k = rows_idx[j]
        p, L, w = prev[k], lat[k], win[k]
        s = scope[k]
        if fast and w == 0:
            q = lp + p * LATEST
            if s == 3:
                hit = True
            elif s == 0:
                hit = (mask & last[q + 1]) != 0
            elif s == 1:
                hit = (gmask & last[q + 2]) != 0
            else:
                hit = (rmask & last[q + 3]) != 0
            if hit:
                tp = last[q]
                r = tp + L
                if r > best:
                    best, brow, bunit, bprev = r, k, -1, tp
                if t >= 0 and r > t:
                    viol[k] = 1
                continue
        lo, m = _units(s, mask, gmask, rmask, nb, ng, nr, tz)
        u = lo
        while m:
            if m & 1:
                if w == 0:
                    tp = last[p * nu + u]
                else:
                    tp = ring[wbase[k] + u * w + rhead[k * nu + u]]
                r = tp + L
                if r > best:
                    best, brow, bunit, bprev = r, k, u, tp
                if t >= 0 and r > t:
                    viol[k] = 1
            m >>= 1
            u += 1
    return best, brow, bunit, bprev


@njit
def _bind_rows(seen, rows_start, rows_idx, prev, scope, lat, win, bstart, bidx):
    """The rows that can bind an earliest cycle once the commands of bitmask `seen` may have
    issued: bidx[bstart[c]:bstart[c + 1]] for command c, in the table's order. A row is left out
    if its earlier command is not in `seen` (its time is NEG: it cannot bind), or if another row
    of c with the same earlier command, no window, a scope containing its scope (a command's
    latest issue over a scope is at least its latest over a scope inside it) and a longer latency
    (or the same, coming first) is kept: that row's requirement is never below this one's, and
    the first row reaching the maximum is kept, so the earliest cycle and the binding row are
    those of every row. Errors walk every row (rows_start, rows_idx). Runs once per new command
    of a channel (on hbm2-pim, plain DRAM traffic reads 7 of RD's 11 rows, a PIM program 10)."""
    j = 0
    for c in range(NCMD):
        bstart[c] = j
        for i in range(rows_start[c], rows_start[c + 1]):
            k = rows_idx[i]
            if not (seen >> prev[k]) & 1:
                continue
            kept = True
            if win[k] == 0:
                for i2 in range(rows_start[c], rows_start[c + 1]):
                    k2 = rows_idx[i2]
                    if (
                        i2 != i
                        and win[k2] == 0
                        and prev[k2] == prev[k]
                        and scope[k2] >= scope[k]
                        and (lat[k2] > lat[k] or (lat[k2] == lat[k] and i2 < i))
                    ):
                        kept = False
                        break
            if kept:
                bidx[j] = k
                j += 1
    bstart[NCMD] = j


@njit(inline=True)
def _push(c, mask, gmask, rmask, tz, t, hwp, last, ring, rhead, prev, scope, win, wbase, wprev, wlo, whi):
    """Record command c issued at t in every unit it touches (and in window rings)."""
    nb, ng, nr, nu = hwp[HWP_NB], hwp[HWP_NG], hwp[HWP_NR], hwp[HWP_NU]
    one = mask & (mask - 1) | gmask & (gmask - 1) | rmask & (rmask - 1)
    if one == 0 and mask != 0 and gmask != 0 and rmask != 0:  # one bank (per-command traffic): no walk
        q = c * nu
        last[q + (tz & 255)] = t
        last[q + nb + ((tz >> 8) & 255)] = t
        last[q + nb + ng + (tz >> 16)] = t
        last[q + nb + ng + nr] = t
    else:
        for s in range(4):
            lo, m = _units(s, mask, gmask, rmask, nb, ng, nr, tz)
            u = lo
            while m:
                if m & 1:
                    last[c * nu + u] = t
                m >>= 1
                u += 1
    q = NCMD * nu + c * LATEST
    last[q], last[q + 1], last[q + 2], last[q + 3] = t, mask, gmask, rmask
    if wprev[c]:
        _push_windows(c, mask, gmask, rmask, tz, t, hwp, ring, rhead, prev, scope, win, wbase, wlo, whi)


@njit(inline=True)
def _settle(c, hwp, last):
    """Write command c's latest issue into the per-unit times of the units it touched (LATEST).
    (Its unit walk repeats `_push`'s on purpose: one inline helper for both made the compiled
    kernel 23-25 % slower, naive and greedy, bench/kernel_digest.py --channels 64 --reps 9.)"""
    nb, ng, nr, nu = hwp[HWP_NB], hwp[HWP_NG], hwp[HWP_NR], hwp[HWP_NU]
    q = NCMD * nu + c * LATEST
    t, mask, gmask, rmask = last[q], last[q + 1], last[q + 2], last[q + 3]
    tz = (_lowest(mask) if mask else 0) | (_lowest(gmask) << 8 if gmask else 0) | (_lowest(rmask) << 16 if rmask else 0)
    for s in range(4):
        lo, m = _units(s, mask, gmask, rmask, nb, ng, nr, tz)
        u = lo
        while m:
            if m & 1:
                last[c * nu + u] = t
            m >>= 1
            u += 1
    last[q + 4] = 0


@njit
def _settle_all(hwp, last):
    nu = hwp[HWP_NU]
    for c in range(NCMD):
        if last[NCMD * nu + c * LATEST + 4]:
            _settle(c, hwp, last)


@njit
def _push_windows(c, mask, gmask, rmask, tz, t, hwp, ring, rhead, prev, scope, win, wbase, wlo, whi):
    """Record command c issued at t in the window rings of the rows it starts (a separate
    function: only a few commands start windows, and the loop inlined into `_push` made every
    command about twice as slow)."""
    nb, ng, nr, nu = hwp[HWP_NB], hwp[HWP_NG], hwp[HWP_NR], hwp[HWP_NU]
    for k in range(wlo, whi):  # (the window rows are among these)
        w = win[k]
        if w == 0 or prev[k] != c:
            continue
        lo, m = _units(scope[k], mask, gmask, rmask, nb, ng, nr, tz)
        u = lo
        while m:
            if m & 1:
                h = rhead[k * nu + u]
                ring[wbase[k] + u * w + h] = t
                rhead[k * nu + u] = (h + 1) % w
            m >>= 1
            u += 1


@njit
def _access_stats(mask, c, n, nb, firstacc, bbursts, hits, misses, pumacs, pu_of):
    """Add n bursts of command c (RD, WR or MAC) to every bank of mask: bursts, row hits and
    misses (the first access after an ACT misses), PIM-unit MACs."""
    if n == 0:
        return
    m = mask
    b = 0
    while m:  # the banks of mask, lowest first
        if m & 1:
            bbursts[b] += n
            if firstacc[b]:
                misses[b] += 1
                hits[b] += n - 1
                firstacc[b] = 0
            else:
                hits[b] += n
            if c == MAC:
                pumacs[pu_of[b]] += n
        m >>= 1
        b += 1


@njit(inline=True)
def max_(a, b):
    """max(a, b) of two integers (the builtin links numba.cpython.builtins into the kernel)."""
    return a if a >= b else b


@njit(inline=True)
def min_(a, b):
    """min(a, b) of two integers."""
    return a if a <= b else b


@njit(inline=True)
def _lowest(m):
    """Index of the lowest set bit of m (m != 0)."""
    b = 0
    while ((m >> b) & 1) == 0:
        b += 1
    return b


@njit
def _skip(t, want, busy, n, actw, p):
    """From record p of `busy` on, the first record on bus `want` (1: row, 0: column) that does
    not end before t."""
    while p < n:
        c = busy[p * OCC_WIDTH + 4]
        onrow = 1 if (c == ACT or c == PRE or c == REF or c == REFSB) else 0
        if onrow == want:
            r0, rs, rn = busy[p * OCC_WIDTH], busy[p * OCC_WIDTH + 1], busy[p * OCC_WIDTH + 2]
            if r0 + (rn - 1) * rs + (actw if c == ACT else 1) - 1 >= t:
                return p
        p += 1
    return p


@njit
def _clash(t, w, want, busy, n, actw, p):
    """-1 if a command holding bus `want` (1: row, 0: column) cycles t..t+w-1 meets none of the
    records of `busy` from p on; else the first cycle after the element it meets."""
    while p < n:
        c = busy[p * OCC_WIDTH + 4]
        onrow = 1 if (c == ACT or c == PRE or c == REF or c == REFSB) else 0
        if onrow == want:
            r0, rs, rn = busy[p * OCC_WIDTH], busy[p * OCC_WIDTH + 1], busy[p * OCC_WIDTH + 2]
            if r0 > t + w - 1:
                return -1
            rw = actw if c == ACT else 1
            need = t - (rw - 1)  # the first element ending at or after t
            j = 0
            if rs != 0 and need > r0:
                j = (need - r0 + rs - 1) // rs
            # (a one-command record, rs = 0, may end before t: a later sweep element's query)
            if j < rn and r0 + j * rs + rw - 1 >= t and r0 + j * rs <= t + w - 1:
                return r0 + j * rs + rw
        p += 1
    return -1


@njit
def _yield_at(t, c, ncmd, g, gbi, gbready, busy, n, actw, st):
    """The first cycle >= t at which an instruction of ncmd commands c, at its sweep spacing g
    (later where a global-buffer burst is not ready yet), meets none of the partner's records in
    `busy` on its bus (a sweep's commands cannot wait one by one: the whole sweep moves). Queries
    come in increasing t per bus: st[ST_BUSYR / ST_BUSYC] skips the records behind."""
    want = 1 if (c == ACT or c == PRE or c == REF or c == REFSB) else 0
    slot = ST_BUSYR if want else ST_BUSYC
    w = actw if c == ACT else 1
    while True:
        p = _skip(t, want, busy, n, actw, st[slot])
        st[slot] = p
        nxt = _clash(t, w, want, busy, n, actw, p)
        if nxt >= 0:
            t = nxt
            continue
        tk = t
        bad = False
        for k in range(1, ncmd):
            tk += g
            if c == MAC and gbready[gbi + k] > tk:
                tk = gbready[gbi + k]
            if _clash(tk, 1, want, busy, n, actw, p) >= 0:
                bad = True
                break
        if not bad:
            return t
        t += 1


@njit(inline=True)
def _occ_put(occ, st, t0, step, n, instr, c):
    """Append one bus-occupancy record (the caller made room: see FULL)."""
    j = st[ST_NOCC] * OCC_WIDTH
    occ[j], occ[j + 1], occ[j + 2], occ[j + 3], occ[j + 4] = t0, step, n, instr, c
    st[ST_NOCC] += 1


@njit(inline=True)
def _occ_record(occ, st, t0, step, n, instr, c, whole):
    """The last record of an instruction: joined to the buffer's last record where that holds
    whole instructions up to this one's predecessor and the progression goes on (ST_OCCWHOLE),
    else appended. whole: the record starts at the instruction's first command."""
    j = (st[ST_NOCC] - 1) * OCC_WIDTH
    if whole and j >= 0 and st[ST_OCCWHOLE] and st[ST_OCCLAST] == instr - 1 and occ[j + 4] == c:
        a0, sa, na = occ[j], occ[j + 1], occ[j + 2]
        s = sa if na > 1 else t0 - a0
        if s > 0 and t0 == a0 + na * s and (n == 1 or step == s):
            occ[j + 1], occ[j + 2] = s, na + n
            st[ST_OCCLAST] = instr
            return
    _occ_put(occ, st, t0, step, n, instr, c)
    st[ST_OCCWHOLE] = 1 if whole else 0
    st[ST_OCCLAST] = instr


@njit(inline=True)
def _fail(err, code, cycle, bank, instr, row, needed, actual, x1, x2):
    err[ERR_CODE], err[ERR_CYCLE], err[ERR_BANK], err[ERR_INSTR] = code, cycle, bank, instr
    err[ERR_ROW], err[ERR_NEEDED], err[ERR_ACTUAL], err[ERR_X1], err[ERR_X2] = row, needed, actual, x1, x2
    return ERROR


@njit
def run_channel(
    prog,
    tprev,
    tnext,
    tscope,
    tlat,
    twin,
    twbase,
    rows_start,
    rows_idx,
    gap,
    gap_row,
    self_win,
    wprev,
    compl,
    bg_of,
    rank_of,
    pu_of,
    hwp,
    st,
    brefs,
    blastref,
    last,
    ring,
    rhead,
    openrow,
    openinstr,
    firstacc,
    gbready,
    sig,
    issue,
    lastc,
    done,
    counts,
    bbursts,
    pumacs,
    hits,
    misses,
    stall,
    viol,
    lcyc,
    lcmd,
    lbank,
    lmask,
    lrow,
    lcol,
    linstr,
    err,
    occ,
    busy,
    bstart,
    bidx,
):
    nb, ncol, nrow = hwp[HWP_NB], hwp[HWP_NCOL], hwp[HWP_NROW]
    ngb, nacc, trefi, maxp, sync, tgb = (
        hwp[HWP_GB],
        hwp[HWP_ACC],
        hwp[HWP_TREFI],
        hwp[HWP_MAXP],
        hwp[HWP_SYNC],
        hwp[HWP_TGB],
    )
    R, record, bpb = hwp[HWP_R], hwp[HWP_RECORD], hwp[HWP_BPB]
    busrec = hwp[HWP_BUSREC]
    occcap = occ.shape[0] // OCC_WIDTH
    nbusy, actw = hwp[HWP_BUSY], hwp[HWP_ACTW]
    fast = hwp[HWP_WALK] == 0
    # the rows an earliest cycle reads: the binding candidates (_bind_rows), or every row (walk)
    fstart = bstart if fast else rows_start
    fidx = bidx if fast else rows_idx
    lu = NCMD * hwp[HWP_NU]  # where the LATEST records start in `last`
    # the rows with a window (tFAW) are rows wlo..whi-1 or fewer (no array is made here: an
    # allocation, or a builtin such as max, links numba's numpy and builtin modules into the
    # kernel, and loading it from the cache would import them, ~0.1 s of start-up)
    wlo, whi = R, 0
    for k in range(R):
        if twin[k] != 0:
            wlo = min_(wlo, k)
            whi = k + 1
    n = prog.shape[0] // WIDTH
    pos = st[ST_POS]
    ibase = st[ST_BASE]
    openmask = st[ST_OPEN]
    # what a bank mask implies (bank groups, ranks, the first bank sharing a PIM unit with an
    # earlier one), kept for the last mask seen: runs of commands share their mask
    kmask, kgmask, krmask, kpu, ktz = -1, 0, 0, -1, 0
    amask, acmd, abursts = 0, -1, 0  # the run of accesses not yet in the per-bank statistics
    while pos < n:
        base = pos * WIDTH
        op = prog[base + C_OP]
        stamp = prog[base + C_STAMP]
        if op == OP_SIG:
            t = max_(st[ST_MAXDONE], st[ST_PREV] + 1)
            sid = prog[base + C_ROW]
            if sig[sid] >= 0:
                st[ST_POS] = pos
                return _fail(err, E_SIGTWICE, t, -1, pos, -1, 0, 0, sid, sig[sid])
            sig[sid] = t
            issue[pos], lastc[pos], done[pos] = t, t, t
            st[ST_PREV] = t
            pos += 1
            continue
        if op == OP_WAIT:
            sid = prog[base + C_ROW]
            if sig[sid] < 0:
                st[ST_POS] = pos
                st[ST_BLOCK] = sid
                _access_stats(amask, acmd, abursts, nb, firstacc, bbursts, hits, misses, pumacs, pu_of)
                return BLOCKED
            rel = sig[sid] + sync
            if rel > st[ST_WAIT]:
                st[ST_WAIT] = rel
            issue[pos], lastc[pos], done[pos] = rel, rel, rel
            st[ST_PREV] = rel
            pos += 1
            continue
        st[ST_POS] = pos
        # cycle named by state / range errors: the stamp, else the earliest the stream allows
        at = stamp if stamp >= 0 else max_(st[ST_BUS] + 1, st[ST_WAIT])
        if op > REFSB:
            return _fail(err, E_STREAM, at, -1, pos, -1, 0, 0, op, 0)
        if op == REFSB and hwp[HWP_PERBANK] == 0:
            return _fail(err, E_NOPERBANK, at, prog[base + C_BANK], pos, -1, 0, 0, 0, 0)
        c = op
        ncmd = prog[base + C_N]
        col = prog[base + C_COL]
        gbi = prog[base + C_GB]
        acc = prog[base + C_ACC]
        cnt = prog[base + C_CNT]
        bank = prog[base + C_BANK]
        # ---- target banks and static ranges ----------------------------------------------
        if bank >= 0:
            if bank >= nb:
                return _fail(err, E_RANGE, at, bank, pos, -1, 0, 0, F_BANK, nb)
            mask = 1 << bank
        else:
            mask = prog[base + C_MASK]
        if c != WRGB and (mask == 0 or (mask >> nb) != 0):
            return _fail(err, E_RANGE, at, -1, pos, -1, 0, 0, F_MASK, mask)
        if ncmd < 1 or cnt < 1:
            return _fail(err, E_RANGE, at, -1, pos, -1, 0, 0, F_COUNT, cnt)
        if c == WRGB:
            gmask = (1 << hwp[HWP_NG]) - 1
            rmask = (1 << hwp[HWP_NR]) - 1
            tz = _lowest(mask) if mask else 0  # (groups and ranks: all, from 0)
        else:
            if mask != kmask and (mask & (mask - 1)) == 0:  # one bank (per-command traffic): no walk
                b = bank if bank >= 0 else _lowest(mask)
                kmask, kgmask, krmask, kpu = mask, 1 << bg_of[b], 1 << rank_of[b], -1
                ktz = b | bg_of[b] << 8 | rank_of[b] << 16
            elif mask != kmask:
                kmask, kgmask, krmask, kpu = mask, 0, 0, -1
                pus = 0
                m = mask
                b = 0
                while m:  # the banks of mask, lowest first
                    if m & 1:
                        kgmask |= 1 << bg_of[b]
                        krmask |= 1 << rank_of[b]
                        if kpu < 0 and (pus >> pu_of[b]) & 1:
                            kpu = b
                        pus |= 1 << pu_of[b]
                    m >>= 1
                    b += 1
                ktz = _lowest(mask) | _lowest(kgmask) << 8 | _lowest(krmask) << 16
            gmask, rmask, tz = kgmask, krmask, ktz
        if c == ACT and prog[base + C_ROW] >= nrow:
            return _fail(err, E_RANGE, at, -1, pos, -1, 0, 0, F_ROW, nrow)
        if (c == RD or c == WR or c == MAC) and col + ncmd > ncol:
            return _fail(err, E_RANGE, at, -1, pos, -1, 0, 0, F_COL, ncol)
        if (c == MAC or c == WRGB) and gbi + ncmd > ngb:
            return _fail(err, E_RANGE, at, -1, pos, -1, 0, 0, F_GB, ngb)
        if (c == MAC and acc >= nacc) or (c == RDACC and acc + cnt > nacc):
            return _fail(err, E_RANGE, at, -1, pos, -1, 0, 0, F_ACC, nacc)
        # ---- bank state ---------------------------------------------------------------------
        bad = 0  # banks in the wrong state, the first of which is reported
        if c == ACT or c == REF or c == REFSB:
            bad = mask & openmask
        elif c == PRE or c == RD or c == WR or c == MAC:
            bad = mask & ~openmask
        b = -1
        if bad:
            b = _lowest(bad)
        if c == MAC and kpu >= 0 and (b < 0 or kpu < b):
            return _fail(err, E_PU, at, kpu, pos, -1, 0, 0, pu_of[kpu], 0)
        if b >= 0:
            if c == ACT:
                return _fail(err, E_OPEN, at, b, pos, -1, 0, 0, openrow[b], openinstr[b])
            if c == REF or c == REFSB:
                return _fail(err, E_REFOPEN, at, b, pos, -1, 0, 0, openrow[b], openinstr[b])
            return _fail(err, E_CLOSED, at, b, pos, -1, 0, 0, 0, 0)
        if busrec and st[ST_NOCC] + ncmd > occcap:  # (nothing of this instruction done yet)
            _access_stats(amask, acmd, abursts, nb, firstacc, bbursts, hits, misses, pumacs, pu_of)
            return FULL
        # ---- first command: earliest legal cycle ------------------------------------------
        ready = st[ST_BUS] + 1
        if fast and not (st[ST_SEEN] >> c) & 1:  # a command new to the channel: its rows can bind
            st[ST_SEEN] |= 1 << c
            _bind_rows(st[ST_SEEN], rows_start, rows_idx, tprev, tscope, tlat, twin, bstart, bidx)
        req, brow, bunit, bprev = _requirement(
            c,
            mask,
            gmask,
            rmask,
            tz,
            hwp,
            last,
            ring,
            rhead,
            fstart,
            fidx,
            tprev,
            tscope,
            tlat,
            twin,
            twbase,
            viol,
            -1,
            fast,
        )
        gbneed = NEG
        if c == MAC:
            gbneed = gbready[gbi]
        earliest = ready
        reason = -1
        if st[ST_WAIT] > earliest:
            earliest, reason = st[ST_WAIT], R + R_SYNC
        if req > earliest:
            earliest, reason = req, brow
        if gbneed > earliest:
            earliest, reason = gbneed, R + R_GB
        if c == REF or c == REFSB:  # a refresh earns credit at most max_pulled_in ahead: an unstamped one waits for it
            most = 0
            for b in range(nb):
                if (mask >> b) & 1 and brefs[b] > most:
                    most = brefs[b]
            credit = (most + 1 - hwp[HWP_MAXPULL]) * trefi
            if credit > earliest:
                earliest, reason = credit, R + R_REFCREDIT
        if stamp >= 0:
            t = stamp
            if t < ready:
                return _fail(err, E_BUS, t, -1, pos, -1, 1, t - st[ST_BUS], st[ST_BUS], 0)
            if t < st[ST_WAIT]:
                return _fail(err, E_SYNC, t, -1, pos, -1, sync, t - (st[ST_WAIT] - sync), st[ST_WAIT], 0)
            if t < req:  # (again unit by unit: the unit and time the error names)
                _settle_all(hwp, last)
                _, brow, bunit, bprev = _requirement(
                    c,
                    mask,
                    gmask,
                    rmask,
                    tz,
                    hwp,
                    last,
                    ring,
                    rhead,
                    rows_start,
                    rows_idx,
                    tprev,
                    tscope,
                    tlat,
                    twin,
                    twbase,
                    viol,
                    t,
                    False,
                )
                b = bunit if bunit < nb else -1
                return _fail(err, E_TIMING, t, b, pos, brow, tlat[brow], t - bprev, 0, 0)
            if t < gbneed:
                return _fail(err, E_GB, t, -1, pos, -1, tgb, t - (gbneed - tgb), gbi, 0)
            if t > earliest:
                stall[R + R_STAMP] += t - earliest
        else:
            t = earliest
            if nbusy:  # yield the bus to the partner's commands
                t = _yield_at(t, c, ncmd, gap[c], gbi, gbready, busy, nbusy, actw, st)
                if t > earliest:
                    stall[R + R_PAIRBUS] += t - earliest
        if reason >= 0:
            stall[reason] += earliest - ready
        # ---- the sweep ----------------------------------------------------------------------
        g = gap[c]
        logrow = -1  # the command log's row and bank (-1: several or none), if the log is kept
        logbank = -1
        if record:
            if c == ACT:
                logrow = prog[base + C_ROW]
            elif c == RD or c == WR or c == MAC:
                for b in range(nb):
                    if (mask >> b) & 1:
                        if logrow == -1:
                            logrow = openrow[b]
                        elif openrow[b] != logrow:
                            logrow = -2
                if logrow == -2:
                    logrow = -1
            if mask != 0 and (mask & (mask - 1)) == 0 and c != REF:  # (REFSB: its bank)
                logbank = bank if bank >= 0 else _lowest(mask)
        tk = t
        r0, rstep, rn = t, 0, 1  # the bus-occupancy record being built (busrec)
        for k in range(ncmd):
            if k > 0:
                nxt = tk + g
                why = gap_row[c]
                if c == MAC and gbready[gbi + k] > nxt:
                    nxt, why = gbready[gbi + k], R + R_GB
                if self_win[c]:
                    r2, br2, bu2, bp2 = _requirement(
                        c,
                        mask,
                        gmask,
                        rmask,
                        tz,
                        hwp,
                        last,
                        ring,
                        rhead,
                        fstart,
                        fidx,
                        tprev,
                        tscope,
                        tlat,
                        twin,
                        twbase,
                        viol,
                        -1,
                        fast,
                    )
                    if r2 > nxt:
                        nxt, why = r2, br2
                if nxt > tk + 1 and why >= 0:
                    stall[why] += nxt - tk - 1
                tk = nxt
                if busrec:  # extend the record while the spacing holds
                    if rn == 1:
                        rstep, rn = tk - r0, 2
                    elif tk - r0 == rstep * rn:
                        rn += 1
                    else:
                        _occ_put(occ, st, r0, rstep, rn, ibase + pos, c)
                        r0, rstep, rn = tk, 0, 1
            if self_win[c]:
                _push(
                    c, mask, gmask, rmask, tz, tk, hwp, last, ring, rhead, tprev, tscope, twin, twbase, wprev, wlo, whi
                )
            if c == WRGB:
                gbready[gbi + k] = tk + tgb
            if record:
                i = st[ST_LOG]
                lcyc[i], lcmd[i], lbank[i], lmask[i], lrow[i], linstr[i] = tk, c, logbank, mask, logrow, ibase + pos
                if c == RD or c == WR or c == MAC:
                    lcol[i] = col + k
                elif c == WRGB:
                    lcol[i] = gbi + k
                elif c == RDACC:
                    lcol[i] = acc + k * (bpb // 4)
                else:
                    lcol[i] = -1
                st[ST_LOG] = i + 1
        if busrec:
            _occ_record(occ, st, r0, rstep, rn, ibase + pos, c, r0 == t)
        if not self_win[c]:
            q = lu + c * LATEST
            if fast and last[q + 1] == mask and last[q + 2] == gmask and last[q + 3] == rmask and wprev[c] == 0:
                last[q], last[q + 4] = tk, 1  # the same units again: the per-unit times wait (LATEST)
            else:
                if last[q + 4]:
                    _settle(c, hwp, last)
                _push(
                    c, mask, gmask, rmask, tz, tk, hwp, last, ring, rhead, tprev, tscope, twin, twbase, wprev, wlo, whi
                )
        # ---- state and statistics -----------------------------------------------------------
        counts[c] += ncmd
        if c == RD or c == WR or c == MAC:
            # bursts per bank, row hits/misses and unit MACs: a run of accesses with one mask and
            # command is added up and spread over its banks once (no ACT/PRE can come between)
            if mask != amask or c != acmd:
                _access_stats(amask, acmd, abursts, nb, firstacc, bbursts, hits, misses, pumacs, pu_of)
                amask, acmd, abursts = mask, c, 0
            abursts += ncmd
        elif c == ACT or c == PRE or c == REF or c == REFSB:
            _access_stats(amask, acmd, abursts, nb, firstacc, bbursts, hits, misses, pumacs, pu_of)
            amask, abursts = 0, 0
        if c == ACT or c == PRE:
            b = tz & 255  # (the lowest bank of mask)
            m = mask >> b
            while m:  # the banks of mask, lowest first
                if m & 1:
                    if c == ACT:
                        openrow[b] = prog[base + C_ROW]
                        openmask |= 1 << b
                        openinstr[b] = ibase + pos
                        firstacc[b] = 1
                    else:
                        openrow[b] = -1
                        openmask &= ~(1 << b)
                m >>= 1
                b += 1
        st[ST_OPEN] = openmask
        if c == REF or c == REFSB:
            # the JEDEC limits, per bank refreshed (a REF: every bank, all with the same counts
            # unless REFSBs came before; errors of a REF name no bank, of a REFSB its bank)
            for b in range(nb):
                if not (mask >> b) & 1:
                    continue
                eb = b if c == REFSB else -1
                j = brefs[b] + 1
                deadline = (j + maxp) * trefi
                if t >= deadline:
                    return _fail(err, E_REFLATE, deadline, eb, pos, -1, 0, 0, j, t)
                # pulled in: refreshes issued up to t beyond those due by t earn no credit past maxpull
                if j - t // trefi > hwp[HWP_MAXPULL]:
                    return _fail(err, E_REFEARLY, t, eb, pos, -1, (j - hwp[HWP_MAXPULL]) * trefi, t, j, 0)
                if t - blastref[b] > hwp[HWP_MAXGAP] * trefi:
                    return _fail(
                        err, E_REFGAP, t, eb, pos, -1, hwp[HWP_MAXGAP] * trefi, t - blastref[b], j, blastref[b]
                    )
            for b in range(nb):
                if (mask >> b) & 1:
                    brefs[b] += 1
                    blastref[b] = t
        d = tk + compl[c]
        issue[pos], lastc[pos], done[pos] = t, tk, d
        if d > st[ST_MAXDONE]:
            st[ST_MAXDONE] = d
        st[ST_PREV] = t
        st[ST_BUS] = tk
        pos += 1
    st[ST_POS] = pos
    _access_stats(amask, acmd, abursts, nb, firstacc, bbursts, hits, misses, pumacs, pu_of)
    return DONE


OCC_CHUNK = 1 << 12  # records the kernel buffers between drains


def _fresh_last(nu: int) -> np.ndarray:
    last = np.full(NCMD * nu + NCMD * LATEST, NEG, dtype=np.int64)
    latest = last[NCMD * nu :].reshape(NCMD, LATEST)
    latest[:, 1:4] = -1  # (every unit: the first query of a row reads NEG, as the per-unit walk does)
    latest[:, 4] = 0
    return last


def new_state(tab, n_instr: int, log: np.ndarray | None) -> dict[str, np.ndarray]:
    """Fresh arrays for one channel (see run_channel's arguments). `log`: LOG_DTYPE rows the kernel
    fills, one per command (None: no command log)."""
    hwp = tab.hwp
    nb, nu, npu = int(hwp[HWP_NB]), int(hwp[HWP_NU]), int(tab.pu_of.max()) + 1
    R = tab.rows
    i64 = np.int64
    st = np.zeros(ST_LEN, dtype=i64)
    st[ST_BUS] = -1
    st[ST_PREV] = -1
    record = log is not None
    if log is None or len(log) < 2:  # >= 2 rows: field views stay non-contiguous (one jit signature)
        log = np.empty(2, dtype=LOG_DTYPE)
    hwpc = hwp.copy()
    hwpc[HWP_RECORD] = int(record)
    return dict(
        hwp=hwpc,
        st=st,
        brefs=np.zeros(nb, dtype=i64),
        blastref=np.zeros(nb, dtype=i64),
        last=_fresh_last(nu),
        ring=np.full(tab.ring_size, NEG, dtype=i64),
        rhead=np.zeros(max(R, 1) * nu, dtype=i64),
        openrow=np.full(nb, -1, dtype=i64),
        openinstr=np.full(nb, -1, dtype=i64),
        firstacc=np.zeros(nb, dtype=i64),
        gbready=np.full(max(int(hwp[HWP_GB]), 1), NEG, dtype=i64),
        issue=np.full(n_instr, -1, dtype=i64),
        lastc=np.full(n_instr, -1, dtype=i64),
        done=np.full(n_instr, -1, dtype=i64),
        counts=np.zeros(NCMD, dtype=i64),
        bbursts=np.zeros(nb, dtype=i64),
        pumacs=np.zeros(npu, dtype=i64),
        hits=np.zeros(nb, dtype=i64),
        misses=np.zeros(nb, dtype=i64),
        stall=np.zeros(R + N_REASONS, dtype=i64),
        viol=np.zeros(max(R, 1), dtype=i64),
        log=log,
        lcyc=log["cycle"],
        lcmd=log["command"],
        lbank=log["bank"],
        lmask=log["mask"],
        lrow=log["row"],
        lcol=log["col"],
        linstr=log["instr"],
        err=np.zeros(ERR_LEN, dtype=i64),
        # bus occupancy (HWP_BUSREC): the buffer the kernel fills, and the records drained from it
        occ=np.zeros(OCC_CHUNK * OCC_WIDTH if hwp[HWP_BUSREC] else OCC_WIDTH, dtype=i64),
        occ_parts=[],
        busy=np.zeros(OCC_WIDTH, dtype=i64),  # (yield_to sets a partner's records)
        # the binding candidates (_bind_rows): none until the channel's first command
        bstart=np.zeros(NCMD + 1, dtype=i64),
        bidx=np.zeros(max(R, 1), dtype=i64),
    )


def yield_to(s: dict, records: np.ndarray, act_w: int) -> None:
    """The channel's unstamped commands yield their bus to a partner's commands (records,
    hwmodel/bus.py, in issue order): each goes at the first cycle at or after its earliest
    legal one where the partner does not hold its bus (the timing oracle's pair timing)."""
    s["busy"] = np.ascontiguousarray(records, dtype=np.int64).reshape(-1)
    s["hwp"][HWP_BUSY] = len(records)
    s["hwp"][HWP_ACTW] = act_w


def occupancy(s: dict) -> np.ndarray:
    """The bus-occupancy records of a channel's run so far, (n, OCC_WIDTH), in issue order."""
    n = int(s["st"][ST_NOCC])
    parts = s["occ_parts"] + [s["occ"][: n * OCC_WIDTH].reshape(n, OCC_WIDTH)]
    return np.concatenate(parts) if len(parts) > 1 else parts[0].copy()


def _drain(s: dict) -> None:
    """Make room in the occupancy buffer (FULL): keep its records aside, or grow it if it held
    none (an instruction of more commands than the buffer has rows)."""
    n = int(s["st"][ST_NOCC])
    if n == 0:
        s["occ"] = np.zeros(2 * len(s["occ"]), dtype=np.int64)
    else:
        s["occ_parts"].append(s["occ"][: n * OCC_WIDTH].reshape(n, OCC_WIDTH).copy())
        s["st"][ST_NOCC] = 0


def call(tab, prog: np.ndarray, s: dict[str, np.ndarray], sig: np.ndarray) -> int:
    """Run (or resume) one channel; returns DONE, BLOCKED or ERROR."""
    if len(s["issue"]) < len(prog) // WIDTH:  # the compiled kernel does not check bounds
        raise ValueError(f"channel state holds {len(s['issue'])} instructions, the table {len(prog) // WIDTH}")
    while True:
        status = _call(tab, prog, s, sig)
        if status != FULL:
            return status
        _drain(s)


def _call(tab, prog: np.ndarray, s: dict[str, np.ndarray], sig: np.ndarray) -> int:
    return run_channel(
        prog,
        tab.prev,
        tab.nxt,
        tab.scope,
        tab.lat,
        tab.win,
        tab.wbase,
        tab.rows_start,
        tab.rows_idx,
        tab.gap,
        tab.gap_row,
        tab.self_win,
        tab.wprev,
        tab.completion,
        tab.bg_of,
        tab.rank_of,
        tab.pu_of,
        s["hwp"],
        s["st"],
        s["brefs"],
        s["blastref"],
        s["last"],
        s["ring"],
        s["rhead"],
        s["openrow"],
        s["openinstr"],
        s["firstacc"],
        s["gbready"],
        sig,
        s["issue"],
        s["lastc"],
        s["done"],
        s["counts"],
        s["bbursts"],
        s["pumacs"],
        s["hits"],
        s["misses"],
        s["stall"],
        s["viol"],
        s["lcyc"],
        s["lcmd"],
        s["lbank"],
        s["lmask"],
        s["lrow"],
        s["lcol"],
        s["linstr"],
        s["err"],
        s["occ"],
        s["busy"],
        s["bstart"],
        s["bidx"],
    )
