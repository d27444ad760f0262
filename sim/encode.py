"""Signal ids of the encoded tables (SignalMap); the table layout and `encode_stream` are
hardware semantics in hwmodel/table.py, re-exported here for the simulator's modules."""

from __future__ import annotations

import numpy as np

from hwmodel.table import (  # noqa: F401
    C_ACC,
    C_BANK,
    C_CNT,
    C_COL,
    C_GB,
    C_MASK,
    C_N,
    C_OP,
    C_ROW,
    C_STAMP,
    C_SYM,
    OP_EPI,
    OP_HMV,
    OP_HOP,
    OP_LAUNCH,
    OP_SIG,
    OP_WAIT,
    OPCODES,
    WIDTH,
    encode_fields,
    encode_stream,
)

assert OP_SIG % 2 == 0 and OP_WAIT == OP_SIG + 1  # SignalMap.densify finds both by op >> 1


def sync_rows(table: np.ndarray) -> np.ndarray:
    """The indices of `table`'s SIG and WAIT rows (adjacent opcodes: one pass)."""
    return np.flatnonzero((table[:, C_OP] >> 1) == OP_SIG >> 1)


class SignalMap:
    """Dense indices for ISA signal ids, handed out in order of first sight (the kernel indexes a
    flat array by them), and that array: -1 = unset, else the cycle the signal was set. Streams
    may be encoded a slice at a time; the array grows as new ids appear."""

    def __init__(self) -> None:
        self.index: dict[int, int] = {}
        self.time = np.full(1, -1, dtype=np.int64)

    def densify(self, table: np.ndarray, sel: np.ndarray | None = None) -> np.ndarray:
        """Rewrite the signal ids of `table`'s SIG/WAIT rows (`sel`, found here if None) to dense
        indices (in place)."""
        self.assign(table, sel)
        if self.short():
            self.grow()
        return table

    def assign(self, table: np.ndarray, sel: np.ndarray | None = None) -> np.ndarray:
        """`densify` without growing the array (see `short`, `grow`)."""
        if sel is None:
            sel = sync_rows(table)
        if len(sel):
            uniq, inverse = np.unique(table[sel, C_ROW], return_inverse=True)
            dense = np.array([self.index.setdefault(int(x), len(self.index)) for x in uniq], dtype=np.int64)
            table[sel, C_ROW] = dense[inverse]
        return table

    def short(self) -> bool:
        """The array has fewer entries than there are indices."""
        return len(self.index) > len(self.time)

    def grow(self) -> None:
        """A new array with room for twice the indices, holding the old one's times."""
        grown = np.full(2 * len(self.index), -1, dtype=np.int64)
        grown[: len(self.time)] = self.time
        self.time = grown

    @property
    def ids(self) -> np.ndarray:
        """dense index -> ISA signal id."""
        return np.fromiter(self.index, dtype=np.int64, count=len(self.index))
