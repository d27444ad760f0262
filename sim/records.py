"""Binary stream records -> the kernel's table, compiled: the simulator's reader of streams held
as records (hwmodel.record_stream.RecordStream: read from a .bin or .s file), with no object
per instruction. The layout is hwmodel/table.py's (FIELD_COLUMNS, BASE_ROW), passed in as
arrays; `RecordStream.rows` is the same conversion in numpy (tests check they agree)."""

from __future__ import annotations

from functools import cache

import numpy as np

from hwmodel.isa import ISA
from hwmodel.isa_codec import MAX_FIELDS, RECORD_DTYPE, layout_arrays
from hwmodel.model import Hardware
from hwmodel.record_stream import RecordStream
from hwmodel.table import BASE_ROW, C_CNT, C_MASK, C_N, C_OP, C_STAMP, C_SYM, FIELD_COLUMNS, OPCODES, RDACC, REF, WIDTH

from .jit import njit


@cache
def _layout() -> tuple[np.ndarray, ...]:
    internal = np.full(256, -1, dtype=np.int64)
    shift, width, _ = layout_arrays()
    cols = np.full((256, MAX_FIELDS, 2), -1, dtype=np.int64)
    for o in ISA.ops:
        code = OPCODES[o.mnemonic]
        internal[o.opcode] = code
        for j, cs in enumerate(FIELD_COLUMNS[code]):
            cols[o.opcode, j, : len(cs)] = cs
    return internal, shift, width, cols


@njit
def _convert(words, internal, shift, width, cols, base, all_banks, bpb, out):  # pragma: no cover - compiled
    """Rows of the records `words` (uint64 [n, 3]: cycle, lo, hi) into `out`; returns the
    bitmask of the table opcodes present (bit op)."""
    present = np.int64(0)
    for k in range(words.shape[0]):
        w0, w1 = words[k, 1], words[k, 2]
        byte = np.int64(w0 & np.uint64(0xFF))
        op = internal[byte]
        present |= np.int64(1) << op
        for c in range(base.shape[1]):
            out[k, c] = base[op, c]
        for j in range(shift.shape[1]):
            b = width[byte, j]
            if b == 0:
                break
            s = shift[byte, j]
            m = (np.uint64(1) << np.uint64(b)) - np.uint64(1)
            if s >= 64:
                v = (w1 >> np.uint64(s - 64)) & m
            elif s + b > 64:
                v = ((w0 >> np.uint64(s)) | (w1 << np.uint64(64 - s))) & m
            else:
                v = (w0 >> np.uint64(s)) & m
            for t in range(2):
                col = cols[byte, j, t]
                if col >= 0:
                    out[k, col] = np.int64(v)
        out[k, 1] = np.int64(words[k, 0])  # all ones (unstamped) -> -1
        if op == 4:  # REF
            out[k, 2] = all_banks
        elif op == 7:  # RDACC
            out[k, 5] = (4 * out[k, 8] + bpb - 1) // bpb
    return present


assert RECORD_DTYPE.names == ("cycle", "lo", "hi") and RECORD_DTYPE == np.dtype(
    [("cycle", "=u8"), ("lo", "=u8"), ("hi", "=u8")]
), "_convert reads a record as three native uint64 words: cycle, lo, hi"
assert (C_STAMP, C_MASK, C_N, C_CNT, REF, RDACC) == (1, 2, 5, 8, 4, 7), "update _convert's column numbers"


def record_rows(hw: Hardware, stream: RecordStream, start: int, stop: int, out: np.ndarray | None = None) -> np.ndarray:
    """`stream.rows(start, stop, out, hw)`, compiled (the records were checked when read)."""
    return record_rows_ops(hw, stream, start, stop, out)[0]


def record_rows_ops(
    hw: Hardware, stream: RecordStream, start: int, stop: int, out: np.ndarray | None = None
) -> tuple[np.ndarray, int]:
    """`record_rows` and the bitmask of the table opcodes among those rows (bit `op`), so the
    caller skips the checks of opcodes that are absent (SIG/WAIT, RDACC) without a pass over the
    table."""
    rec = np.ascontiguousarray(stream.records(start, stop))
    n = len(rec)
    if out is None:
        out = np.empty((n, WIDTH), dtype=np.int64)
    elif len(out) < n:
        raise ValueError(f"a buffer of {len(out)} rows for {n} instructions")
    table = out[:n]
    internal, shift, width, cols = _layout()
    present = _convert(
        rec.view(np.uint64).reshape(n, 3),  # the record's fields in place: no copy of each column
        internal,
        shift,
        width,
        cols,
        BASE_ROW,
        np.int64((1 << hw.organization.banks_per_channel) - 1),
        np.int64(hw.organization.burst_bytes),
        table,
    )
    return table, int(present)


@njit
def _scan(table, c_op, c_sym):  # pragma: no cover - compiled
    present, top = np.int64(0), np.int64(-1)
    for k in range(table.shape[0]):
        op = table[k, c_op]
        if 0 <= op < 63:  # (an opcode out of range is the kernel's to report)
            present |= np.int64(1) << op
        if table[k, c_sym] > top:
            top = table[k, c_sym]
    return present, top


def ops_and_symbols(table: np.ndarray) -> tuple[int, int]:
    """(bitmask of the table opcodes present, the largest symbol index or -1) of a slice's rows,
    in one compiled pass (the checks that refuse a slice look only for what is in it)."""
    if len(table) == 0:
        return 0, -1
    present, top = _scan(table, np.int64(C_OP), np.int64(C_SYM))
    return int(present), int(top)
