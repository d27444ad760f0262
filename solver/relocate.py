"""Encoded commands shared across layers.

The tasks of repeated layers have the same structure (tiling.structure_key, channel signature
and fused parts) and differ, in their encoded commands, only in two columns: the DRAM rows their
ACTs open (the layout's base row plus the same offsets) and the host tensors their symbol fields
name (the same roles: the input vector, each part's output staging or host copy). A streamed
run therefore emits and encodes a structure once per decode and relocates that table for every
other layer: ACT rows shifted by the difference of base rows, symbols mapped role by role.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from sim.channel import ACT, C_OP, C_ROW, C_SYM


class Relocations:
    """Per structure: the first encoded table, its base row and its symbols by role."""

    def __init__(self) -> None:
        self._first: dict[tuple, tuple[np.ndarray, int, tuple[int, ...]]] = {}

    def table(self, structure: tuple, base_row: int, roles: tuple[int | None, ...],
              produce: Callable[[], np.ndarray]) -> np.ndarray:
        """The encoded commands of a task of `structure` whose ACTs open rows from `base_row` and
        whose symbol fields name `roles` (symbol ids in role order; None: not in the table):
        relocated from the first such table, else `produce()`d. A table is kept only where every
        symbol it names has a role, and relocated only where every role has a symbol."""
        first = self._first.get(structure)
        if first is not None and None not in roles:
            return _relocated(*first, base_row, roles)
        table = produce()
        if first is None and None not in roles and len(set(roles)) == len(roles):
            named = set(np.unique(table[:, C_SYM]).tolist()) - {-1}
            if named <= set(roles):
                self._first[structure] = (table, base_row, roles)
        return table


def _relocated(table: np.ndarray, base0: int, roles0: tuple[int, ...], base_row: int,
               roles: tuple[int, ...]) -> np.ndarray:
    out = table.copy()
    out[out[:, C_OP] == ACT, C_ROW] += base_row - base0
    if roles != roles0:
        order = np.argsort(roles0)
        sym = out[:, C_SYM]
        named = sym >= 0
        sym[named] = np.asarray(roles, dtype=np.int64)[order][np.searchsorted(np.asarray(roles0)[order], sym[named])]
    return out
