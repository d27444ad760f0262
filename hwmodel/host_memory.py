"""Host memory as the hardware sees it: a flat array of PIM-dtype words, each host tensor (a
stream symbol) at a base address. The instruction streams name host tensors by symbol index;
this map gives each symbol the addresses a bring-up board loads it at (`pimsat export-fpga`
writes it as host/memory.hex and host/symbols.hex).

Layout rule: the symbols that have an image are packed in the order given, each starting where
the previous one ends (no padding: addresses count words, and every word is one element)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

#: bits of a host address and of a size in one symbols.hex entry ({base, size})
ADDRESS_BITS = 32


@dataclass(frozen=True)
class HostAddressMap:
    """symbol index -> (base address, size in words) of the symbols in the host image."""

    bases: Mapping[int, int]
    sizes: Mapping[int, int]

    @property
    def words(self) -> int:
        return sum(self.sizes.values())

    def entry(self, symbol: int) -> int:
        """The symbols.hex word of a symbol: base in the high 32 bits, size in the low 32; 0 for a
        symbol with no image."""
        if symbol not in self.bases:
            return 0
        return (self.bases[symbol] << ADDRESS_BITS) | self.sizes[symbol]


def pack(sizes: Iterable[tuple[int, int]]) -> HostAddressMap:
    """The map of (symbol, size in words) pairs packed in the order given."""
    bases, kept, at = {}, {}, 0
    for symbol, size in sizes:
        if symbol in bases:
            raise ValueError(f"host symbol {symbol} given twice")
        bases[symbol], kept[symbol] = at, int(size)
        at += int(size)
    if at >= 1 << ADDRESS_BITS:
        raise ValueError(f"host image of {at} words does not fit {ADDRESS_BITS}-bit addresses")
    return HostAddressMap(bases, kept)
