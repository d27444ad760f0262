"""Command-bus occupancy of a channel, and collisions between two channels sharing a bus.

Where `organization.command_bus` is `shared_pair`, channels 2k and 2k+1 (the two pseudo-channels
of one HBM channel) share the channel's row command bus (ACT, PRE, REF, REFSB) and its column
command bus (RD, WR, MAC, WRGB, RDACC). A command holds its bus one cycle, an ACT `tACT_BUS`
cycles (HBM2/HBM3: 2) from its stamp; a row and a column command of the pair may share a cycle,
two commands on one bus may not overlap.

A channel's occupancy is a list of *records*, arithmetic progressions in issue order (a sweep
issued at a constant spacing is one record): rows of OCC_WIDTH int64s (see O_*):
first cycle, step (0 for one command), number of commands, stream index of the instruction
(the first one: the simulator's kernel makes one record of a run of whole instructions that
continue one progression, sim/channel.py ST_OCCWHOLE), command (index into
hwmodel.model.COMMANDS). Records of one channel never overlap in time (one
command per cycle on a channel, in stream order). The simulator's kernel writes them (sim/channel.py)
and checks pairs after the run; the decoder reads a task's records from the timing oracle's
command log and staggers the pair's lockstep copies by the smallest shift without a collision
(solver/pair_bus.py). Both use `first_collision`.
"""

from __future__ import annotations

import numpy as np

from .jit import njit
from .model import COMMANDS, ROW_COMMANDS, Hardware

O_T0, O_STEP, O_N, O_INSTR, O_CMD = range(5)
OCC_WIDTH = 5
#: 1 for a row-bus command, by index into COMMANDS
ROW_BUS = np.array([int(c in ROW_COMMANDS) for c in COMMANDS], dtype=np.int64)
_ACT = COMMANDS.index("ACT")


def act_bus_cycles(hw: Hardware) -> int:
    """Cycles an ACT holds the row command bus (the timing parameter tACT_BUS; 1 where unset)."""
    return int(hw.timing.params.get("tACT_BUS", 1))


def partner(channel: int) -> int:
    """The channel sharing `channel`'s command buses under shared_pair."""
    return channel ^ 1


@njit
def records_from_commands(cycles, commands, instrs):
    """Occupancy records of commands issued at `cycles` (in issue order), `commands` their
    indices in COMMANDS, `instrs` their instructions: consecutive commands of one instruction at a
    constant spacing make one record."""
    n = cycles.shape[0]
    out = np.empty((n, 5), dtype=np.int64)
    m = 0
    i = 0
    while i < n:
        t0, c, ins = cycles[i], commands[i], instrs[i]
        step, cnt = 0, 1
        j = i + 1
        while j < n and commands[j] == c and instrs[j] == ins:
            d = cycles[j] - cycles[j - 1]
            if cnt == 1:
                step = d
            elif d != step:
                break
            cnt += 1
            j += 1
        out[m, 0], out[m, 1], out[m, 2], out[m, 3], out[m, 4] = t0, step, cnt, ins, c
        m += 1
        i = j
    return out[:m].copy()


@njit(inline=True)
def _width(c, act_w):
    return act_w if c == 0 else 1  # (0: ACT, COMMANDS' first)


@njit(inline=True)
def _end(t0, step, n, w):
    return t0 + (n - 1) * step + w - 1


@njit
def _first_in(a0, sa, na, wa, b0, sb, nb, wb, lo, hi, best):
    """Earliest cycle < best (best < 0: none yet) at which an element of progression A (each
    element holding its bus wa cycles) overlaps one of B (wb cycles), looking at A's elements
    that overlap [lo, hi]; (cycle, k of A, k of B) or (-1, 0, 0)."""
    k0, k1 = 0, 0
    if sa != 0:
        num = lo - (wa - 1) - a0
        k0 = 0 if num <= 0 else (num + sa - 1) // sa
        k1 = min(na - 1, (hi - a0) // sa)
    for k in range(k0, k1 + 1):
        x = a0 + k * sa
        if best >= 0 and x >= best:
            break
        # the first element of B ending at or after x
        need = x - (wb - 1)
        j = 0
        if sb != 0 and need > b0:
            j = (need - b0 + sb - 1) // sb
        if j >= nb:
            continue
        y = b0 + j * sb
        if y <= x + wa - 1:
            return (x if x > y else y), k, j
    return -1, 0, 0


@njit
def _next_on(r, i, bus, row_bus):
    """The first record at or after i on bus (1: row, 0: column)."""
    n = r.shape[0]
    while i < n and row_bus[r[i, 4]] != bus:
        i += 1
    return i


@njit
def first_collision(a, b, shift, row_bus, act_w, out):
    """The earliest cycle at which a command of `a` and a command of `b` (records, b's cycles
    plus `shift`) hold the same bus; -1 if none. out (6 int64s): cycle, record of a, record of
    b, cycle of a's command, cycle of b's command (shifted), 0. Each bus is one pass of a merge
    over the two channels' records on it (a channel's records on one bus never overlap)."""
    na, nb = a.shape[0], b.shape[0]
    best = -1
    for bus in range(2):
        i = _next_on(a, 0, bus, row_bus)
        j = _next_on(b, 0, bus, row_bus)
        while i < na and j < nb:
            a0, sa, ka, ca = a[i, 0], a[i, 1], a[i, 2], a[i, 4]
            b0, sb, kb, cb = b[j, 0] + shift, b[j, 1], b[j, 2], b[j, 4]
            wa, wb = _width(ca, act_w), _width(cb, act_w)
            ea, eb = _end(a0, sa, ka, wa), _end(b0, sb, kb, wb)
            lo = a0 if a0 > b0 else b0
            if best >= 0 and lo >= best:
                break
            if ea >= b0 and eb >= a0:
                hi = ea if ea < eb else eb
                # enumerate the progression with fewer elements in the window
                if sa == 0 or (sb != 0 and sa >= sb):
                    c, x, y = _first_in(a0, sa, ka, wa, b0, sb, kb, wb, lo, hi, best)
                else:
                    c, y, x = _first_in(b0, sb, kb, wb, a0, sa, ka, wa, lo, hi, best)
                if c >= 0 and (best < 0 or c < best):
                    best = c
                    out[1], out[2], out[3], out[4] = i, j, a0 + x * sa, b0 + y * sb
            if ea <= eb:
                i = _next_on(a, i + 1, bus, row_bus)
            else:
                j = _next_on(b, j + 1, bus, row_bus)
    out[0] = best
    return best


@njit
def ending_from(r, t, act_w):
    """The records of `r` whose last cycle on the bus is at or after `t` (in order, a copy)."""
    n = r.shape[0]
    keep = np.empty(n, dtype=np.bool_)
    m = 0
    for i in range(n):
        k = _end(r[i, 0], r[i, 1], r[i, 2], _width(r[i, 4], act_w)) >= t
        keep[i] = k
        m += k
    out = np.empty((m, r.shape[1]), dtype=r.dtype)
    j = 0
    for i in range(n):
        if keep[i]:
            out[j, :] = r[i, :]
            j += 1
    return out


@njit
def joined(r):
    """The records with each run of consecutive records of one command that continue one
    progression (a MAC every 4 cycles over many one-MAC instructions) made one record: the same
    cycles on the same buses, in the same order (the instruction column is the run's first)."""
    n = r.shape[0]
    out = np.empty((n, r.shape[1]), dtype=r.dtype)
    m = -1
    for i in range(n):
        t0, step, cnt, c = r[i, 0], r[i, 1], r[i, 2], r[i, 4]
        if m >= 0 and out[m, 4] == c:
            a0, sa, na = out[m, 0], out[m, 1], out[m, 2]
            s = sa if na > 1 else t0 - a0
            if s > 0 and t0 == a0 + na * s and (cnt == 1 or step == s):
                out[m, 1], out[m, 2] = s, na + cnt
                continue
        m += 1
        out[m, :] = r[i, :]
    return out[: m + 1].copy()


def compact(records: np.ndarray) -> np.ndarray:
    """Records without their instruction column, runs of one progression joined (`joined`), as
    int32 where the cycles fit (16 B each: what a task's timing keeps, `TaskTiming.bus`);
    `expand` gives the records back (instruction -1)."""
    if len(records):
        records = joined(np.ascontiguousarray(records, dtype=np.int64))
    out = records[:, [O_T0, O_STEP, O_N, O_CMD]]
    if len(out) == 0 or int(np.abs(out).max()) < 2**31:
        out = out.astype(np.int32)
    return np.ascontiguousarray(out)


def expand(small: np.ndarray) -> np.ndarray:
    """The OCC_WIDTH-column int64 records of `compact`'s output."""
    out = np.full((len(small), OCC_WIDTH), -1, dtype=np.int64)
    out[:, [O_T0, O_STEP, O_N, O_CMD]] = small
    return out


def collision(a: np.ndarray, b: np.ndarray, shift: int, act_w: int) -> np.ndarray | None:
    """first_collision's out array, or None where there is none."""
    out = np.zeros(6, dtype=np.int64)
    if len(a) == 0 or len(b) == 0:
        return None
    c = first_collision(a, b, np.int64(shift), ROW_BUS, np.int64(act_w), out)
    return None if c < 0 else out


def smallest_shift(a: np.ndarray, b: np.ndarray, act_w: int, start: int = 0) -> int:
    """The smallest shift >= `start` of `b` against `a` at which no two commands share a bus cycle."""
    if len(a) == 0 or len(b) == 0:
        return start
    shift = start
    out = np.zeros(6, dtype=np.int64)
    while first_collision(a, b, np.int64(shift), ROW_BUS, np.int64(act_w), out) >= 0:
        shift += 1
    return shift
