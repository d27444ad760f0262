"""Binary stream records -> the kernel's table, compiled: the simulator's reader of streams held
as records (hwmodel.record_stream.RecordStream: read from a .bin or .s file), with no object
per instruction. The layout is hwmodel/table.py's (FIELD_COLUMNS, BASE_ROW), passed in as
arrays; `RecordStream.rows` is the same conversion in numpy (tests check they agree)."""

from __future__ import annotations

from functools import cache

import numpy as np

from hwmodel.isa import ISA
from hwmodel.isa_codec import MAX_FIELDS, layout_arrays
from hwmodel.model import Hardware
from hwmodel.record_stream import RecordStream
from hwmodel.table import BASE_ROW, C_CNT, C_MASK, C_N, C_STAMP, FIELD_COLUMNS, OPCODES, RDACC, REF, WIDTH

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
def _convert(lo, hi, cyc, internal, shift, width, cols, base, all_banks, bpb, out):  # pragma: no cover - compiled
    for k in range(len(lo)):
        w0, w1 = lo[k], hi[k]
        byte = np.int64(w0 & np.uint64(0xFF))
        op = internal[byte]
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
        out[k, 1] = np.int64(cyc[k])  # all ones (unstamped) -> -1
        if op == 4:  # REF
            out[k, 2] = all_banks
        elif op == 7:  # RDACC
            out[k, 5] = (4 * out[k, 8] + bpb - 1) // bpb


assert (C_STAMP, C_MASK, C_N, C_CNT, REF, RDACC) == (1, 2, 5, 8, 4, 7), "update _convert's column numbers"


def record_rows(hw: Hardware, stream: RecordStream, start: int, stop: int, out: np.ndarray | None = None) -> np.ndarray:
    """`stream.rows(start, stop, out, hw)`, compiled (the records were checked when read)."""
    rec = stream.records(start, stop)
    n = len(rec)
    if out is None:
        out = np.empty((n, WIDTH), dtype=np.int64)
    elif len(out) < n:
        raise ValueError(f"a buffer of {len(out)} rows for {n} instructions")
    table = out[:n]
    internal, shift, width, cols = _layout()
    _convert(
        np.ascontiguousarray(rec["lo"]),
        np.ascontiguousarray(rec["hi"]),
        np.ascontiguousarray(rec["cycle"]),
        internal,
        shift,
        width,
        cols,
        BASE_ROW,
        np.int64((1 << hw.organization.banks_per_channel) - 1),
        np.int64(hw.organization.burst_bytes),
        table,
    )
    return table
