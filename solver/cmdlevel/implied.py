"""Implied constraints: they cut no schedule of the model, they only let CP-SAT prove its bound.

The MAC stream and the link commands. A link command y (WRGB, RDACC, RD, WR) whose rows with
*every* MAC of the channel are at least L1 (MAC -> y) and L2 (y -> MAC), with the MACs spaced
s = tMAC apart, excludes every MAC interval [t_m, t_m + s) from [t_y - L1 + s, t_y + L2): a MAC
before y has t_m + s <= t_y - L1 + s, one after has t_m >= t_y + L2. Link commands may overlap
each other there, but they are at least g cycles apart (the link rows, tLINK, between all of
them). The window of y covers cycle p iff t_y is in (p - L2, p + L1 - s]; over the command types,
those t lie in an interval of max L2 + max (L1 - s) cycles, so at most K = ceil((max L2 +
max (L1 - s)) / g) windows cover any cycle (not ceil(len / g): a window type that reaches far
back and another that reaches far ahead widen the range). Hence a Cumulative of capacity
K: each MAC's interval with demand K, each link command's window with demand 1. A MAC then
overlaps no window and no other MAC, and K windows fit - exactly what the pairwise rows allow.
Without it CP-SAT sees only the Booleans of the pairs and proves little (gemv-128x256-fpga: a
bound of 2,196 against 2,543 in 50 s).
"""

from __future__ import annotations

from .commands import LINK_OPS, Command
from .timing_rows import Row, shares


def _min_latency(rows: list[Row], a_op: str, b_op: str, a_set: list[Command], b_set: list[Command]) -> int:
    """The smallest, over all pairs (a, b), of the largest row a -> b that applies to the pair."""
    rs = [r for r in rows if r.prev == a_op and r.next == b_op and not r.win]
    sig_a = {(x.banks, x.groups, x.ranks): x for x in a_set}
    sig_b = {(x.banks, x.groups, x.ranks): x for x in b_set}
    best = None
    for a in sig_a.values():
        for b in sig_b.values():
            lat = max((r.lat for r in rs if shares(a, b, r.scope)), default=0)
            best = lat if best is None else min(best, lat)
    return best or 0


def link_windows(rows: list[Row], cmds: list[Command], mac_size: int) -> tuple[list[tuple], int]:
    """The link commands' windows that no MAC interval may overlap: (y, offset of the window's
    start from t_y (s - L1), size (L1 + L2 - s), L2) each; and g, the least distance between two
    link commands."""
    macs = [x for x in cmds if x.op == "MAC"]
    links = [x for x in cmds if x.op in LINK_OPS]
    if not macs or not links:
        return [], 1
    gap = min(
        (r.lat for r in rows if r.prev in LINK_OPS and r.next in LINK_OPS and r.scope == "channel" and not r.win),
        default=1,
    )
    # the channel rows tie every pair of link commands only if each pair of link ops has one
    ops = {x.op for x in links}
    if any(not any(r.prev == a and r.next == b and r.scope == "channel" for r in rows) for a in ops for b in ops):
        gap = 1
    gap = max(1, gap)
    windows = []
    for op in sorted(ops):
        ys = [x for x in links if x.op == op]
        l1 = _min_latency(rows, "MAC", op, macs, ys)
        l2 = _min_latency(rows, op, "MAC", ys, macs)
        size = l1 + l2 - mac_size
        if size <= 0:
            continue
        for y in ys:
            windows.append((y, -l1 + mac_size, size, l2))
    return windows, gap


def mac_link_cumulative(
    m, rows: list[Row], cmds: list[Command], t: list, mac_size: int, pred: list[int], makespan, tail: dict[int, int]
) -> int:
    """Add the Cumulative to model `m` for one channel's commands; returns the windows added."""
    macs = [x for x in cmds if x.op == "MAC"]
    windows, gap = link_windows(rows, cmds, mac_size)
    if not windows:
        return 0
    back = max(w[3] for w in windows)  # L2: how far after t_y a window reaches
    ahead = max(w[2] - w[3] for w in windows)  # L1 - s: how far before t_y it starts
    cap = -(-(back + ahead) // gap)
    ivs, dem = [], []
    for x in macs:
        ivs.append(m.NewFixedSizeIntervalVar(t[x.j], mac_size, f"cm{x.j}"))
        dem.append(cap)
    for y, off, size, _l2 in windows:
        ivs.append(m.NewFixedSizeIntervalVar(t[y.j] + off, size, f"cw{y.j}"))
        dem.append(1)
    m.AddCumulative(ivs, dem, cap)
    _energy(m, rows, macs, windows, t, mac_size, pred, gap, makespan, tail)
    return len(windows)


def _energy(m, rows: list[Row], macs, windows, t, mac_size: int, pred: list[int], gap: int, makespan, tail) -> None:
    """Energy on the MAC stream. Take the link commands with a MAC fixed after them: *interior*
    ones (also a MAC fixed before) have their window between the first MAC start F and the last
    MAC end L; *leading* ones (no MAC fixed before) end theirs before that MAC. With S the least
    of F and the leading windows' starts, [S, L) holds every MAC interval and all these windows,
    disjoint but the windows of one *block* (`window_blocks`), so

        L - S >= s |MACs| + sum over blocks of the union of its windows,

    and makespan >= L - s + (least tail of a MAC)."""
    unions, leading = window_blocks(rows, macs, windows, pred, gap)
    total = sum(unions)
    start = m.NewIntVar(-(10**6), 10**9, "mac_span_start")
    m.AddMinEquality(start, [t[x.j] for x in macs] + [t[y.j] + off for y, off, _s, _l2 in leading])
    m.Add(makespan >= start + mac_size * len(macs) + total + min(tail[x.j] for x in macs) - mac_size)


def window_blocks(rows: list[Row], macs, windows, pred: list[int], gap: int) -> tuple[list[int], list]:
    """(each block's least union, in order; the leading windows) over the link commands with a MAC fixed
    after them, in *blocks*: consecutive such commands with no MAC fixed between them (a MAC
    fixed between two windows separates them: the one ends before it, the other starts after its
    interval). A block's windows [s_i, e_i) in fixed order: window i adds at least
    min(len_i, e_i - max_{k<i} e_k) to the union of the earlier ones, and
    e_i - e_k >= D(k, i) + L2_i - L2_k, D the fixed least distance between the commands (the
    link rows, >= g). Windows of different blocks are disjoint, and disjoint from every MAC
    interval."""
    macmask = 0
    for x in macs:
        macmask |= 1 << x.j
    after: dict[int, int] = {}  # link command -> bitset of the MACs fixed after it
    wj = {y.j for y, *_ in windows}
    for x in macs:
        p = pred[x.j]
        for j in wj:
            if (p >> j) & 1:
                after[j] = after.get(j, 0) | (1 << x.j)
    seq = [w for w in sorted(windows, key=lambda w: w[0].j) if after.get(w[0].j)]
    leading = [w for w in seq if not pred[w[0].j] & macmask]
    blocks: list[list] = []
    for w in seq:
        if blocks and not (after.get(blocks[-1][-1][0].j, 0) & pred[w[0].j]):
            blocks[-1].append(w)
        else:
            blocks.append([w])
    unions = []
    for blk in blocks:
        union = blk[0][2]
        reach = [0]  # lower bound of t_i - t_0 for each window of the block
        for i in range(1, len(blk)):
            a, b = blk[i - 1][0], blk[i][0]
            d = max(
                [gap]
                + [r.lat for r in rows if r.prev == a.op and r.next == b.op and not r.win and shares(a, b, r.scope)]
            )
            reach.append(reach[-1] + d)
            inc = min(blk[i][2], min(reach[i] - reach[k] + blk[i][3] - blk[k][3] for k in range(i)))
            union += max(0, inc)
        unions.append(union)
    return unions, leading


def tails(
    cmds: list[Command], arcs: list[tuple[int, int, int]], compl: dict[str, int], after_sig: dict[int, int]
) -> dict[int, int]:
    """tail[j]: makespan - t_j is at least this in every schedule of the model. A command's own
    completion (the makespan covers its channel's last completion), `after_sig[j]` (what the
    stream's later SIGs hold on the host: sync + the host ops after the WAIT on them), and the
    longest path of fixed arcs (a, b, latency) to a command with a tail."""
    out = {x.j: compl[x.op] + after_sig.get(x.j, 0) for x in cmds}
    succ: dict[int, list[tuple[int, int]]] = {}
    for a, b, d in arcs:
        succ.setdefault(a, []).append((b, d))
    for x in reversed(cmds):  # arcs point forward in the emitted order
        for b, d in succ.get(x.j, ()):
            if b in out and d + out[b] > out[x.j]:
                out[x.j] = d + out[b]
    return out
