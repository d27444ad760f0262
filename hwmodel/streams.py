"""A compiled program as the hardware sees it: per-channel streams, a host stream, the symbol
table of host tensors and the placement of resident tensors in banks."""
from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from .isa import Instruction
from .isa_codec import _no_gc


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


class LazyStream(Sequence):
    """A stream built part by part when read: each part is (its length, a function returning its
    instructions). The largest programs (a full model at batch 16 is over a billion commands)
    never sit in memory at once: a streamed simulation reads each channel front to back, a
    slice at a time, and only the parts under the slice being read exist. Random access works
    too (error messages), by building the part again: producers must be deterministic."""

    def __init__(self, parts: list[tuple], cached: int = 2):
        """parts: (length, build) or (length, build, rows). `rows`, if every part has one, returns
        the part already encoded as the simulator's table (one int64 row per instruction,
        stamps included): a streamed simulation then reads `rows` and no instruction object is
        built; `build` still serves random access (error messages) and listing."""
        self._parts = [p for p in parts if p[0]]
        self._offsets = [0]
        for p in self._parts:
            self._offsets.append(self._offsets[-1] + p[0])
        self._cache: dict[int, list[Instruction]] = {}
        self._cached = cached
        self.has_rows = all(len(p) > 2 for p in self._parts)

    def __len__(self) -> int:
        return self._offsets[-1]

    def _part(self, k: int) -> list[Instruction]:
        seq = self._cache.get(k)
        if seq is None:
            n, produce = self._parts[k][:2]
            with _no_gc():  # acyclic objects by the thousand: see isa_codec._no_gc
                seq = produce()
            if len(seq) != n:
                raise RuntimeError(f"lazy stream part {k}: {len(seq)} instructions built, {n} announced")
            _remember(self._cache, k, seq, self._cached)
        return seq

    def _part_rows(self, k: int) -> np.ndarray:
        n, _, produce = self._parts[k]
        table = produce()
        if len(table) != n:
            raise RuntimeError(f"lazy stream part {k}: {len(table)} rows encoded, {n} announced")
        return table

    def rows(self, start: int, stop: int) -> np.ndarray:
        """The encoded table of instructions from `start` to the end of the part that holds
        instruction stop - 1 (whole parts: read front to back, no part is encoded twice and none
        is kept). A new array; needs `has_rows`."""
        stop = min(stop, len(self))
        if start >= stop:
            return self._part_rows(0)[:0].copy()
        k = bisect_right(self._offsets, start) - 1
        pieces = [self._part_rows(k)[start - self._offsets[k]:]]
        k += 1
        while self._offsets[k] < stop:
            pieces.append(self._part_rows(k))
            k += 1
        return np.concatenate(pieces)

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
                take = seq[lo: lo + stop - start]
                out.extend(take)
                start += len(take)
                k += 1
            return out
        i = key + len(self) if key < 0 else key
        if not 0 <= i < len(self):
            raise IndexError("stream index out of range")
        k = bisect_right(self._offsets, i) - 1
        return self._part(k)[i - self._offsets[k]]


def _remember(cache: dict, k: int, value, size: int) -> None:
    """Keep `value` as part k, dropping the oldest parts beyond `size`."""
    while len(cache) >= size:
        del cache[next(iter(cache))]
    cache[k] = value
