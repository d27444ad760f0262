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
"""

from __future__ import annotations

from hwmodel import Hardware
from hwmodel.isa import ISA, Instruction, make

# A task whose commands alone take longer than this many tREFI carries its own REFs; shorter ones
# are covered by the decoder's REFs before them (up to 8 pulled in, well inside the 9 x tREFI
# interval).
LONG_TASK_INTERVALS = 4


def _field(ins: Instruction, name: str) -> int:
    return ins.args[ISA.by_mnemonic(ins.op).field_names.index(name)]


_COUNT = {op: ISA.by_mnemonic(op).field_names.index("count") for op in ("MAC", "RD", "WR", "WRGB")}


def _estimate(hw: Hardware, seq: list[Instruction]) -> int:
    """A quick lower estimate of the sequence's duration (bursts at their sweep spacing)."""
    t = hw.timing
    per = {
        "MAC": hw.mac_interval,
        "RD": max(t.p("tCCD_S"), hw.link_cycles),
        "WR": max(t.p("tCCD_S"), hw.link_cycles),
        "WRGB": max(t.p("tCCD_S"), hw.link_cycles),
    }
    total = 0
    for ins in seq:
        k = _COUNT.get(ins.op)
        total += 1 if k is None else per[ins.op] * ins.args[k]
    return total


def with_refresh(hw: Hardware, seq: list[Instruction]) -> list[Instruction]:
    """`seq` with REF blocks about every tREFI if it runs longer than LONG_TASK_INTERVALS x tREFI;
    else `seq` itself."""
    trefi = hw.timing.p("tREFI")
    if not seq or _estimate(hw, seq) < LONG_TASK_INTERVALS * trefi // 2:
        return seq
    from .task_timing import time_task  # late: task_timing times sequences this module builds

    timing = time_task(hw, seq)
    if timing.duration < LONG_TASK_INTERVALS * trefi:
        return seq
    p = hw.timing.params
    block = p["tRP"] + p["tRFC"] + p["tRCDMAC"]  # what one REF block adds, about
    out: list[Instruction] = []
    open_rows: dict[int, int] = {}  # bank -> open row
    k = 1
    for i, ins in enumerate(seq):
        # the k-th REF goes before the first instruction that would issue at or after k x tREFI
        # (counting the blocks already inserted), once the task has at least a tREFI left
        if int(timing.issue[i]) + (k - 1) * block >= k * trefi and timing.duration - int(timing.issue[i]) > trefi:
            out.extend(_refresh_block(open_rows))
            k += 1
        out.append(ins)
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
    return out


def _refresh_block(open_rows: dict[int, int]) -> list[Instruction]:
    """PRE the open banks, REF, ACT each open row again (one ACT per row, all its banks)."""
    block: list[Instruction] = []
    if open_rows:
        block.append(make("PRE", mask=sum(1 << b for b in open_rows)))
    block.append(make("REF"))
    by_row: dict[int, int] = {}
    for b, row in sorted(open_rows.items()):
        by_row[row] = by_row.get(row, 0) | (1 << b)
    for row, mask in sorted(by_row.items(), key=lambda rm: rm[1] & -rm[1]):
        block.append(make("ACT", mask=mask, row=row))
    return block
