"""A stream held as its binary records (isa_codec's format), not as one object per instruction.

The stream readers (binary and assembly) return a `RecordStream`: the simulator reads it as
its encoded table a slice at a time (`rows`), so a program read from disk goes to the kernel
with no Python object per instruction, and a stream file is read one window at a time (peak
memory grows with the window, not with the program). Indexing and iteration decode
`Instruction`s on demand (error messages, the functional pass, listings).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from .isa import ISA, Instruction
from .isa_codec import (
    HEADER,
    HEADER_BYTES,
    MAGIC,
    MAX_FIELDS,
    RECORD_BYTES,
    RECORD_DTYPE,
    UNSTAMPED,
    decode_records,
    isa_version_tuple,
    layout_arrays,
)
from .jit import JIT, njit
from .table import OPCODES, WIDTH, table_from_fields

#: records per window read from a file or converted at once
WINDOW = 1 << 16
#: ISA opcode byte -> the table's internal opcode (-1: not an opcode)
INTERNAL = np.full(256, -1, dtype=np.int64)
for _o in ISA.ops:
    INTERNAL[_o.opcode] = OPCODES[_o.mnemonic]
#: ISA opcode byte -> (field shifts, widths) padded to MAX_FIELDS (width 0: no such field), used bits
_SHIFT, _WIDTH, _USED = layout_arrays()


def record_fields(rec: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(ISA opcode bytes, field values in table order: an int64 (n, MAX_FIELDS) array) of
    records already checked (`check_records`)."""
    lo, hi = rec["lo"], rec["hi"]
    code = (lo & np.uint64(0xFF)).astype(np.int64)
    fields = np.zeros((len(rec), MAX_FIELDS), dtype=np.int64)
    uniq = np.unique(code).tolist()
    for c in uniq:
        sel = slice(None) if len(uniq) == 1 else code == c
        wlo, whi = lo[sel], hi[sel]
        for j in range(MAX_FIELDS):
            w = int(_WIDTH[c, j])
            if not w:
                break
            s = int(_SHIFT[c, j])
            mask = np.uint64((1 << w) - 1)
            if s >= 64:
                col = (whi >> np.uint64(s - 64)) & mask
            else:
                col = wlo >> np.uint64(s)
                if s + w > 64:
                    col = col | (whi << np.uint64(64 - s))
                col = col & mask
            fields[sel, j] = col.astype(np.int64)
    return code, fields


def _padding_masks() -> tuple[np.ndarray, np.ndarray]:
    """ISA opcode byte -> the bits of (lo, hi) a record must leave zero: bits [used, 128) are
    padding; a byte that is no opcode has every bit of lo and hi forbidden (its non-zero byte
    is in lo; byte 0 is checked on its own)."""
    lo = np.full(256, (1 << 64) - 1, dtype=np.uint64)
    hi = np.full(256, (1 << 64) - 1, dtype=np.uint64)
    for c in np.flatnonzero(INTERNAL >= 0).tolist():
        used = int(_USED[c])
        lo[c] = ((1 << 64) - 1) ^ ((1 << min(used, 64)) - 1)
        hi[c] = ((1 << 64) - 1) ^ ((1 << max(used - 64, 0)) - 1)
    return lo, hi


_PAD_LO, _PAD_HI = _padding_masks()
_ZERO_BAD = bool(INTERNAL[0] < 0)  # (byte 0: no opcode)


def first_bad_record(rec: np.ndarray) -> int | None:
    """Index of the first record with an unknown opcode or non-zero padding bits, or None."""
    lo, hi = rec["lo"], rec["hi"]
    code = lo & np.uint64(0xFF)
    bad = ((lo & _PAD_LO[code]) | (hi & _PAD_HI[code])) != 0
    if _ZERO_BAD:
        bad |= code == 0
    if not bad.any():
        return None
    return int(np.argmax(bad))


@njit
def _scan(words, pad_lo, pad_hi, zero_bad, kind_ok, max_stamp, out):
    """first_problems' loop over (n, 3) int64 words (cycle, lo, hi: the records' bits)."""
    for i in range(words.shape[0]):
        cyc, lo, hi = words[i, 0], words[i, 1], words[i, 2]
        if out[0] < 0 and cyc != -1 and (cyc < 0 or cyc > max_stamp):  # (-1: unstamped; < 0: >= 2**63)
            out[0] = i
        code = lo & 255
        if out[1] < 0 and ((lo & pad_lo[code]) != 0 or (hi & pad_hi[code]) != 0 or (zero_bad and code == 0)):
            out[1] = i
        if out[1] < 0 and out[2] < 0 and not kind_ok[code]:
            out[2] = i
        if out[0] >= 0 and out[1] >= 0:
            break


def first_problems(rec: np.ndarray, kind_ok: np.ndarray, max_stamp: int) -> tuple[int, int, int]:
    """Indices (-1: none) in records `rec` of the first stamp beyond max_stamp (not unstamped),
    the first record `first_bad_record` refuses, and the first record before any refused one
    whose opcode byte kind_ok[byte] does not allow; one compiled pass where numba is present."""
    out = np.full(3, -1, dtype=np.int64)
    if not JIT:  # (plain Python on millions of records: numpy instead)
        over = (rec["cycle"] != np.uint64(UNSTAMPED)) & (rec["cycle"] > np.uint64(max_stamp))
        bad = first_bad_record(rec)
        wrong = ~kind_ok[(rec["lo"][:bad] & np.uint64(0xFF)).astype(np.int64)]
        return (
            int(np.argmax(over)) if over.any() else -1,
            -1 if bad is None else bad,
            int(np.argmax(wrong)) if wrong.any() else -1,
        )
    words = np.ascontiguousarray(rec).view(np.int64).reshape(-1, 3)
    _scan(words, _PAD_LO_I, _PAD_HI_I, _ZERO_BAD, kind_ok, max_stamp, out)
    return int(out[0]), int(out[1]), int(out[2])


_PAD_LO_I, _PAD_HI_I = _PAD_LO.view(np.int64), _PAD_HI.view(np.int64)


class RecordStream(Sequence):
    """A stream of `count` records: in a file from byte `offset` (read a window at a time), or in
    an array. Records are checked by whoever builds one (the readers)."""

    has_rows = True
    width = WIDTH

    def __init__(self, records: np.ndarray | None = None, path: Path | None = None, offset: int = 0, count: int = 0):
        if (records is None) == (path is None):
            raise ValueError("a RecordStream is made of records or of a file")
        self._rec, self.path, self.offset = records, path, offset
        self._count = len(records) if records is not None else count

    def __len__(self) -> int:
        return self._count

    def records(self, start: int, stop: int) -> np.ndarray:
        """Records start..stop-1 (clipped to the stream)."""
        start, stop = max(0, start), min(stop, self._count)
        if stop <= start:
            return np.zeros(0, dtype=RECORD_DTYPE)
        if self._rec is not None:
            return self._rec[start:stop]
        return np.fromfile(self.path, dtype=RECORD_DTYPE, count=stop - start, offset=self.offset + start * RECORD_BYTES)

    def windows(self, size: int = WINDOW) -> Iterator[tuple[int, np.ndarray]]:
        """(start, records) front to back, `size` records at a time (one open file)."""
        if self._rec is not None:
            for a in range(0, self._count, size):
                yield a, self._rec[a : a + size]
            return
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            for a in range(0, self._count, size):
                yield a, np.fromfile(f, dtype=RECORD_DTYPE, count=min(size, self._count - a))

    def rows(self, start: int, stop: int, out: np.ndarray | None = None, hw=None) -> np.ndarray:
        """The simulator's table of instructions start..stop-1 (the first rows of `out`, or a new
        array); `hw` gives the hardware-dependent columns (REF's bank mask, RDACC's bursts)."""
        if hw is None:
            raise ValueError("RecordStream.rows needs the hardware")
        rec = self.records(start, stop)
        code, fields = record_fields(rec)
        stamps = rec["cycle"].astype(np.int64)  # UNSTAMPED (all ones) -> -1; stamps were checked < 2^62
        table = table_from_fields(hw, INTERNAL[code], fields, stamps)
        if out is None:
            return table
        if len(out) < len(table):
            raise ValueError(f"a buffer of {len(out)} rows for {len(table)} instructions")
        out[: len(table)] = table
        return out[: len(table)]

    def __getitem__(self, key):
        if isinstance(key, slice):
            start, stop, step = key.indices(self._count)
            if step != 1:
                return list(self)[key]
            return decode_records(self.records(start, stop))
        i = key + self._count if key < 0 else key
        if not 0 <= i < self._count:
            raise IndexError("stream index out of range")
        return decode_records(self.records(i, i + 1))[0]

    def __iter__(self) -> Iterator[Instruction]:
        for _, rec in self.windows():
            yield from decode_records(rec)

    def __eq__(self, other) -> bool:
        if not isinstance(other, Sequence) or len(other) != len(self):
            return False
        if isinstance(other, RecordStream):
            return all(np.array_equal(a, b) for (_, a), (_, b) in zip(self.windows(), other.windows()))
        return list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]

    def encoded_chunks(self) -> Iterator[bytes | memoryview]:
        """The stream file's bytes (isa_codec.encode_stream's format), header first."""
        major, minor = isa_version_tuple()
        yield HEADER.pack(MAGIC, major, minor, self._count)
        for _, rec in self.windows(1 << 18):
            yield memoryview(np.ascontiguousarray(rec)).cast("B")

    @property
    def encoded_bytes(self) -> int:
        return HEADER_BYTES + self._count * RECORD_BYTES

    def sha256(self) -> str:
        h = hashlib.sha256()
        for chunk in self.encoded_chunks():
            h.update(chunk)
        return h.hexdigest()
