"""Refresh inside long tasks: REFs placed in a task's own command sequence.

JEDEC refresh allows at most `max_postponed_refresh` (8) REFs owed, at most
`max_pulled_in_refresh` (8) pulled in, and at most `max_refresh_interval` (9) x tREFI between two
REFs. The decoder places REFs between tasks; a task that runs for more than a few tREFI cannot be
covered from outside (its REFs would all have to be pulled in before it, and the interval rule
still breaks). Such a task carries REFs of its own, about one per tREFI of its run:

    ... MAC | PRE (the open banks) | REF | ACT (each open row again) | MAC ...

at instruction boundaries chosen on the task's timing without them, so that the k-th REF falls
near k x tREFI after the task's start. The re-activated rows are the ones that were open, so the
sequence computes the same thing (global buffer, accumulators and staging are not in the banks).
The decoder reads the REFs' exact relative cycles from the task's timing (TaskTiming.refreshes)
and counts them like its own.

The points take every block to add an estimate (tRP + tRFC + tRCDMAC); where the blocks add
less or more, the k-th REF drifts from k x tREFI by the error times k. In a task of many blocks
the drift is measured (the first blocks' cost, a prefix of the task timed) and kept to about
DRIFT_LIMIT tREFI, half of what JEDEC allows pulled in or postponed (`with_refresh`; the mean of
the first blocks stands for all, so the rest may differ a little: the tests check 5 tREFI).

Per-bank refresh (timing.refresh_mode = per_bank: REFSB refreshes one bank while the others
work). Between tasks the decoder issues a *round*, one refresh of every bank: an all-bank REF, or
a REFSB per bank tRREFD apart, whichever frees the channel sooner (`refresh_round`). Inside a long
task, a refresh point refreshes the open banks as above (PRE, a REFSB each, ACT again) and leaves
the banks that are precharged there to REFSBs spread over the following instruction boundaries,
one per boundary (a REFSB to a closed bank costs the stream a bus slot, not tRFCSB), or placed
just before the ACT that would open such a bank. Each bank so gets one refresh per round; the
decoder counts a round by its first and its last refresh (TaskTiming.refreshes_early / refreshes).
"""

from __future__ import annotations

from itertools import repeat
from math import ceil
from operator import attrgetter

import numpy as np

from hwmodel import Hardware
from hwmodel.isa import ISA, Instruction, make

# A task whose commands alone take longer than this many tREFI carries its own REFs; shorter ones
# are covered by the decoder's REFs before them (up to 8 pulled in, well inside the 9 x tREFI
# interval).
LONG_TASK_INTERVALS = 4


def _field(ins: Instruction, name: str) -> int:
    return ins.args[ISA.by_mnemonic(ins.op).field_names.index(name)]


_OP = attrgetter("op")
_COUNT = {op: ISA.by_mnemonic(op).field_names.index("count") for op in ("MAC", "RD", "WR", "WRGB", "RDACC")}


def _estimate(hw: Hardware, seq: list[Instruction], enough: int | None = None) -> int:
    """A quick lower estimate of the sequence's duration (bursts at their sweep spacing, a
    read-out's bursts over the link as a read's); with `enough`, the count stops once it reaches
    that (the caller only compares it with `enough`)."""
    t = hw.timing
    link = max(t.p("tCCD_S"), hw.link_cycles)
    per = {"MAC": hw.mac_interval, "RD": link, "WR": link, "WRGB": link}
    accs_per_burst = hw.organization.burst_bytes // 4  # an RDACC moves ceil(4 x count / burst_bytes) bursts
    # the cost by instruction object: emitters hand out one object per distinct command (alive in
    # `seq`, so the ids are distinct), so most lookups hit
    cost: dict[int, int] = {}
    total = 0
    for ins in seq:
        c = cost.get(id(ins))
        if c is None:
            k = _COUNT.get(ins.op)
            if k is None:
                c = 1
            elif ins.op == "RDACC":
                c = link * -(-ins.args[k] // accs_per_burst)
            else:
                c = per[ins.op] * ins.args[k]
            cost[id(ins)] = c
        total += c
        if enough is not None and total >= enough:
            break
    return total


def per_bank(hw: Hardware) -> bool:
    return hw.timing.refresh_mode == "per_bank"


def round_span(hw: Hardware) -> int:
    """Cycles from the first to the last refresh of a between-task round (0: one REF)."""
    return _span(hw) if _refsb_rounds(hw) else 0


def _span(hw: Hardware) -> int:
    """A round of REFSBs: the ranks' chains side by side, tRREFD apart within a rank (the rank
    row REFSB -> REFSB), one cycle apart across ranks (one command per cycle on the channel)."""
    org = hw.organization
    return (org.banks_per_rank - 1) * hw.timing.p("tRREFD") + org.ranks - 1


def _refsb_rounds(hw: Hardware) -> bool:
    """A per-bank device whose round of REFSBs frees the channel sooner than one REF (every bank
    precharged, so only the rows between refresh commands and to the next ACT count)."""
    t = hw.timing
    return per_bank(hw) and t.p("tRREFD") >= hw.organization.ranks and _span(hw) + t.p("tRFCSB") < t.p("tRFC")


def refresh_round(hw: Hardware, at: int) -> list[Instruction]:
    """The decoder's refresh of every bank of a channel at cycle `at` (all banks precharged)."""
    if _refsb_rounds(hw):
        d, bpr, ranks = hw.timing.p("tRREFD"), hw.organization.banks_per_rank, hw.organization.ranks
        return [make("REFSB", cycle=at + j * d + r, bank=r * bpr + j) for j in range(bpr) for r in range(ranks)]
    return [make("REF", cycle=at)]


def round_busy(hw: Hardware) -> int:
    """The least time a between-task round keeps its channel group from work: tRFC for a REF, the
    span plus tRFCSB for a round of REFSBs (at most round_cycles: the lumped refresh of the CP-SAT
    model and the hardware figures charge this per round and stay below the decoder's)."""
    if _refsb_rounds(hw):
        return round_span(hw) + hw.timing.p("tRFCSB")
    return hw.timing.p("tRFC")


def round_cycles(hw: Hardware) -> int:
    """Cycles a between-task round keeps its channel group busy, from its first command until any
    command may follow (the decoder's block; CP-SAT's lumped refresh charges this per round)."""
    from .task_timing import max_latency_after

    lat = max_latency_after(hw)
    if _refsb_rounds(hw):
        return round_span(hw) + lat["REFSB"]
    return lat["REF"]


def with_refresh(hw: Hardware, seq: list[Instruction]) -> list[Instruction]:
    """`seq` with REF blocks about every tREFI if it runs longer than LONG_TASK_INTERVALS x tREFI;
    else `seq` itself."""
    trefi = hw.timing.p("tREFI")
    short = LONG_TASK_INTERVALS * trefi // 2  # (an estimate below this: not long, not timed)
    if not seq or _estimate(hw, seq, short) < short:
        return seq
    from .task_timing import time_task  # late: task_timing times sequences this module builds

    timing = time_task(hw, seq)
    if timing.duration < LONG_TASK_INTERVALS * trefi:
        return seq
    p = hw.timing.params
    nb = hw.organization.banks_per_channel
    spread = per_bank(hw)
    block = p["tRP"] + (p["tRFCSB"] + (nb // 2) * p["tRREFD"] if spread else p["tRFC"]) + p["tRCDMAC"]  # about

    def place(block: float, marks: list[tuple[int, int]] | None = None) -> list[Instruction]:
        if spread:
            return _placed_by_loop(seq, timing, trefi, block, nb, True, marks=marks)
        return _placed(seq, timing, trefi, block, loads_stop_macs(hw), marks=marks)

    marks: list[tuple[int, int]] = []
    out = place(block, marks)
    if len(marks) * block * MAX_ERROR <= DRIFT_LIMIT * trefi:
        return out  # too few blocks to drift that far
    # The points assume every block adds `block` cycles. One that takes a load in, or whose PRE
    # need not wait a whole tRTP, adds less; a per-bank round may add more. Over many blocks the
    # REFs then drift from k x tREFI. Drift ahead pulls REFs into the task where they are cheap
    # (at a load) and the decoder needs fewer between tasks, so some is worth keeping; but past
    # the pull-in rule the decoder can only start the task late, idle and owing REFs (hbm2-pim, a
    # one-channel GEMV 2048 x 4096 at batch 16: 27 cycles a block, 78,000 over 2,900 REFs, a
    # program the simulator rejected). So the drift is kept to about DRIFT_LIMIT tREFI: placed
    # again with a block cost that leaves that much, from the mean the first blocks added.
    added = _added_per_block(hw, timing, out, marks[:SAMPLE_BLOCKS])
    limit = DRIFT_LIMIT * trefi / len(marks)  # per block
    if abs(block - added) <= limit:
        return out
    return place(added + (limit if block > added else -limit))


# A task whose REF blocks could drift more than DRIFT_LIMIT tREFI from k x tREFI, were each off
# by MAX_ERROR of the estimate (measured: 4-19 %, hbm2-pim and fpga-proto, all-bank and
# per-bank), has the cost of its first SAMPLE_BLOCKS measured (a prefix timed) and its drift kept
# to about DRIFT_LIMIT tREFI (`with_refresh`): half of JEDEC's 8 pulled in or postponed, the rest
# for the decoder.
MAX_ERROR = 0.5
SAMPLE_BLOCKS = 32
DRIFT_LIMIT = 4


def _added_per_block(hw: Hardware, timing, out: list[Instruction], marks: list[tuple[int, int]]) -> float:
    """The mean cycles the first blocks of `out` added: how much later than in `timing` (the task
    without them) the first instruction after the last of them issues, per block. `marks`: (index
    in `out`, index in the task without them) of the first instruction after each block. The prefix of `out` up to
    that instruction is timed, its open banks precharged at its end."""
    from .task_timing import time_task

    end, orig = marks[-1]
    prefix = out[: end + 1]
    open_rows: dict[int, int] = {}
    for ins in prefix:
        _track(open_rows, ins)
    if open_rows:
        prefix.append(make("PRE", mask=sum(1 << b for b in open_rows)))
    shift = int(time_task(hw, prefix).issue[end]) - int(timing.issue[orig])
    return max(0.0, shift / len(marks))


def loads_stop_macs(hw: Hardware) -> bool:
    """Whether a buffer load keeps the channel from MACs (the data-bus write path's turnaround
    rows MAC -> WRGB and WRGB -> MAC): only then does a REF block gain by taking a load in
    (`_at_loads`); on a dedicated path the WRGBs overlap the MACs and would only lengthen it."""
    t = hw.timing
    return t.rule("MAC", "WRGB", "rank") + t.rule("WRGB", "MAC", "bank_group") > 0


_CODE = {"RDACC": 1, "ACT": 2, "PRE": 3, "WRGB": 4}  # what `_placed` looks at
# a REF block may move past its rule's point to a buffer load at most tREFI / LOAD_WINDOW cycles
# (of the task's timing without REFs) later (`_at_loads`)
LOAD_WINDOW = 4


def _points(codes: np.ndarray, timing, trefi: int, block: float) -> list[int]:
    """The instruction indices before which the REF blocks of `with_refresh` go (all-bank): the
    k-th before the first instruction i, after the (k-1)-th, with issue[i] + (k - 1) x block >=
    k x tREFI, duration - issue[i] > tREFI and not an RDACC (the rule of `_placed_by_loop`)."""
    issue = timing.issue
    ok = (timing.duration - issue > trefi) & (codes != _CODE["RDACC"])
    points: list[int] = []
    n = len(codes)
    if n and bool((issue[1:] >= issue[:-1]).all()):  # in order (as a channel issues): by search
        # next_ok[i]: the first j >= i with ok[j] (n: none)
        idx = np.where(ok, np.arange(n), n)
        next_ok = np.minimum.accumulate(idx[::-1])[::-1]
        lo, k = 0, 1
        while lo < n:
            i = max(lo, int(np.searchsorted(issue, ceil(k * trefi - (k - 1) * block), side="left")))
            if i >= n or next_ok[i] >= n:
                break
            i = int(next_ok[i])
            points.append(i)
            lo, k = i + 1, k + 1
        return points
    lo, k = 0, 1
    while lo < n:
        hit = np.flatnonzero(ok[lo:] & (issue[lo:] >= k * trefi - (k - 1) * block))
        if not len(hit):
            break
        i = lo + int(hit[0])
        points.append(i)
        lo, k = i + 1, k + 1
    return points


def _at_loads(points: list[int], codes: np.ndarray, timing, trefi: int) -> list[tuple[int, int]]:
    """Each refresh point moved to the buffer load (a run of WRGBs) that follows it, if one
    starts within tREFI / LOAD_WINDOW cycles and ends before the next point, with more than a
    tREFI of the task left: (index of its first WRGB, index after its last), or (the point, the
    point). (Ends, not starts: a load whose WRGBs run past the next point, one longer than what
    the blocks leave of a tREFI, as over a slow link, would be taken into two blocks and written
    twice.)

    Why: a REF block keeps the channel from MACs for PRE -> REF -> tRFC -> ACT -> MAC anyway, and
    a load's WRGBs need no open bank: issued between the block's PRE and its REF they take no time
    of their own (hbm2-pim: a load block's 45 cycles in the MAC stream, 12 of them left after the
    REF's), where a REF elsewhere adds to every load."""
    issue = timing.issue
    n = len(codes)
    loads = np.flatnonzero(codes == _CODE["WRGB"])
    out = []
    for p, i in enumerate(points):
        nxt = points[p + 1] if p + 1 < len(points) else n
        s = int(np.searchsorted(loads, i))
        j = int(loads[s]) if s < len(loads) else n
        e = j
        while e < n and codes[e] == _CODE["WRGB"]:
            e += 1
        # (not before an RDACC: the block's ACTs would open its bank just before a column read of it)
        if (
            j < e <= nxt
            and issue[j] - issue[i] <= trefi // LOAD_WINDOW
            and timing.duration - issue[j] > trefi
            and (e == n or codes[e] != _CODE["RDACC"])
        ):
            out.append((j, e))
        else:
            out.append((i, i))
    return out


def _placed(
    seq: list[Instruction], timing, trefi: int, block: float, at_loads: bool = True, marks: list | None = None
) -> list[Instruction]:
    """All-bank refresh points of `with_refresh` found with numpy (`_points`), with `at_loads`
    moved to a buffer load where one follows (`_at_loads`), the open rows at each from the ACTs
    and PREs before it: the same list as `_placed_by_loop`, without a Python step per
    instruction. `marks` (if given) gets (index in the result, index in `seq`) of the first
    instruction after each block."""
    codes = np.fromiter(map(_CODE.get, map(_OP, seq), repeat(0)), dtype=np.int8, count=len(seq))
    points = _points(codes, timing, trefi, block)
    if not points:
        return seq
    blocks = _at_loads(points, codes, timing, trefi) if at_loads else [(i, i) for i in points]
    rowcmds = np.flatnonzero((codes == _CODE["ACT"]) | (codes == _CODE["PRE"])).tolist()
    out: list[Instruction] = []
    open_rows: dict[int, int] = {}  # bank -> open row
    at, r = 0, 0
    for i, e in blocks:
        while r < len(rowcmds) and rowcmds[r] < i:
            _track(open_rows, seq[rowcmds[r]])
            r += 1
        out.extend(seq[at:i])
        out.extend(_refresh_block(open_rows, seq[i:e]))
        at = e
        if marks is not None and e < len(seq):
            marks.append((len(out), e))
    out.extend(seq[at:])
    return out


def _placed_by_loop(
    seq: list[Instruction],
    timing,
    trefi: int,
    block: float,
    nb: int,
    spread: bool,
    at_loads: bool = True,
    marks: list | None = None,
) -> list[Instruction]:
    """`with_refresh`'s placement, instruction by instruction: per-bank refresh, and all-bank,
    where each REF block moves to the buffer load after its point if `at_loads` (`_loop_loads`:
    its PRE before the load's WRGBs, its REF and ACTs after them), which `_placed` does faster.
    `marks`: as `_placed`'s."""
    out: list[Instruction] = []
    open_rows: dict[int, int] = {}  # bank -> open row
    pending: list[int] = []  # per-bank: closed banks still owed their refresh of this round
    k = 1
    loads_from = {} if spread else dict(_loop_loads(seq, timing, trefi, block, at_loads).values())
    skip = 0
    for i, ins in enumerate(seq):
        if not spread:
            if i in loads_from:
                out.extend(_refresh_block(open_rows, seq[i : loads_from[i]]))
                skip = loads_from[i]
                if marks is not None and skip < len(seq):
                    marks.append((len(out), skip))
            if i >= skip:
                out.append(ins)
                _track(open_rows, ins)
            continue
        # the k-th REF goes before the first instruction that would issue at or after k x tREFI
        # (counting the blocks already inserted), once the task has at least a tREFI left; not
        # before an RDACC: the block's ACTs would open its bank just before a column read of it,
        # which then waits ACT -> RDACC tRCDRD (the table's row on the data-bus design)
        if (
            int(timing.issue[i]) + (k - 1) * block >= k * trefi
            and timing.duration - int(timing.issue[i]) > trefi
            and ins.op != "RDACC"
        ):
            out.extend(pending_refresh(pending, list(pending)))  # the last round's stragglers first
            out.extend(_bank_refresh_block(open_rows))
            pending = [b for b in range(nb) if b not in open_rows]
            k += 1
            marked = True
        else:
            marked = False
        if pending:
            opens = [b for b in pending if ins.op == "ACT" and (_field(ins, "mask") >> b) & 1]
            out.extend(pending_refresh(pending, opens or pending[:1]))
        if marked and marks is not None:
            marks.append((len(out), i))
        out.append(ins)
        _track(open_rows, ins)
    out.extend(pending_refresh(pending, list(pending)))
    return out


def _loop_loads(seq: list[Instruction], timing, trefi: int, block: float, at_loads: bool) -> dict[int, tuple[int, int]]:
    """All-bank: the rule's points one by one (the k-th REF before the first instruction that would
    issue at or after k x tREFI, counting the blocks already inserted, once the task has more than
    a tREFI left; not before an RDACC: the block's ACTs would open its bank just before a column
    read of it, which then waits ACT -> RDACC tRCDRD), each then moved to a load (`_at_loads`) if
    `at_loads`."""
    points, k = [], 1
    for i, ins in enumerate(seq):
        at = int(timing.issue[i])
        if at + (k - 1) * block >= k * trefi and timing.duration - at > trefi and ins.op != "RDACC":
            points.append(i)
            k += 1
    if not at_loads:
        return {i: (i, i) for i in points}
    codes = np.array([_CODE.get(ins.op, 0) for ins in seq], dtype=np.int8)
    return dict(zip(points, _at_loads(points, codes, timing, trefi)))


def _track(open_rows: dict[int, int], ins: Instruction) -> None:
    """The banks' open rows (bank -> row) after `ins` (an ACT opens, a PRE closes; others: none)."""
    if ins.op == "ACT":
        mask, row = _field(ins, "mask"), _field(ins, "row")
        for b in range(mask.bit_length()):
            if (mask >> b) & 1:
                open_rows[b] = row
    elif ins.op == "PRE":
        mask = _field(ins, "mask")
        for b in list(open_rows):
            if (mask >> b) & 1:
                del open_rows[b]


def pending_refresh(pending: list[int], banks: list[int]) -> list[Instruction]:
    """REFSBs of `banks` (closed banks of `pending`), removed from `pending`."""
    for b in banks:
        pending.remove(b)
    return [make("REFSB", bank=b) for b in banks]


def _bank_refresh_block(open_rows: dict[int, int]) -> list[Instruction]:
    """Per-bank: PRE the open banks, a REFSB each, ACT each open row again."""
    if not open_rows:
        return []
    block = [make("PRE", mask=sum(1 << b for b in open_rows))]
    block += [make("REFSB", bank=b) for b in sorted(open_rows)]
    return block + _reopen(open_rows)


def _reopen(open_rows: dict[int, int]) -> list[Instruction]:
    by_row: dict[int, int] = {}
    for b, row in sorted(open_rows.items()):
        by_row[row] = by_row.get(row, 0) | (1 << b)
    return [make("ACT", mask=mask, row=row) for row, mask in sorted(by_row.items(), key=lambda rm: rm[1] & -rm[1])]


def _refresh_block(open_rows: dict[int, int], loads: list[Instruction] = ()) -> list[Instruction]:
    """PRE the open banks, the buffer load `loads` (WRGBs, which need no open bank), REF, ACT each
    open row again (one ACT per row, all its banks)."""
    block: list[Instruction] = []
    if open_rows:
        block.append(make("PRE", mask=sum(1 << b for b in open_rows)))
    block.extend(loads)
    block.append(make("REF"))
    return block + _reopen(open_rows)
