"""The encoded-table layout: how an instruction stream becomes the int64 table the channel
kernel reads (hardware semantics of the ISA encoding; the solver builds tables with it, the
simulator executes them). sim/channel.py keeps its own copy of the constants (numba's cache is
keyed on that file) and asserts them equal to these.

One row per instruction, columns (see C_*): internal opcode (0..8 = index into
hwmodel.model.COMMANDS, then HOP, SIG, WAIT, EPI, HMV, LAUNCH), stamp (-1 = unstamped), bank mask, row,
column, number of bus commands, global-buffer burst, accumulator, count field, bank field
(-1 for mask instructions), host symbol (src / dst; -1 if none). RDACC moves
ceil(4*count / burst_bytes) bursts: that many commands.
"""

from __future__ import annotations

from itertools import chain
from operator import attrgetter

import numpy as np

from .isa import Instruction
from .model import COMMANDS, Hardware

#: command indices (0..8 follow hwmodel.model.COMMANDS), then the non-command instructions
ACT, PRE, RD, WR, REF, MAC, WRGB, RDACC, REFSB = range(9)
assert COMMANDS == ("ACT", "PRE", "RD", "WR", "REF", "MAC", "WRGB", "RDACC", "REFSB"), "update the command indices"
# (SIG even and WAIT = SIG + 1: sim/encode.py finds both with one shift)
OP_HOP, OP_SIG, OP_WAIT, OP_EPI, OP_HMV, OP_LAUNCH = 9, 10, 11, 12, 13, 14
#: instruction table columns
(C_OP, C_STAMP, C_MASK, C_ROW, C_COL, C_N, C_GB, C_ACC, C_CNT, C_BANK, C_SYM) = range(11)
WIDTH = 11
LAYOUT = dict(
    ACT=ACT,
    PRE=PRE,
    RD=RD,
    WR=WR,
    REF=REF,
    MAC=MAC,
    WRGB=WRGB,
    RDACC=RDACC,
    REFSB=REFSB,
    OP_SIG=OP_SIG,
    OP_WAIT=OP_WAIT,
    OP_HOP=OP_HOP,
    OP_EPI=OP_EPI,
    OP_HMV=OP_HMV,
    OP_LAUNCH=OP_LAUNCH,
    C_OP=C_OP,
    C_STAMP=C_STAMP,
    C_MASK=C_MASK,
    C_ROW=C_ROW,
    C_COL=C_COL,
    C_N=C_N,
    C_GB=C_GB,
    C_ACC=C_ACC,
    C_CNT=C_CNT,
    C_BANK=C_BANK,
    C_SYM=C_SYM,
    WIDTH=WIDTH,
)

OPCODES = {
    **{c: i for i, c in enumerate(COMMANDS)},
    "SIG": OP_SIG,
    "WAIT": OP_WAIT,
    "HOP": OP_HOP,
    "EPI": OP_EPI,
    "HMV": OP_HMV,
    "LAUNCH": OP_LAUNCH,
}


assert max(OPCODES.values()) < 32  # encode_stream keys distinct commands by (field tuple id << 5 | opcode)
_NARGS = np.zeros(len(OPCODES), dtype=np.int64)
for _m, _c in OPCODES.items():
    from .isa import ISA as _ISA

    _NARGS[_c] = len(_ISA.by_mnemonic(_m).fields)


_OP, _CYCLE, _ARGS = attrgetter("op"), attrgetter("cycle"), attrgetter("args")


def encode_stream(hw: Hardware, stream: list[Instruction]) -> np.ndarray:
    """Vectorised: a few passes over the Instruction objects, the rest in numpy.

    Emitters hand out one object per distinct command (a MAC, ACT or GB write recurs across
    passes, chunks and channels) and stamping keeps its field tuple, so the fields are decoded
    once per distinct field tuple (by identity) and the rows gathered from those."""
    n = len(stream)
    if n == 0:
        return np.zeros((0, WIDTH), dtype=np.int64)
    opc = np.fromiter(map(OPCODES.__getitem__, map(_OP, stream)), dtype=np.int64, count=n)
    cycles = list(map(_CYCLE, stream))
    unstamped = cycles.count(None)
    if unstamped == n:  # (an emitter's commands, timed by the oracle)
        stamps = np.full(n, -1, dtype=np.int64)
    elif unstamped == 0:
        stamps = np.array(cycles, dtype=np.int64)
    else:
        stamps = np.fromiter((-1 if c is None else c for c in cycles), dtype=np.int64, count=n)
    # identity of (opcode, field tuple): the tuples are alive in `stream`, so ids are distinct
    ids = np.fromiter(map(id, map(_ARGS, stream)), dtype=np.uint64, count=n)
    out = None
    if n > 64 and int(ids.max()) < 1 << 58:
        uniq, first, inverse = np.unique((ids.astype(np.int64) << 5) | opc, return_index=True, return_inverse=True)
        if 2 * len(uniq) <= n:
            out = encode_fields(hw, [stream[i] for i in first], opc[first])[inverse.reshape(-1)]
    if out is None:
        out = encode_fields(hw, stream, opc)
    out[:, C_STAMP] = stamps
    return out


def encode_fields(hw: Hardware, stream: list[Instruction], opc: np.ndarray) -> np.ndarray:
    """The rows of `stream` but for the stamp column."""
    n = len(stream)
    lens = _NARGS[opc]
    flat = np.fromiter(chain.from_iterable(map(_ARGS, stream)), dtype=np.int64, count=int(lens.sum()))
    off = np.cumsum(lens) - lens

    def arg(sel, k):
        return flat[off[sel] + k]

    return _fill(hw, n, opc, arg)


def table_from_fields(hw: Hardware, opc: np.ndarray, fields: np.ndarray, stamps: np.ndarray) -> np.ndarray:
    """The table of instructions given as arrays: internal opcodes, their field values in ISA
    table order (row k: instruction k's fields, unused columns ignored) and stamps (-1 =
    unstamped). The binary and assembly readers build streams this way, with no object per
    instruction."""
    out = _fill(hw, len(opc), opc, lambda sel, k: fields[sel, k])
    out[:, C_STAMP] = stamps
    return out


#: where each ISA field goes in the table, per instruction, in field order (a field may fill two
#: columns; fields not listed - RD/WR/WRGB/RDACC's host offset, WR's emask, the chain flags - are
#: read from the instructions by the functional pass). Two hardware-dependent columns are derived:
#: REF's mask (every bank of the channel) and RDACC's bus commands (ceil(4 * count / burst bytes)).
FIELD_COLUMNS: dict[int, tuple[tuple[int, ...], ...]] = {
    ACT: ((C_MASK,), (C_ROW,)),
    PRE: ((C_MASK,),),
    RD: ((C_BANK,), (C_COL,), (C_N, C_CNT), (C_SYM,)),
    WR: ((C_BANK,), (C_COL,), (C_N, C_CNT), (C_SYM,)),
    REF: (),
    MAC: ((C_MASK,), (C_COL,), (C_N, C_CNT), (C_GB,), (C_ACC,)),
    WRGB: ((C_GB,), (C_N, C_CNT), (C_SYM,)),
    RDACC: ((C_BANK,), (C_ACC,), (C_CNT,), (C_SYM,)),
    REFSB: ((C_BANK,),),
    **{op: ((C_ROW,),) for op in (OP_SIG, OP_WAIT, OP_HOP, OP_EPI, OP_HMV)},  # signal id / op index
    OP_LAUNCH: (),
}
#: a row before its fields are filled in, per internal opcode (stamp -1 = unstamped)
BASE_ROW = np.zeros((len(OPCODES), WIDTH), dtype=np.int64)
BASE_ROW[:, C_STAMP] = -1
BASE_ROW[:, [C_BANK, C_COL, C_SYM]] = -1
BASE_ROW[:, [C_N, C_CNT]] = 1
for _op in (OP_SIG, OP_WAIT, OP_HOP, OP_EPI, OP_HMV, OP_LAUNCH):  # no bus command
    BASE_ROW[_op, [C_N, C_CNT]] = 0
BASE_ROW[:, C_OP] = np.arange(len(OPCODES))
assert set(FIELD_COLUMNS) == set(OPCODES.values())


def _fill(hw: Hardware, n: int, opc: np.ndarray, arg) -> np.ndarray:
    """Rows for `n` instructions of internal opcodes `opc`; `arg(sel, k)`: field k (ISA table
    order) of the instructions selected by the boolean mask `sel`."""
    out = BASE_ROW[opc]
    for code in np.unique(opc).tolist():
        sel = opc == code
        for k, cols in enumerate(FIELD_COLUMNS[code]):
            v = arg(sel, k)
            for c in cols:
                out[sel, c] = v
        if code == REF:
            out[sel, C_MASK] = (1 << hw.organization.banks_per_channel) - 1
        elif code == RDACC:
            out[sel, C_N] = -(-4 * out[sel, C_CNT] // hw.organization.burst_bytes)
    return out
