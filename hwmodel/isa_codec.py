"""Fixed-width binary encoding of the pimsat ISA (hwmodel/isa.yaml).

Instruction word: 128 bits, opcode in bits [7:0], the fields packed from bit 8 upwards in table
order, every bit above the last field zero; stored as 16 little-endian bytes.

Stream file: a 16-byte header (magic b"PIMS", u16 ISA major, u16 ISA minor, u64 record count,
little-endian) then one 24-byte record per instruction: u64 issue cycle (all ones = unstamped)
followed by the 16-byte word.

The stream functions are vectorised with numpy (one pass per opcode) so that ~10^6
instructions encode or decode in about a second.
"""

from __future__ import annotations

import gc
import struct
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import chain, repeat

import numpy as np

from .isa import ISA, ISA_VERSION, Instruction, OpSpec, _trusted

WORD_BYTES = ISA.word_bits // 8
RECORD_BYTES = 8 + WORD_BYTES
MAGIC = b"PIMS"
HEADER = struct.Struct("<4sHHQ")
HEADER_BYTES = HEADER.size
UNSTAMPED = (1 << 64) - 1
_M64 = (1 << 64) - 1

RECORD_DTYPE = np.dtype([("cycle", "<u8"), ("lo", "<u8"), ("hi", "<u8")])
assert RECORD_DTYPE.itemsize == RECORD_BYTES


def isa_version_tuple(version: str = ISA_VERSION) -> tuple[int, int]:
    major, _, minor = version.partition(".")
    return int(major), int(minor or 0)


@dataclass(frozen=True)
class _Layout:
    """Bit positions of one instruction's fields."""

    spec: OpSpec
    shifts: tuple[int, ...]
    widths: tuple[int, ...]
    used_bits: int  # bits [0, used_bits) carry the opcode and fields; the rest must be zero

    def fields_at(self) -> list[tuple[str, int, int]]:
        """(name, low bit, high bit inclusive) for every field."""
        return [(f.name, s, s + f.bits - 1) for f, s in zip(self.spec.fields, self.shifts)]


def _layout(spec: OpSpec) -> _Layout:
    shifts, pos = [], ISA.opcode_bits
    for f in spec.fields:
        shifts.append(pos)
        pos += f.bits
    if pos > ISA.word_bits:
        raise ValueError(f"ISA table: {spec.mnemonic} needs {pos} bits > {ISA.word_bits}")
    return _Layout(spec, tuple(shifts), tuple(f.bits for f in spec.fields), pos)


LAYOUTS: dict[str, _Layout] = {o.mnemonic: _layout(o) for o in ISA.ops}
_BY_OPCODE: dict[int, _Layout] = {o.opcode: LAYOUTS[o.mnemonic] for o in ISA.ops}
#: the most fields any instruction has
MAX_FIELDS = max(len(o.fields) for o in ISA.ops)


def layout_arrays() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """LAYOUTS as arrays indexed by the opcode byte, for vectorised and compiled decoders: (field
    shifts, field widths: int64 (256, MAX_FIELDS), width 0 where there is no such field; used
    bits: int64 (256,), 0 for a byte that is no opcode)."""
    shift = np.zeros((256, MAX_FIELDS), dtype=np.int64)
    width = np.zeros((256, MAX_FIELDS), dtype=np.int64)
    used = np.zeros(256, dtype=np.int64)
    for code, lay in _BY_OPCODE.items():
        shift[code, : len(lay.shifts)] = lay.shifts
        width[code, : len(lay.widths)] = lay.widths
        used[code] = lay.used_bits
    return shift, width, used


# --- single words ---------------------------------------------------------------------------
def encode_word(instr: Instruction) -> int:
    lay = LAYOUTS[instr.op]
    w = lay.spec.opcode
    for v, s in zip(instr.args, lay.shifts):
        w |= v << s
    return w


def encode(instr: Instruction) -> bytes:
    """The 16-byte word of one instruction (its issue cycle is not part of the word)."""
    return encode_word(instr).to_bytes(WORD_BYTES, "little")


def decode_word(w: int, cycle: int | None = None) -> Instruction:
    lay = _BY_OPCODE.get(w & 0xFF)
    if lay is None:
        raise ValueError(f"unknown opcode 0x{w & 0xFF:02x} in word 0x{w:032x}")
    if w >> lay.used_bits:
        raise ValueError(
            f"{lay.spec.mnemonic} word 0x{w:032x}: padding bits [{ISA.word_bits - 1}:"
            f"{lay.used_bits}] must be zero, found 0x{w >> lay.used_bits:x}"
        )
    args = tuple((w >> s) & ((1 << b) - 1) for s, b in zip(lay.shifts, lay.widths))
    return Instruction(lay.spec.mnemonic, args, cycle)


def decode(data: bytes, cycle: int | None = None) -> Instruction:
    """Inverse of `encode`: 16 bytes -> Instruction (ValueError on a malformed word)."""
    if len(data) != WORD_BYTES:
        raise ValueError(f"an instruction word is {WORD_BYTES} bytes, got {len(data)}")
    return decode_word(int.from_bytes(data, "little"), cycle)


# --- streams -----------------------------------------------------------------------------


def _field_halves(col: np.ndarray, shift: int, width: int) -> tuple[np.ndarray | None, np.ndarray | None]:
    """A field column placed at `shift`, split into its low-64 and high-64 contributions."""
    if shift >= 64:
        return None, col << np.uint64(shift - 64)
    lo = col << np.uint64(shift)
    hi = col >> np.uint64(64 - shift) if shift + width > 64 else None
    return lo, hi


def encode_records(instrs: list[Instruction]) -> np.ndarray:
    """The records of a stream as a numpy structured array (RECORD_DTYPE)."""
    n = len(instrs)
    rec = np.zeros(n, dtype=RECORD_DTYPE)
    if n == 0:
        return rec
    rec["cycle"] = np.array([UNSTAMPED if i.cycle is None else i.cycle for i in instrs], dtype=np.uint64)
    ops = [i.op for i in instrs]
    groups: dict[str, list[int]] = {}
    for k, op in enumerate(ops):
        groups.setdefault(op, []).append(k)
    for op, idx_list in groups.items():
        lay = LAYOUTS[op]
        idx = np.array(idx_list, dtype=np.int64)
        lo = np.full(len(idx), lay.spec.opcode, dtype=np.uint64)
        hi = np.zeros(len(idx), dtype=np.uint64)
        if lay.shifts:
            flat = chain.from_iterable([instrs[k].args for k in idx_list])
            nf = len(lay.shifts)
            args = np.fromiter(flat, dtype=np.uint64, count=nf * len(idx_list)).reshape(-1, nf)
            for j, (s, b) in enumerate(zip(lay.shifts, lay.widths)):
                flo, fhi = _field_halves(args[:, j], s, b)
                if flo is not None:
                    lo |= flo
                if fhi is not None:
                    hi |= fhi
        rec["lo"][idx] = lo
        rec["hi"][idx] = hi
    return rec


def encode_stream(instrs: list[Instruction]) -> bytes:
    major, minor = isa_version_tuple()
    return HEADER.pack(MAGIC, major, minor, len(instrs)) + encode_records(instrs).tobytes()


def read_header(data: bytes, total: int | None = None) -> tuple[int, int, int]:
    """(ISA major, ISA minor, record count) of a stream; ValueError if it is not one. `data`:
    the stream, or its first bytes and `total` its length in bytes."""
    total = len(data) if total is None else total
    if total < HEADER_BYTES or len(data) < HEADER_BYTES:
        raise ValueError(f"stream too short for its {HEADER_BYTES}-byte header ({total} bytes)")
    magic, major, minor, count = HEADER.unpack_from(data)
    if magic != MAGIC:
        raise ValueError(f"not a pimsat stream: magic {magic!r}, expected {MAGIC!r}")
    ours = isa_version_tuple()
    if major != ours[0] or minor > ours[1]:
        raise ValueError(f"stream is ISA version {major}.{minor}; this build reads {ours[0]}.0-{ours[0]}.{ours[1]}")
    expected = HEADER_BYTES + count * RECORD_BYTES
    if total != expected:
        raise ValueError(f"header says {count} records ({expected} bytes) but the stream has {total} bytes")
    return major, minor, count


def _field_column(lo: np.ndarray, hi: np.ndarray, shift: int, width: int) -> np.ndarray:
    mask = np.uint64((1 << width) - 1)
    if shift >= 64:
        return (hi >> np.uint64(shift - 64)) & mask
    col = lo >> np.uint64(shift)
    if shift + width > 64:
        col = col | (hi << np.uint64(64 - shift))
    return col & mask


def _padding_mask(used_bits: int) -> tuple[int, int]:
    """Masks (low word, high word) of the bits at and above `used_bits`."""
    pad = ((1 << ISA.word_bits) - 1) ^ ((1 << used_bits) - 1)
    return pad & _M64, pad >> 64


def bad_record(rec: np.ndarray, k: int, base: int = 0) -> str:
    """Why record ``k`` of ``rec`` (record ``base + k`` of its file) does not decode, in one line
    naming the record and its byte offset in the file."""
    w = int(rec["lo"][k]) | (int(rec["hi"][k]) << 64)
    try:
        decode_word(w)
    except ValueError as e:
        return f"record {base + k} (byte {HEADER_BYTES + (base + k) * RECORD_BYTES}): {e}"
    raise AssertionError("a record found malformed decodes")  # pragma: no cover


@contextmanager
def no_gc():
    """Building 10^6 objects with the cyclic collector on costs twice the work itself."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def decode_records(rec: np.ndarray) -> list[Instruction]:
    with no_gc():
        return _decode_records(rec)


def _decode_records(rec: np.ndarray) -> list[Instruction]:
    n = len(rec)
    if n == 0:
        return []
    opcode = (rec["lo"] & np.uint64(0xFF)).astype(np.int64)
    known = np.isin(opcode, np.array(list(_BY_OPCODE), dtype=np.int64))
    if not known.all():
        raise ValueError(bad_record(rec, int(np.argmin(known))))
    out = np.empty(n, dtype=object)
    for code in np.unique(opcode).tolist():
        lay = _BY_OPCODE[code]
        idx = np.flatnonzero(opcode == code)
        lo, hi = rec["lo"][idx], rec["hi"][idx]
        plo, phi = _padding_mask(lay.used_bits)
        bad = ((lo & np.uint64(plo)) | (hi & np.uint64(phi))) != 0
        if bad.any():
            raise ValueError(bad_record(rec, int(idx[np.argmax(bad)])))
        cols = [_field_column(lo, hi, s, b).tolist() for s, b in zip(lay.shifts, lay.widths)]
        rows = zip(*cols) if cols else repeat((), len(idx))
        cycles = [None if c == UNSTAMPED else c for c in rec["cycle"][idx].tolist()]
        part = np.empty(len(idx), dtype=object)
        part[:] = list(map(_trusted, repeat(lay.spec.mnemonic), rows, cycles))
        out[idx] = part
    return out.tolist()


def decode_stream(data: bytes) -> list[Instruction]:
    """Inverse of `encode_stream`; ValueError naming the record on anything malformed."""
    _, _, count = read_header(data)
    rec = np.frombuffer(data, dtype=RECORD_DTYPE, count=count, offset=HEADER_BYTES)
    return decode_records(rec)
