"""Command log as CSV (:func:`write_command_log`), for replay by other DRAM tools."""

from __future__ import annotations

import os

import numpy as np

from hwmodel.model import COMMANDS, Hardware

from .trace_common import (
    _CHUNK,
    _atomic_open,
    _check_log,
    _Dec,
    _expand,
    _format_rows,
    _line_counts,
    _Lut,
    _order_by,
)

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
    (`ref_per_bank=True`: one line per bank refreshed instead); a command on no bank (e.g. WRGB)
    is one line with rank = bankgroup = bank = -1.
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
                    _Dec(rows["cycle"][src]),
                    b",",
                    _Lut(COMMANDS, cmd[src]),
                    b",",
                    _Dec(rows["channel"][src]),
                    b",",
                    _Dec(rank),
                    b",",
                    _Dec(bg),
                    b",",
                    _Dec(bk),
                    b",",
                    _Dec(rows["row"][src]),
                    b",",
                    _Dec(rows["col"][src]),
                    b"\n",
                ],
            )
            f.write(text)
            written += src.size
    return written
