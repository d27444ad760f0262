"""Streams of `Instruction` objects -> int64 tables the channel kernel reads.

One row per instruction, columns (see C_*): internal opcode (0..7 = index into
hwmodel.model.COMMANDS, then SIG, WAIT, HOP, EPI), stamp (-1 = unstamped), bank mask, row,
column, number of bus commands, global-buffer burst, accumulator, count field, bank field
(-1 for mask instructions), host symbol (src / dst; -1 if none). RDACC moves ceil(4*count / burst_bytes) bursts: that many commands.
Signal ids are renumbered densely over all streams (``signal_ids`` maps back).
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import chain
from operator import attrgetter

import numpy as np

from hwmodel.isa import Instruction
from hwmodel.model import COMMANDS, Hardware

from .channel import (C_ACC, C_BANK, C_CNT, C_COL, C_GB, C_MASK, C_N, C_OP, C_ROW, C_STAMP, C_SYM, OP_EPI,  # noqa: F401
                      OP_HOP, OP_SIG, OP_WAIT, WIDTH)

OPCODES = {**{c: i for i, c in enumerate(COMMANDS)}, "SIG": OP_SIG, "WAIT": OP_WAIT, "HOP": OP_HOP, "EPI": OP_EPI}


_NARGS = np.zeros(len(OPCODES), dtype=np.int64)
for _m, _c in OPCODES.items():
    from hwmodel.isa import ISA as _ISA
    _NARGS[_c] = len(_ISA.by_mnemonic(_m).fields)


_OP, _CYCLE, _ARGS = attrgetter("op"), attrgetter("cycle"), attrgetter("args")


def encode_stream(hw: Hardware, stream: list[Instruction]) -> np.ndarray:
    """Vectorised: three passes over the Instruction objects, the rest in numpy."""
    n = len(stream)
    out = np.zeros((n, WIDTH), dtype=np.int64)
    if n == 0:
        return out
    opc = np.fromiter(map(OPCODES.__getitem__, map(_OP, stream)), dtype=np.int64, count=n)
    out[:, C_OP] = opc
    out[:, C_STAMP] = np.fromiter((-1 if c is None else c for c in map(_CYCLE, stream)), dtype=np.int64, count=n)
    lens = _NARGS[opc]
    flat = np.fromiter(chain.from_iterable(map(_ARGS, stream)), dtype=np.int64, count=int(lens.sum()))
    off = np.cumsum(lens) - lens
    out[:, C_BANK] = -1
    out[:, C_COL] = -1
    out[:, C_N] = 1
    out[:, C_CNT] = 1
    out[:, C_SYM] = -1

    def arg(sel, k):
        return flat[off[sel] + k]

    bpb = hw.organization.burst_bytes
    for code in np.unique(opc):
        sel = opc == code
        if code == OPCODES["ACT"]:
            out[sel, C_MASK], out[sel, C_ROW] = arg(sel, 0), arg(sel, 1)
        elif code == OPCODES["PRE"]:
            out[sel, C_MASK] = arg(sel, 0)
        elif code in (OPCODES["RD"], OPCODES["WR"]):
            out[sel, C_BANK], out[sel, C_COL] = arg(sel, 0), arg(sel, 1)
            out[sel, C_N] = out[sel, C_CNT] = arg(sel, 2)
            out[sel, C_SYM] = arg(sel, 3)
        elif code == OPCODES["REF"]:
            out[sel, C_MASK] = (1 << hw.organization.banks_per_channel) - 1
        elif code == OPCODES["MAC"]:
            out[sel, C_MASK], out[sel, C_COL] = arg(sel, 0), arg(sel, 1)
            out[sel, C_N] = out[sel, C_CNT] = arg(sel, 2)
            out[sel, C_GB], out[sel, C_ACC] = arg(sel, 3), arg(sel, 4)
        elif code == OPCODES["WRGB"]:
            out[sel, C_GB] = arg(sel, 0)
            out[sel, C_N] = out[sel, C_CNT] = arg(sel, 1)
            out[sel, C_SYM] = arg(sel, 2)
        elif code == OPCODES["RDACC"]:
            out[sel, C_BANK], out[sel, C_ACC] = arg(sel, 0), arg(sel, 1)
            out[sel, C_CNT] = arg(sel, 2)
            out[sel, C_N] = -(-4 * arg(sel, 2) // bpb)
            out[sel, C_SYM] = arg(sel, 3)
        else:  # SIG, WAIT (signal id), HOP, EPI (op index)
            out[sel, C_ROW] = arg(sel, 0)
            out[sel, C_N] = 0
            out[sel, C_CNT] = 0
    return out


@dataclass
class Encoded:
    channels: list[np.ndarray]   # [n_c, WIDTH] per channel
    host: np.ndarray             # [n_h, WIDTH]
    signal_ids: np.ndarray       # dense index -> ISA signal id


def encode(hw: Hardware, channels: list[list[Instruction]], host: list[Instruction]) -> Encoded:
    tabs = [encode_stream(hw, s) for s in channels]
    htab = encode_stream(hw, host)
    ids = []
    for t in tabs + [htab]:
        sel = (t[:, C_OP] == OP_SIG) | (t[:, C_OP] == OP_WAIT)
        ids.append(t[sel, C_ROW])
    uniq = np.unique(np.concatenate(ids)) if ids else np.zeros(0, dtype=np.int64)
    for t in tabs + [htab]:
        sel = (t[:, C_OP] == OP_SIG) | (t[:, C_OP] == OP_WAIT)
        t[sel, C_ROW] = np.searchsorted(uniq, t[sel, C_ROW])
    return Encoded(tabs, htab, uniq)
