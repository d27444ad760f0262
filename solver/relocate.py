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

from hwmodel.table import ACT, C_OP, C_ROW, C_SYM

from .tiling import Tiling, channel_parts, channel_signature, structure_key


def table_key(kind: tuple, t: Tiling, ci: int, base_row: int) -> tuple:
    """The key of channel `ci`'s table in a task's cache (`task_table`): channels of the task with
    equal keys are handed the same table (sim/twins.py relies on it: such channels, at the same
    relative issue cycles, run the same rows)."""
    return (kind, channel_signature(t, ci), base_row, channel_parts(t, ci))


def task_table(
    kind: tuple,
    t: Tiling,
    ci: int,
    base_row: int,
    cache: dict,
    layers: Relocations | None,
    roles: Callable[[], tuple[int | None, ...]],
    produce: Callable[[], np.ndarray],
) -> np.ndarray:
    """The encoded commands of channel `ci` of a task of tiling `t` (an MV task or a weight read:
    `kind`), once per row distribution, base row and fused parts (tiling.channel_parts): such
    channels differ only in host offsets, which the encoding leaves out. The table is kept in
    `cache` (the caller's, while the task's channels are read) and is read-only; without one,
    it is relocated from another layer's (`layers`) or `produce()`d. `roles()`: the symbol ids
    the commands may name, by role."""
    key = table_key(kind, t, ci, base_row)
    rows = cache.get(key)
    if rows is None:
        rows = (
            produce()
            if layers is None
            else layers.table((kind, structure_key(t), key[1], key[3]), base_row, roles(), produce)
        )
        cache[key] = rows
    return rows


class Relocations:
    """Per structure: the first encoded table, its base row and its symbols by role."""

    def __init__(self) -> None:
        self._first: dict[tuple, tuple[np.ndarray, int, tuple[int, ...]]] = {}

    @property
    def nbytes(self) -> int:
        """Bytes of the tables kept."""
        return sum(t.nbytes for t, _b, _r in self._first.values())

    def table(
        self, structure: tuple, base_row: int, roles: tuple[int | None, ...], produce: Callable[[], np.ndarray]
    ) -> np.ndarray:
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


def _relocated(
    table: np.ndarray, base0: int, roles0: tuple[int, ...], base_row: int, roles: tuple[int, ...]
) -> np.ndarray:
    out = table.copy()
    out[out[:, C_OP] == ACT, C_ROW] += base_row - base0
    if roles != roles0:
        order = np.argsort(roles0)
        sym = out[:, C_SYM]
        named = sym >= 0
        sym[named] = np.asarray(roles, dtype=np.int64)[order][np.searchsorted(np.asarray(roles0)[order], sym[named])]
    return out
