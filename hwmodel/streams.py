"""A compiled program as the hardware sees it: per-channel streams, a host stream, the symbol
table of host tensors and the placement of resident tensors in banks."""

from __future__ import annotations

import hashlib
import json
from bisect import bisect_right
from collections.abc import Callable, Iterator, Sequence
from dataclasses import astuple, dataclass, field

import numpy as np

from .isa import Instruction
from .isa_codec import encode_stream, no_gc


@dataclass(frozen=True, slots=True)
class Placement:
    """`count` runs of `run` elements of resident tensor `tensor` (flattened), run k starting at
    element elem_start + k*stride, laid into consecutive bursts of one bank from (row, col)
    onwards (wrapping to the next row after the last column)."""

    tensor: str
    channel: int
    bank: int
    row: int
    col: int
    elem_start: int
    run: int
    count: int = 1
    stride: int = 0

    @property
    def elements(self) -> int:
        return self.run * self.count

    # ---- the address map: tensor elements <-> (row, element offset in the row) of its bank ----
    def segments(self, columns: int, elements_per_burst: int) -> Iterator[tuple[int, int, int, int]]:
        """(row, element offset in the row, position in the placement, length) of each DRAM row
        the placement's elements fall into: laid from (row, col) on, a run of the placement
        continuing in the next row after the last column; a row's last burst may be partial
        (the next segment starts at the next burst)."""
        E = elements_per_burst
        RE = columns * E
        P, pos, lin = self.elements, 0, (self.row * columns + self.col) * E
        while pos < P:
            r, o = divmod(lin, RE)
            n = min(P - pos, RE - o)
            yield r, o, pos, n
            pos += n
            lin += -(-n // E) * E

    def element_indices(self) -> slice | np.ndarray:
        """Indices into the flattened tensor of the placement's elements, in placement order."""
        if self.count == 1:
            return slice(self.elem_start, self.elem_start + self.run)
        k = np.arange(self.count)[:, None]
        return (self.elem_start + self.stride * k + np.arange(self.run)[None, :]).reshape(-1)


@dataclass
class StreamSet:
    hardware: str
    isa_version: str
    symbols: list[str]
    channels: list[Sequence[Instruction]]  # lists, or LazyStreams (built while read)
    host: Sequence[Instruction]
    placements: list[Placement] = field(default_factory=list)

    def symbol(self, name: str) -> int:
        return self.symbols.index(name)

    def instruction_count(self) -> int:
        return len(self.host) + sum(len(s) for s in self.channels)


@dataclass(frozen=True, slots=True)
class PartTwin:
    """What a LazyStream part tells a simulation that runs one channel for several (sim/twins.py).
    Parts of two streams whose `match`es are equal encode the same rows, but for the id of the
    SIG that ends them: the same table at the same issue cycles (`key`, from the producer), after
    the same WAITs (`waits`, their ids), with or without a SIG (`signal`: its id, or None).
    `unread` (or None): called when the stream is not going to be read, so the part lets go
    what it keeps for its reader (a task's tables, kept until its last channel has read them)."""

    key: tuple
    waits: tuple[int, ...] = ()
    signal: int | None = None
    unread: Callable[[], None] | None = None

    @property
    def match(self) -> tuple:
        return self.key, self.waits, self.signal is not None


class LazyStream(Sequence):
    """A stream built part by part when read: each part is (its length, a function returning its
    instructions). The largest programs (a full model at batch 16 is over a billion commands)
    never sit in memory at once: a streamed simulation reads each channel front to back, a
    slice at a time, and only the parts under the slice being read exist. Random access works
    too (error messages), by building the part again: producers must be deterministic."""

    def __init__(self, parts: list[tuple], cached: int = 2, width: int | None = None):
        """parts: (length, build), (length, build, rows) or (length, build, rows, twin).
        `rows(lo, hi, out)`, if every part has one, writes instructions lo..hi-1 of the part,
        already encoded as the simulator's table (one int64 row of `width` columns per
        instruction, stamps included), into `out`: a streamed simulation then reads `rows` and
        builds no instruction object; `build` still serves random access (error messages) and
        listing. `twin` (a PartTwin): see `twin_key`."""
        self.width = width
        self._parts = [p for p in parts if p[0]]
        self._offsets = [0]
        for p in self._parts:
            self._offsets.append(self._offsets[-1] + p[0])
        self._cache: dict[int, list[Instruction]] = {}
        self._cached = cached
        self.has_rows = all(len(p) > 2 for p in self._parts)

    def __len__(self) -> int:
        return self._offsets[-1]

    def twin_key(self) -> tuple | None:
        """Every part's PartTwin.match, in order (None if some part has no twin): two streams
        with equal twin keys encode the same rows, but for the ids of their SIGs."""
        if not all(len(p) > 3 for p in self._parts):
            return None
        return tuple(p[3].match for p in self._parts)

    def twin_signals(self) -> list[int]:
        """The ids of the stream's SIGs, in order (needs `twin_key`)."""
        return [p[3].signal for p in self._parts if p[3].signal is not None]

    def unread(self) -> None:
        """The stream is not going to be read (a twin's is, sim/twins.py): each part lets go what
        it keeps for it. Reading it afterwards still works, at the cost of building again."""
        for p in self._parts:
            if len(p) > 3 and p[3].unread is not None:
                p[3].unread()

    def _part(self, k: int) -> list[Instruction]:
        seq = self._cache.get(k)
        if seq is None:
            n, produce = self._parts[k][:2]
            with no_gc():  # acyclic objects by the thousand: see isa_codec.no_gc
                seq = produce()
            if len(seq) != n:
                raise RuntimeError(f"lazy stream part {k}: {len(seq)} instructions built, {n} announced")
            while len(self._cache) >= self._cached:
                del self._cache[next(iter(self._cache))]
            self._cache[k] = seq
        return seq

    def rows(self, start: int, stop: int, out: np.ndarray | None = None) -> np.ndarray:
        """The encoded table of instructions start..stop-1 (needs `has_rows`): the first rows of
        `out` (a streamed run reuses one buffer per channel), or a new array. A part is asked to
        write the piece of it the range covers (its `rows(lo, hi, out)`): read front to back,
        each part is produced piece by piece, in order."""
        stop = max(start, min(stop, len(self)))
        if out is None:
            if self.width is None:
                raise ValueError("LazyStream.rows without a buffer needs the stream's width")
            out = np.empty((stop - start, self.width), dtype=np.int64)
        elif len(out) < stop - start:
            raise ValueError(f"a buffer of {len(out)} rows for instructions {start}..{stop - 1}")
        table = out[: stop - start]
        at = 0
        k = bisect_right(self._offsets, start) - 1
        while start < stop:
            lo, hi = start - self._offsets[k], min(stop, self._offsets[k + 1]) - self._offsets[k]
            self._parts[k][2](lo, hi, table[at : at + hi - lo])
            at += hi - lo
            start += hi - lo
            k += 1
        return table

    def __iter__(self) -> Iterator[Instruction]:
        for k in range(len(self._parts)):
            yield from self._part(k)

    def __getitem__(self, key):
        if isinstance(key, slice):
            start, stop, step = key.indices(len(self))
            if step != 1:
                return list(self)[key]
            out: list[Instruction] = []
            k = bisect_right(self._offsets, start) - 1
            while start < stop:
                seq = self._part(k)
                lo = start - self._offsets[k]
                take = seq[lo : lo + stop - start]
                out.extend(take)
                start += len(take)
                k += 1
            return out
        i = key + len(self) if key < 0 else key
        if not 0 <= i < len(self):
            raise IndexError("stream index out of range")
        k = bisect_right(self._offsets, i) - 1
        return self._part(k)[i - self._offsets[k]]


class ProgramDigest:
    """sha256 of what the hardware runs: ISA version, symbols, placements, then every stream's
    binary encoding (channels in order, then host), fed one stream at a time with `add`."""

    def __init__(self, ss: StreamSet):
        self._h = hashlib.sha256()
        self._h.update(
            json.dumps(
                [ss.isa_version, list(ss.symbols), [list(astuple(p)) for p in ss.placements]], separators=(",", ":")
            ).encode()
        )

    def add(self, encoded_stream: bytes) -> None:
        self._h.update(len(encoded_stream).to_bytes(8, "little"))
        self._h.update(encoded_stream)

    def begin(self, encoded_bytes: int) -> None:
        """`add` in pieces: the encoding's length in bytes now, then its bytes with `update`."""
        self._h.update(encoded_bytes.to_bytes(8, "little"))

    def update(self, piece: bytes) -> None:
        self._h.update(piece)

    def add_stream(self, stream: Sequence[Instruction]) -> None:
        """`add` of the stream's encoding; a stream held as records (RecordStream) is fed in
        chunks of its records, without building the bytes or any instruction."""
        chunks = getattr(stream, "encoded_chunks", None)
        if chunks is None:
            self.add(encode_stream(stream))
            return
        self._h.update(stream.encoded_bytes.to_bytes(8, "little"))
        for c in chunks():
            self._h.update(c)

    def hexdigest(self) -> str:
        return self._h.hexdigest()


def program_digest(ss: StreamSet) -> str:
    d = ProgramDigest(ss)
    for stream in [*ss.channels, ss.host]:
        d.add_stream(stream)
    return d.hexdigest()
