"""Assemble placed tasks into streams: per channel and for the host, each task's commands stamped
at its start, WAIT before a task that waits for another stream, SIG after a task another stream
waits for, REFs at their cycles.

Each channel stream is a LazyStream whose parts (one task each) are built when read, or the list
of it. Listed, lockstep channels share the stamped objects of identical commands (most MAC/ACT/PRE:
the emitters hand the same objects to every channel). For a streamed simulation (`encode` given)
the parts also come encoded, the simulator's table: an MV task or weight read is encoded once per
row distribution, base row and fused parts and copied to the task's other channels, so no
instruction object is built for most of the program (a full model at batch 16 is over a billion
commands).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from hwmodel.isa import Instruction, make
from hwmodel.streams import LazyStream, PartTwin
from hwmodel.table import C_ROW, C_STAMP, WIDTH

HOST_STREAM = -1


class DecodeError(RuntimeError):
    pass


def signal_plan(
    order, channels_of: Callable[[str], list[int]], preds: dict[str, list[tuple[str, int]]], res_of: dict[str, str]
) -> dict[tuple[str, int], tuple[tuple[int, ...], int | None]]:
    """(task, channel) -> (ids it WAITs for, id it SIGs or None). Ids are handed out in the order
    tasks are assembled, so both builds number them alike."""
    crosses = {p for name, ps in preds.items() for p, _lag in ps if res_of[p] != res_of[name]}
    ids: dict[tuple[str, int], int] = {}

    def sig(task: str, ch: int) -> int:
        return ids.setdefault((task, ch), len(ids))

    plan = {}
    for pt in order:
        for ch in channels_of(pt.resource):
            waits = tuple(
                sig(p, sc) for p, _lag in preds[pt.task] if res_of[p] != pt.resource for sc in channels_of(res_of[p])
            )
            plan[(pt.task, ch)] = (waits, sig(pt.task, ch) if pt.task in crosses else None)
    return plan


def _checked(pt, ch: int) -> tuple[list[Instruction], tuple[int, ...]]:
    producer, rel = pt.per_channel.get(ch, (list, ()))[:2]
    seq = producer()
    if len(seq) != len(rel):
        raise DecodeError(f"{pt.task}: channel {ch} emitted {len(seq)} commands, {len(rel)} were timed")
    return seq, rel


class _Shared:
    """What the lockstep channels of one task share until the last of them has been built: the
    stamped commands per timing (channels of one signature share a timing), and for encoded
    parts the encoders' tables (`templates`, read-only), kept until every channel has read its
    last piece."""

    __slots__ = ("left", "stamped", "rows_left", "templates")

    def __init__(self, channels: int, encoded_channels: int):
        self.left, self.rows_left = channels, encoded_channels
        self.stamped: dict[int, tuple[list[Instruction], list[Instruction]]] = {}
        self.templates: dict = {}

    def read_rows(self) -> None:
        """One more channel has read its last encoded piece."""
        self.rows_left -= 1
        if self.rows_left <= 0:
            self.templates.clear()


def _stamp(seq, rel, start: int, shared: _Shared | None) -> list[Instruction]:
    """`seq` stamped at start + rel (rel: relative issue cycles, a tuple or an int64 array)."""
    key = id(rel)
    prev = shared.stamped.get(key) if shared is not None else None
    rel = rel.tolist() if isinstance(rel, np.ndarray) else rel
    if prev is not None and len(prev[0]) == len(seq):
        out = [
            p if (u is ins or (p.op is ins.op and p.args == ins.args)) else ins.at(start + r)
            for u, p, ins, r in zip(prev[0], prev[1], seq, rel)
        ]
    else:
        out = [ins.at(start + r) for ins, r in zip(seq, rel)]
        if shared is not None:
            shared.stamped[key] = (seq, out)
    if shared is not None:
        shared.left -= 1
        if shared.left <= 0:  # every channel built: let it go (a rebuild stamps afresh)
            shared.stamped.clear()
    return out


def _encoded_body(pt, ch: int, shared: _Shared, lo: int, hi: int, out: np.ndarray) -> None:
    """Commands lo..hi-1 of the task on `ch`, encoded into `out`, stamped at start + relative
    issue cycle. Every channel task of a streamed decode comes with an encoder of its own
    (per_channel[ch][2]: given the task's shared cache, the table of its commands, built once)."""
    _produce, rel, table_of = pt.per_channel[ch][:3]
    table = table_of(shared.templates)
    if len(table) != len(rel):
        raise DecodeError(f"{pt.task}: channel {ch} encoded {len(table)} commands, {len(rel)} were timed")
    out[:] = table[lo:hi]
    np.add(np.asarray(rel[lo:hi], dtype=np.int64), pt.start, out=out[:, C_STAMP])
    if hi == len(rel):
        shared.read_rows()


class _SignalRows:
    """Encoded WAIT / SIG rows: the encoding of one, its signal id (column C_ROW) replaced."""

    def __init__(self, encode):
        self._one = {op: encode([make(op, id=0)]) for op in ("WAIT", "SIG")}

    def __call__(self, op: str, ids, out: np.ndarray) -> None:
        out[:] = self._one[op]
        out[:, C_ROW] = ids


def _copy_rows(table: np.ndarray):
    """A part's `rows` that copies from a table encoded beforehand (a REF)."""

    def rows(lo: int, hi: int, out: np.ndarray) -> None:
        out[:] = table[lo:hi]

    return rows


def streams(
    order,
    channels_of,
    plan,
    refs: dict[str, list[int]],
    refresh_round: Callable[[int], list[Instruction]],
    group_channels: dict[str, list[int]],
    n_channels: int,
    lazy: bool,
    encode=None,
    ref_shift: int = 0,
    launch: bool = False,
) -> tuple[list, list[Instruction]]:
    """Channel streams (LazyStreams if `lazy`, else lists) and the host stream (a list).
    ref_shift: the delay of a pair's odd channel in a refresh round (shared command buses).
    `encode` (lazy only): the simulator's encoder (a list of instructions -> its table); the
    LazyStreams then also hand out their parts encoded, without building instruction objects.
    `launch`: the host stream opens with a LAUNCH at cycle 0, which every host task continues."""
    channels: list[list[tuple]] = [[] for _ in range(n_channels)]
    if encode is not None:
        signal_rows = _SignalRows(encode)
    host: list[tuple[int, int, int, Callable[[], list[Instruction]]]] = []
    if launch:
        host.append((0, 0, 1, lambda: [make("LAUNCH", cycle=0)]))
    for ti, pt in enumerate(order):
        chans = channels_of(pt.resource)
        timed = {ch: len(pt.per_channel.get(ch, (list, ()))[1]) for ch in chans}  # commands per channel
        shared = _Shared(len(chans), sum(1 for k in timed.values() if k)) if chans != [HOST_STREAM] else None
        for ch in chans:
            waits, sig = plan[(pt.task, ch)]
            n = len(waits) + timed[ch] + (sig is not None)

            def part(pt=pt, ch=ch, waits=waits, sig=sig, shared=shared) -> list[Instruction]:
                seq, rel = _checked(pt, ch)
                body = [make("WAIT", id=w) for w in waits]
                body.extend(_stamp(seq, rel, pt.start, shared))
                if sig is not None:
                    body.append(make("SIG", id=sig))
                return body

            if ch == HOST_STREAM:
                host.append((pt.start, 1, n, part))
                continue
            if encode is None:
                channels[ch].append((pt.start, 1, n, part))
                continue

            def rows(lo: int, hi: int, out: np.ndarray, pt=pt, ch=ch, waits=waits, sig=sig, shared=shared, n=n) -> None:
                h, body = len(waits), n - len(waits) - (sig is not None)
                at = 0
                if lo < h:
                    at = len(waits[lo:hi])
                    signal_rows("WAIT", waits[lo:hi], out[:at])
                b0, b1 = max(lo - h, 0), min(hi - h, body)
                if b0 < b1:
                    _encoded_body(pt, ch, shared, b0, b1, out[at : at + b1 - b0])
                    at += b1 - b0
                if sig is not None and hi == n:
                    signal_rows("SIG", (sig,), out[at : at + 1])
                    at += 1
                if at != hi - lo:
                    raise DecodeError(f"{pt.task}: channel {ch} encoded {at} rows for commands {lo}..{hi - 1}")

            # channels of the task with the same table (its key in the task's cache) at the same
            # relative issue cycles (one object per timing) and the same WAITs encode the same rows,
            # but for the id of their SIG (sim/twins.py runs one of them for all)
            own = pt.per_channel.get(ch)  # (emit, relative issue cycles, table, table key)
            twin = PartTwin(
                (ti, own[3], id(own[1])) if own else (ti,),
                waits,
                sig,
                shared.read_rows if timed[ch] else None,
            )
            channels[ch].append((pt.start, 1, n, part, rows, twin))
    for g, rs in refs.items():
        for at in rs:
            rounds = {
                d: refresh_round(at + d) for d in {0, ref_shift}
            }  # a REF, or a round of REFSBs (per-bank refresh)
            rows = {d: encode(ref) for d, ref in rounds.items()} if encode is not None else None
            for ch in group_channels[g]:
                d = ref_shift if ch % 2 else 0  # (groups hold whole pairs where ref_shift > 0)
                ref = rounds[d]
                item = (at, 0, len(ref), lambda ref=ref: ref)
                channels[ch].append(item if rows is None else (*item, _copy_rows(rows[d]), PartTwin(("ref", at, d))))
    out = [LazyStream([p[2:] for p in sorted(items, key=lambda x: (x[0], x[1]))], width=WIDTH) for items in channels]
    if not lazy:  # channel after channel: lockstep channels still share the stamped objects
        out = [list(s) for s in out]
    return out, [i for _, _, _, f in sorted(host, key=lambda x: (x[0], x[1])) for i in f()]
