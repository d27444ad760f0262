"""Assembly text -> binary records in one compiled pass over the bytes (no object per line).

`parse_records(path)` assembles an assembly file into isa_codec records. It accepts exactly
what `isa_asm.parse_stream` accepts: anything the fast path is not sure of (a non-ASCII or
control byte, a token it does not know, a missing, repeated or too wide field, a stamp beyond
range, a number of more than 20 digits) sends the whole file through `parse_stream`, which
gives the precise `source:line:` error or, for valid text the fast path declined, the same
records. Without numba (hwmodel/jit.py) every file takes the line by line parser.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np

from .isa import ISA
from .isa_asm import parse_stream
from .isa_codec import RECORD_DTYPE, encode_records
from .jit import JIT, njit

_OPS = ISA.ops


def _key(text: str) -> int:
    b = text.encode()
    assert len(b) <= 8
    return int.from_bytes(b.ljust(8, b"\0"), "big")


_MN_KEYS = np.array([_key(o.mnemonic) for o in _OPS], dtype=np.uint64)  # op index -> packed mnemonic
_NAMES = sorted({f.name for o in _OPS for f in o.fields})
_NAME_KEYS = np.array([_key(n) for n in _NAMES], dtype=np.uint64)
_NF = max(len(o.fields) for o in _OPS)
#: [op index, name index] -> position of that field in the op (-1: not a field of the op)
_FIELD_POS = np.full((len(_OPS), max(len(_NAMES), 1)), -1, dtype=np.int64)
_SHIFT = np.zeros((len(_OPS), _NF), dtype=np.int64)
_BITS = np.zeros((len(_OPS), _NF), dtype=np.int64)
_REQUIRED = np.zeros(len(_OPS), dtype=np.int64)  # bit j: field j has no default
_DEFAULT_LO = np.zeros((len(_OPS), 1 << _NF), dtype=np.uint64)  # the defaults' bits, by fields present
_OPCODE = np.array([o.opcode for o in _OPS], dtype=np.uint64)
for _i, _o in enumerate(_OPS):
    _pos = ISA.opcode_bits
    for _j, _f in enumerate(_o.fields):
        _FIELD_POS[_i, _NAMES.index(_f.name)] = _j
        _SHIFT[_i, _j], _BITS[_i, _j] = _pos, _f.bits
        _pos += _f.bits
        if _f.default is None:
            _REQUIRED[_i] |= 1 << _j
    for _present in range(1 << len(_o.fields)):
        _bits = 0
        for _j, _f in enumerate(_o.fields):
            if _f.default is not None and not _present >> _j & 1:
                _bits |= _f.default << int(_SHIFT[_i, _j])
        assert _bits < 1 << 64, "a default beyond the low word"
        _DEFAULT_LO[_i, _present] = _bits

_UNSTAMPED = np.uint64(0xFFFFFFFFFFFFFFFF)
_MAX_STAMP = np.uint64(0xFFFFFFFFFFFFFFFE)  # isa_asm's limit: all ones marks "unstamped"


@njit(inline=True)
def _blank(c):  # pragma: no cover - compiled
    return c == 32 or c == 9 or c == 13


@njit(inline=True)
def _token_end(a, i):  # pragma: no cover - compiled
    """First byte at or after i that ends a token: a blank, a newline, '#' or the end."""
    while i < len(a) and not (_blank(a[i]) or a[i] == 10 or a[i] == 35):
        i += 1
    return i


@njit(inline=True)
def _pack(a, i, j):  # pragma: no cover - compiled
    """Bytes [i, j) (at most 8) packed big-endian into a uint64, as _key does."""
    key = np.uint64(0)
    for t in range(8):
        key = key << np.uint64(8)
        if i + t < j:
            key = key | np.uint64(a[i + t])
    return key


@njit(inline=True)
def _number(a, i, j):  # pragma: no cover - compiled
    """isa_asm._parse_int of bytes [i, j) -> (value, ok): below 2^64, decimal up to 20 digits, 0x/0X hex up to 16."""
    base = 10
    if j - i > 2 and a[i] == 48 and (a[i + 1] | 32) == 120:
        base = 16
        i += 2
    if i >= j or j - i > (16 if base == 16 else 20):
        return np.uint64(0), False
    v = np.uint64(0)
    for t in range(i, j):
        c = np.int64(a[t])
        if 48 <= c <= 57:
            d = c - 48
        elif base == 16 and 97 <= (c | 32) <= 102:
            d = (c | 32) - 87
        else:
            return np.uint64(0), False
        if base == 10 and (v > np.uint64(1844674407370955161) or (v == np.uint64(1844674407370955161) and d > 5)):
            return np.uint64(0), False  # beyond 2^64 - 1
        v = v * np.uint64(base) + np.uint64(d)
    return v, True


@njit(inline=True)
def _find(keys, key):  # pragma: no cover - compiled
    """The index of ``key`` in ``keys`` (a packed mnemonic or field name), -1 if absent."""
    for t in range(len(keys)):
        if keys[t] == key:
            return t
    return -1


@njit
def _assemble(a, mn_keys, name_keys, field_pos, shift, bits, required, default_lo, opcode, cyc, lo_out, hi_out):
    """Records of the assembly bytes `a` into cyc/lo_out/hi_out: their count, or -1 where the
    line by line parser must decide (an error, or text this path does not take)."""
    n = len(a)  # pragma: no cover - compiled
    for t in range(n):
        c = a[t]
        if c >= 127 or (c < 32 and c != 9 and c != 10 and c != 13) or (c == 13 and (t + 1 >= n or a[t + 1] != 10)):
            return -1  # a byte str.split / splitlines would treat otherwise (a lone CR breaks a line)
    k = 0
    i = 0
    while i < n:
        while i < n and _blank(a[i]):
            i += 1
        if i >= n:
            break
        if a[i] == 10:
            i += 1
            continue
        if a[i] == 35:  # a comment line
            while i < n and a[i] != 10:
                i += 1
            continue
        cycle = _UNSTAMPED
        if a[i] == 64:  # @stamp
            j = _token_end(a, i + 1)
            v, ok = _number(a, i + 1, j)
            if not ok or v > _MAX_STAMP:
                return -1
            cycle = v
            i = j
            while i < n and _blank(a[i]):
                i += 1
            if i >= n or a[i] == 10 or a[i] == 35:
                return -1  # a stamp without an instruction
        j = _token_end(a, i)
        if j - i > 8:
            return -1
        op = _find(mn_keys, _pack(a, i, j))
        if op < 0:
            return -1
        i = j
        lo = opcode[op]
        hi = np.uint64(0)
        present = 0
        while True:  # name=value fields
            while i < n and _blank(a[i]):
                i += 1
            if i >= n or a[i] == 10:
                break
            if a[i] == 35:
                while i < n and a[i] != 10:
                    i += 1
                break
            e = i
            while e < n and a[e] != 61 and not (_blank(a[e]) or a[e] == 10 or a[e] == 35):
                e += 1
            if e >= n or a[e] != 61 or e == i or e - i > 8:
                return -1
            name = _find(name_keys, _pack(a, i, e))
            if name < 0:
                return -1
            pos = field_pos[op, name]
            if pos < 0 or (present >> pos) & 1:
                return -1
            j = _token_end(a, e + 1)
            v, ok = _number(a, e + 1, j)
            b = bits[op, pos]
            if not ok or (v >> np.uint64(b)) != np.uint64(0):
                return -1
            present |= 1 << pos
            s = shift[op, pos]
            if s >= 64:
                hi |= v << np.uint64(s - 64)
            else:
                lo |= v << np.uint64(s)
                if s + b > 64:
                    hi |= v >> np.uint64(64 - s)
            i = j
        if required[op] & ~present:
            return -1
        cyc[k] = cycle
        lo_out[k] = lo | default_lo[op, present]
        hi_out[k] = hi
        k += 1
    return k


def _assemble_into(a: np.ndarray, cyc: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> int:
    return _assemble(a, _MN_KEYS, _NAME_KEYS, _FIELD_POS, _SHIFT, _BITS, _REQUIRED, _DEFAULT_LO, _OPCODE, cyc, lo, hi)


def assemble(data: bytes | np.ndarray) -> np.ndarray | None:
    """The records of assembly text (its bytes), or None where the line by line parser must
    decide (without numba: always None)."""
    if not JIT:
        return None
    a = np.frombuffer(data, dtype=np.uint8) if isinstance(data, bytes) else data
    lines = int(np.count_nonzero(a == 10)) + 1
    cyc, lo, hi = (np.empty(lines, dtype=np.uint64) for _ in range(3))
    k = _assemble_into(a, cyc, lo, hi)
    if k < 0:
        return None
    rec = np.empty(k, dtype=RECORD_DTYPE)
    rec["cycle"], rec["lo"], rec["hi"] = cyc[:k], lo[:k], hi[:k]
    return rec


#: bytes of assembly text read and assembled at once by `assemble_file`
CHUNK = 1 << 22


def _line_chunks(f, size: int) -> Iterator[bytes]:
    """The file's bytes about `size` at a time, each piece cut after its last newline (a piece
    holds whole lines; a line longer than `size` makes a longer piece)."""
    carry = b""
    while True:
        data = f.read(size)
        if not data:
            if carry:
                yield carry
            return
        if carry:
            data = carry + data
        cut = data.rfind(b"\n") + 1
        if cut == 0:
            carry = data
            continue
        carry = data[cut:]
        yield data if cut == len(data) else data[:cut]


def assemble_file(path: Path, chunk: int = CHUNK) -> np.ndarray | None:
    """`assemble` of the file's bytes, read `chunk` bytes at a time: the records are the only
    thing the size of the program held (the text is read twice, once to count its lines; the
    records are a view of a buffer one per line, blank and comment lines included).
    Lines are independent and every piece ends at a newline, so the pieces assemble (or
    decline: None) exactly as the whole text would."""
    if not JIT:
        return None
    with open(path, "rb") as f:
        lines = 1 + sum(c.count(b"\n") for c in iter(lambda: f.read(chunk), b""))
        rec = np.empty(lines, dtype=RECORD_DTYPE)
        f.seek(0)
        k = 0
        for piece in _line_chunks(f, chunk):
            a = np.frombuffer(piece, dtype=np.uint8)
            m = piece.count(b"\n") + 1
            cyc, lo, hi = (np.empty(m, dtype=np.uint64) for _ in range(3))
            got = _assemble_into(a, cyc, lo, hi)
            if got < 0 or k + got > lines:
                return None
            part = rec[k : k + got]
            part["cycle"], part["lo"], part["hi"] = cyc[:got], lo[:got], hi[:got]
            k += got
    return rec[:k] if 2 * k >= lines else rec[:k].copy()  # (mostly comments or blank lines: a copy)


def parse_records(path: Path, read_text) -> np.ndarray:
    """The records of assembly file `path`; `read_text(path)` reads it as text for the line by
    line parser (which raises the reader's error for an unreadable or non-UTF-8 file)."""
    rec = None
    if JIT:
        try:
            rec = assemble_file(path)
        except OSError:
            pass
    if rec is None:
        rec = encode_records(parse_stream(read_text(path), source=str(path)))
    return rec
