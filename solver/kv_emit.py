"""Emit the KV-cache append of a decode step: the new token's k (or v) written into the banks
that hold the cache, at the layout of the attention op that reads it."""

from __future__ import annotations

from hwmodel import Hardware
from hwmodel.isa import Instruction, make

from .layout import Layout
from .symbols import Symbols


def emit_kv_append(
    hw: Hardware, lay: Layout, symbols: Symbols, ci: int, new_tensor: str, position: int
) -> list[Instruction]:
    """WR commands that store position `position` of every matrix row held on channel `ci`.

    attn_score layout (rows = positions): the row `position` of each (batch, kv head) matrix,
    whole bursts. attn_context layout (rows = head dims, k = positions): one element of every
    row, written with the data mask (emask) selecting its lane.
    """
    t, sh = lay.t, lay.t.shape
    src = symbols.id(new_tensor)
    epb = t.elements_per_burst
    writes: dict[tuple[int, int], list[Instruction]] = {}
    for slot in range(t.slot_count):
        sl = t.slots[ci][slot]
        if sl is None:
            continue
        b, g = sh.matrix_coords(sl.matrix)
        if sh.kind_key == "score":
            if not sl.row0 <= position < sl.row1:
                continue
            for c in range(t.chunks):
                k0 = c * t.chunk_bursts * epb
                loc = lay.locate(ci, sl.matrix, position, k0, slot)
                assert loc is not None
                _pu, bank, row, col, _lane = loc
                offset = (b * sh.kv_heads + g) * sh.head_dim + k0
                writes.setdefault((bank, row), []).append(
                    make("WR", bank=bank, col=col, count=t.chunk_len(c), src=src, offset=offset, emask=0xFFFF)
                )
        else:
            for d in range(sl.row0, sl.row1):
                loc = lay.locate(ci, sl.matrix, d, position, slot)
                assert loc is not None
                _pu, bank, row, col, lane = loc
                offset = (b * sh.kv_heads + g) * sh.head_dim + d
                writes.setdefault((bank, row), []).append(
                    make("WR", bank=bank, col=col, count=1, src=src, offset=offset, emask=1 << lane)
                )
    seq: list[Instruction] = []
    # batches of distinct banks: activate them all, write, precharge them all
    pending = sorted(writes.items())
    while pending:
        batch, rest, used = [], [], set()
        for (bank, row), ws in pending:
            (rest if bank in used else batch).append(((bank, row), ws))
            used.add(bank)
        for (bank, row), _ in batch:
            seq.append(make("ACT", mask=1 << bank, row=row))
        for _, ws in batch:
            seq.extend(ws)
        for (bank, _row), _ in batch:
            seq.append(make("PRE", mask=1 << bank))
        pending = rest
    return seq
