"""Row changes hidden behind the other bank of each PIM unit (issue 16).

With two banks per unit the layout alternates DRAM rows (segments) between them, so while the
units stream one segment the other bank can be precharged and activated for the next. A sweep
instruction (MAC, RD) holds the channel's in-order command stream until its last burst, so the
row commands must go *between* bursts: `RowCommands` holds them with the number of bursts to
issue first and splits a sweep where one falls due (MAC count=k1; PRE; MAC ...; ACT; MAC rest).
The waits come from the timing table (`row_change_waits`): each command goes out at the first
burst boundary at which the table allows it without holding back a burst.
"""

from __future__ import annotations

from collections import deque

from hwmodel import Hardware
from hwmodel.isa import Instruction


def row_change_waits(hw: Hardware, step: int | None = None) -> tuple[int, int]:
    """(PRE, ACT): bursts of a segment to issue before the other bank set's PRE (of the row it
    has just finished) and before its ACT (of its next row), so that each goes out as soon as
    the timing table allows and no burst waits for it. Bursts are MACs (every mac_interval) or,
    with `step`, reads over the link (every `step` cycles).

    Let B0 be the segment's first burst, I the burst spacing, the other bank's last burst at
    B0 - I (the segments stream back to back). The PRE may issue at B0 + d_pre, d_pre = tRTP - I
    (MAC -> PRE and RD -> PRE, same bank). Placed after w bursts it issues at
    max(B0 + (w - 1) I + 1, B0 + d_pre) and delays no burst iff d_pre <= w I - 1:
    w_pre = ceil((d_pre + 1) / I), at least 0. The ACT may issue tRP after the PRE, at B0 + d_act,
    d_act = max((w_pre - 1) I + 1, d_pre) + tRP: w_act = ceil((d_act + 1) / I). ACT -> PRE tRAS
    and ACT -> ACT tRC of that bank are not assumed: the simulator holds back a command they
    forbid (and the sweep behind it), so the program stays legal and its timing exact; a bank
    that streamed a whole segment has met them (fpga-proto: ACT + tRCDMAC + 8 bursts >= tRAS).
    On fpga-proto (I 4, tRTP 5, tRP 14): PRE after 1 burst at B0 + 1, ACT after 4 at B0 + 15."""
    t, step = hw.timing, step or hw.mac_interval
    d_pre = t.p("tRTP") - step
    w_pre = max(0, -(-(d_pre + 1) // step))
    pre_at = max((w_pre - 1) * step + 1, d_pre) if w_pre else d_pre
    d_act = pre_at + t.p("tRP")
    w_act = max(w_pre, -(-(d_act + 1) // step))
    return w_pre, w_act


def readout_act_wait(hw: Hardware) -> int:
    """MAC bursts of a pass's first segment before the other bank set's ACT when its PRE goes
    right after the previous pass's read-out (RDACC), before the segment's first MAC. The read-out
    waited tMACL >= tRTP after the last MAC, so the PRE is legal at once (cycle R + 1 after the
    last RDACC at R), and the first MAC follows the RDACC by at least g + 1 cycles, g + 1 the
    longest RDACC -> MAC row of the table (tCCD_L on a bank group): the PRE is at least g cycles
    before the first burst B0, its ACT legal at B0 + tRP - g, placed after
    w = ceil((tRP - g + 1) / I) bursts. On fpga-proto: g = 3, w = 3 (ACT at B0 + 11)."""
    t = hw.timing
    g = max((t.latency_of(c) for c in t.constraints if c.prev == "RDACC" and c.next == "MAC"), default=1) - 1
    return max(0, -(-(t.p("tRP") - g + 1) // hw.mac_interval))


class RowCommands:
    """Row commands (PRE, ACT) waiting for a number of bursts: sweeps go through `mac` or `run`,
    which split a sweep where a command falls due inside it (same bank or accumulator,
    consecutive columns and buffer bursts or host elements), so the command goes out between two
    bursts instead of after the whole sweep."""

    def __init__(self, seq: list[Instruction], mac=None):
        """`mac(mask, col, count, gb, acc)` builds a MAC instruction (for `mac`)."""
        self.seq, self.make = seq, mac
        self.pending: deque[tuple[int, Instruction]] = deque()  # (due after this many bursts, command)
        self.bursts = 0  # bursts emitted since the counter started

    def queue(self, after: int, ins: Instruction) -> None:
        """`ins` after `after` more bursts (commands stay in queue order)."""
        if not self.pending:
            self.bursts = 0
        due = self.bursts + after
        if self.pending:
            due = max(due, self.pending[-1][0])
        self.pending.append((due, ins))

    def flush(self, keep: int = 0) -> list[Instruction]:
        """Emit every pending command now, but the ACTs (and what follows them) of a bank in
        the mask `keep`: those are returned, for the caller to place."""
        out = [ins for _due, ins in self.pending]
        self.pending.clear()
        cut = next((i for i, ins in enumerate(out) if ins.op == "ACT" and ins.args[0] & keep), len(out))
        self.seq.extend(out[:cut])
        return out[cut:]

    def run(self, n: int, piece) -> None:
        """A sweep of `n` bursts, `piece(a, b)` its bursts a..b-1 as one instruction, split where
        a pending command falls due."""
        seq, done = self.seq, 0
        while self.pending and self.pending[0][0] < self.bursts + n:
            k = self.pending[0][0] - self.bursts
            if k > done:
                seq.append(piece(done, k))
                done = k
            seq.append(self.pending.popleft()[1])
        if done < n:
            seq.append(piece(done, n))
        self.bursts += n

    def mac(self, mask: int, col: int, n: int, gb: int, acc: int) -> None:
        """A MAC sweep (`run` without a closure: the emitters' hot path)."""
        seq, done = self.seq, 0
        while self.pending and self.pending[0][0] < self.bursts + n:
            k = self.pending[0][0] - self.bursts  # bursts of this run before the command
            if k > done:
                seq.append(self.make(mask, col + done, k - done, gb + done, acc))
                done = k
            seq.append(self.pending.popleft()[1])
        if done < n:
            seq.append(self.make(mask, col + done, n - done, gb + done, acc))
        self.bursts += n
        # a command due right after this sweep waits for the next one (or a flush): a buffer load
        # that follows this sweep goes out first, while the command may still be held back
