"""Every row of the device's timing table, between every pair of commands of a channel.

The simulator's rule (sim/channel.py): a command `next` touching unit u (bank / bank group /
rank / channel, sim/timing.py) issues at least `latency` after the most recent `prev` in u, or,
for a row with a window N (tFAW), after the N-th most recent. Since every earlier `prev` in u is
older than the most recent one, the rule is the same as: for *every* pair a before b sharing a
unit of the row's scope, t_b >= t_a + latency. The model states it pairwise:

* pairs in the fixed order (`order.predecessors`): a linear constraint, only for the most
  recent candidates (a `prev` a that the fixed order puts before another `prev` a' in the same
  unit, itself before b, is implied through a': t_b >= t_a' + L > t_a + L);
* free pairs with a row in either direction: a Boolean for their order, each direction's
  latency enforced under it (at least 1: one command per cycle);
* a command type whose rows to itself are all channel-wide (MAC -> MAC tMAC, WRGB -> WRGB):
  a NoOverlap of intervals of that length instead of the pairs;
* window rows: their commands must be in the fixed order (the row commands are), so the N-th
  most recent is known: t of the i-th >= t of the (i - N)-th + latency, per unit.
"""

from __future__ import annotations

from dataclasses import dataclass

from hwmodel import Hardware

from .commands import Command


@dataclass(frozen=True)
class Row:
    prev: str
    next: str
    scope: str
    lat: int
    win: int


# how much of a channel a scope's unit holds
_WIDTH = {"bank": 0, "bank_group": 1, "rank": 2, "channel": 3}


def table_rows(hw: Hardware) -> list[Row]:
    """The table's rows with their latencies on `hw` (MAC -> MAC tMAC: the hardware's
    mac_interval), less those another row implies: a row whose (prev, next) has another row, no
    window on either, of a scope that holds its own and a latency at least as long (MAC -> MAC
    in the bank group, tCCD_L, under MAC -> MAC channel-wide, tMAC; of two equal rows the first
    is kept). The model's constraints are the same, and fewer: a command type whose rows to
    itself are then all channel-wide gets its NoOverlap (module docstring)."""
    t = hw.timing
    rows = [
        Row(
            c.prev,
            c.next,
            c.scope,
            hw.mac_interval if (c.prev, c.next, c.latency) == ("MAC", "MAC", "tMAC") else t.latency_of(c),
            c.window or 0,
        )
        for c in t.constraints
    ]

    def implied(i: int, r: Row) -> bool:
        return not r.win and any(
            j != i
            and not q.win
            and (q.prev, q.next) == (r.prev, r.next)
            and _WIDTH[q.scope] >= _WIDTH[r.scope]
            and q.lat >= r.lat
            and (q.lat > r.lat or _WIDTH[q.scope] > _WIDTH[r.scope] or j < i)
            for j, q in enumerate(rows)
        )

    return [r for i, r in enumerate(rows) if not implied(i, r)]


def units(x: Command, scope: str) -> list[tuple[str, int]]:
    m = {"bank": x.banks, "bank_group": x.groups, "rank": x.ranks}.get(scope)
    if m is None:
        return [("channel", 0)]
    return [(scope, b) for b in range(m.bit_length()) if (m >> b) & 1]


def shares(a: Command, b: Command, scope: str) -> bool:
    if scope == "channel":
        return True
    if scope == "bank":
        return bool(a.banks & b.banks)
    if scope == "bank_group":
        return bool(a.groups & b.groups)
    return bool(a.ranks & b.ranks)


def no_overlap_ops(rows: list[Row]) -> dict[str, int]:
    """Command types whose rows to themselves are all channel-wide, non-window: interval length."""
    out: dict[str, int] = {}
    bad = set()
    for r in rows:
        if r.prev == r.next:
            if r.scope != "channel" or r.win:
                bad.add(r.prev)
            else:
                out[r.prev] = max(out.get(r.prev, 1), r.lat)
    return {k: v for k, v in out.items() if k not in bad}


def pair_latency(rows_by_pair: dict[tuple[str, str], list[Row]], a: Command, b: Command) -> int:
    """Largest non-window latency a -> b (0: none)."""
    return max((r.lat for r in rows_by_pair.get((a.op, b.op), ()) if shares(a, b, r.scope)), default=0)


@dataclass
class PairSet:
    fixed: dict[tuple[int, int], int]  # (a, b) -> latency, a before b in the fixed order
    free: list[tuple[int, int, int, int]]  # (a, b, lat a->b, lat b->a), a < b emitted, order free
    windows: list[tuple[int, int, int]]  # (a, b, latency): b is N after a in a window row's unit
    overlap: dict[str, int]  # op -> NoOverlap interval length


def pairs(hw: Hardware, cmds: list[Command], pred: list[int]) -> PairSet:
    """The timing-row constraints of one channel's commands (`cmds` in emitted order)."""
    rows = table_rows(hw)
    overlap = no_overlap_ops(rows)
    by_pair: dict[tuple[str, str], list[Row]] = {}
    for r in rows:
        if not r.win and not (r.prev == r.next and r.prev in overlap):
            by_pair.setdefault((r.prev, r.next), []).append(r)
    ops_with_rows: dict[str, set[str]] = {}
    for p, n in by_pair:
        ops_with_rows.setdefault(p, set()).add(n)
        ops_with_rows.setdefault(n, set()).add(p)
    by_op: dict[str, list[Command]] = {}
    for x in cmds:
        by_op.setdefault(x.op, []).append(x)
    cmask: dict[tuple[str, tuple[str, int]], int] = {}  # (op, unit) -> bitset of its commands
    for x in cmds:
        for scope in ("bank", "bank_group", "rank", "channel"):
            for u in units(x, scope):
                cmask[(x.op, u)] = cmask.get((x.op, u), 0) | (1 << x.j)
    fixed: dict[tuple[int, int], int] = {}
    free = []
    for b in cmds:
        pb = pred[b.j]
        # fixed pairs: per row and unit, the most recent candidates (the maximal ones)
        for r in (r for (p, n), rs in by_pair.items() if n == b.op for r in rs):
            for u in units(b, r.scope):
                cands = cmask.get((r.prev, u), 0) & pb
                while cands:
                    a = cands.bit_length() - 1
                    if r.lat > fixed.get((a, b.j), 0):
                        fixed[(a, b.j)] = r.lat
                    cands &= ~(pred[a] | (1 << a))
        # free pairs (a emitted before b)
        for op in ops_with_rows.get(b.op, ()):
            for a in by_op.get(op, ()):
                if a.j >= b.j:
                    break
                if (pb >> a.j) & 1:
                    continue
                lab, lba = pair_latency(by_pair, a, b), pair_latency(by_pair, b, a)
                if max(lab, lba) > 1:
                    free.append((a.j, b.j, max(lab, 1), max(lba, 1)))
    windows = []
    for r in rows:
        if not r.win:
            continue
        if r.prev != r.next:
            raise NotImplementedError(f"window row {r.prev}->{r.next}: only windows over one command type")
        seq = by_op.get(r.prev, [])
        for i, x in enumerate(seq):
            for y in seq[:i]:
                if not (pred[x.j] >> y.j) & 1:
                    raise NotImplementedError(f"window row {r.prev}: its commands must be in the fixed order")
        per_unit: dict[tuple[str, int], list[Command]] = {}
        for x in seq:
            for u in units(x, r.scope):
                per_unit.setdefault(u, []).append(x)
        for lst in per_unit.values():
            windows += [(lst[i - r.win].j, lst[i].j, r.lat) for i in range(r.win, len(lst))]
    return PairSet(fixed, free, windows, overlap)
