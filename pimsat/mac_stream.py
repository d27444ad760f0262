"""Where a program's cycles go, read off its command log: the MAC stream of its critical channel,
term by term (issue 16: the distance between a program and its hardware bound, in the report).

The critical channel is the one whose last MAC issues last (ties: the lowest). Its makespan is
cut into

    before the first MAC + MAC cycles + the gaps in the MAC stream + after the last MAC

which sum to the program's simulated cycles exactly. MAC cycles: each MAC counts the time to
the next one, at most the unit's MAC interval (`Hardware.mac_interval`), and the last one its
interval; the rest of the time between two MACs is a gap. Where the caller says when the channel
sat at a WAIT for the host's signal (`held`: from the end of the instruction before the WAIT to
its release), those cycles of the gaps, and of the time before the first MAC and after the last,
are `waiting_for_sync`, whatever else the channel issued meanwhile (a REF pulled into the wait,
say). The rest of a gap is filed by the commands the channel issued inside it: the first kind in
this order, refresh, read-outs, buffer loads, row changes, else a gap without commands (a timing
row between MACs). A gap is filed by what it holds, not by what caused it. After the last MAC:
until the channel's last command completes (read-outs, precharges, a refresh's tRFC), then until
the program's end (the host's epilogue).

Read next to the hardware bound's terms (`bound_terms`: its streaming term counts MAC cycles at
the same rate plus what no placement avoids), it shows where a program spends the cycles above
the bound.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum

import numpy as np

from hwmodel.model import Hardware
from sim.timing import CMD as _CMD
from sim.timing import compile_tables
from solver.bound_parts import StreamingParts


class Span(StrEnum):
    """The parts of the critical channel's makespan (keys of `mac_stream`'s result)."""

    BEFORE = "before_first_mac"
    MAC = "mac_cycles"
    WAIT = "waiting_for_sync"
    REFRESH = "gaps_with_refresh"
    READOUT = "gaps_with_readouts"
    LOAD = "gaps_with_loads"
    ROW = "gaps_with_row_changes"
    EMPTY = "gaps_without_commands"
    TAIL = "after_last_mac"
    HOST_TAIL = "after_channel_end"


# a gap's name: the first of these kinds the channel issued inside it
_GAP_KINDS = (
    (Span.REFRESH, ("REF", "REFSB")),
    (Span.READOUT, ("RDACC",)),
    (Span.LOAD, ("WRGB", "WR", "RD")),
    (Span.ROW, ("ACT", "PRE")),
)


class Held:
    """Cycles a channel sat at a WAIT: disjoint intervals [start, end), sorted; `within(x, y)`,
    how many of the cycles in [x, y) (arrays of bounds) fall in them."""

    def __init__(self, starts: np.ndarray, ends: np.ndarray):
        self.starts = np.asarray(starts, dtype=np.int64)
        self.lens = np.asarray(ends, dtype=np.int64) - self.starts
        self.cum = np.concatenate([[0], np.cumsum(self.lens)])

    def _before(self, t: np.ndarray) -> np.ndarray:
        """Held cycles before cycle t."""
        k = np.searchsorted(self.starts, t, "right")  # intervals starting at or before t
        last = np.maximum(k - 1, 0)
        partial = np.clip(t - self.starts[last], 0, self.lens[last]) if len(self.starts) else 0
        return np.where(k > 0, self.cum[last] + partial, 0)

    def within(self, x, y) -> np.ndarray:
        x, y = np.asarray(x, dtype=np.int64), np.asarray(y, dtype=np.int64)
        if not len(self.starts):
            return np.zeros_like(x)
        return np.maximum(0, self._before(y) - self._before(x))

    @staticmethod
    def of(stream, times) -> Held:
        """From a channel's instructions and their simulated StreamTimes: each WAIT holds the
        channel from the cycle after the instruction before it last issued a command (from that
        cycle when it was a SIG or WAIT, which take no bus cycle; 0 for the first) until its
        release."""
        ops = [ins.op for ins in stream]
        spans = []
        for i in (i for i, op in enumerate(ops) if op == "WAIT"):
            start = int(times.last[i - 1]) + (ops[i - 1] not in ("SIG", "WAIT")) if i else 0
            end = int(times.issue[i])
            if end > start:
                if spans and start <= spans[-1][1]:
                    spans[-1][1] = max(spans[-1][1], end)
                else:
                    spans.append([start, end])
        a = np.asarray(spans, dtype=np.int64).reshape(-1, 2)
        return Held(a[:, 0], a[:, 1])


def mac_stream(
    log: np.ndarray, hw: Hardware, makespan: int, held: Callable[[int], Held] | None = None
) -> dict[str, int] | None:
    """{"channel", "macs", and every Span: cycles} of the critical channel (see the module), or
    None for a log without MACs. `held(channel)`: when that channel sat at a WAIT (else no cycle
    is filed as waiting)."""
    is_mac = log["command"] == _CMD["MAC"]
    if not is_mac.any():
        return None
    macs = log[is_mac]
    latest = macs["cycle"].max()
    ch = int(macs["channel"][macs["cycle"] == latest].min())  # (whose last MAC issues last; ties: the lowest)
    own = log[log["channel"] == ch]
    t = np.sort(own["cycle"][own["command"] == _CMD["MAC"]])
    interval = hw.mac_interval
    steps = np.diff(t)
    hold = held(ch) if held is not None else Held(np.zeros(0), np.zeros(0))
    spans = dict.fromkeys(Span, 0)
    waited = int(hold.within(0, t[0]))
    spans[Span.BEFORE] = int(t[0]) - waited
    spans[Span.WAIT] += waited
    spans[Span.MAC] = int(np.minimum(steps, interval).sum()) + interval
    others = own[own["command"] != _CMD["MAC"]]
    order = np.argsort(others["cycle"], kind="stable")
    ocyc, ocmd = others["cycle"][order], others["command"][order]
    gaps = np.flatnonzero(steps > interval)
    waits = hold.within(t[gaps] + interval, t[gaps + 1])
    for i, w in zip(gaps, waits.tolist()):
        a, b = t[i], t[i + 1]
        inside = set(ocmd[np.searchsorted(ocyc, a, "right") : np.searchsorted(ocyc, b, "left")].tolist())
        kind = next((k for k, names in _GAP_KINDS if any(_CMD[n] in inside for n in names)), Span.EMPTY)
        spans[kind] += int(b - a - interval) - w
        spans[Span.WAIT] += w
    done = compile_tables(hw).completion  # (per command: cycles from issue to completion)
    end = max(int((own["cycle"] + done[own["command"]]).max()), int(t[-1]) + interval)
    end = min(end, makespan)
    waited = int(hold.within(int(t[-1]) + interval, end))
    spans[Span.TAIL] = end - int(t[-1]) - interval - waited
    spans[Span.WAIT] += waited
    spans[Span.HOST_TAIL] = makespan - end
    return {"channel": ch, "macs": len(t), **{str(k): v for k, v in spans.items()}}


def describe(ms: dict[str, int]) -> str:
    """One line: the critical channel's makespan as its terms."""
    names = {
        Span.BEFORE: "before the first",
        Span.WAIT: "waiting for the host's signal",
        Span.REFRESH: "in gaps with refresh",
        Span.READOUT: "in gaps with read-outs",
        Span.LOAD: "in gaps with buffer loads",
        Span.ROW: "in gaps with row changes",
        Span.EMPTY: "in gaps without commands",
        Span.TAIL: "after the last",
        Span.HOST_TAIL: "host after the channel",
    }
    parts = [f"{ms[Span.MAC]:,} MAC ({ms['macs']:,} MACs)"]
    parts += [f"{ms[k]:,} {v}" for k, v in names.items() if ms[k]]
    total = sum(ms[str(k)] for k in Span)
    return f"channel {ms['channel']}: " + " + ".join(parts) + f" = {total:,}"


# the bound's parts (solver/bound_parts.py) and the spans of the program they stand against
# (the gaps are one term: a gap is filed by what it holds, and a one-bank unit's buffer loads go
# into its row changes, so the program's row-change and load gaps stand together against the
# bound's row changes and boundaries)
AGAINST = (
    ("first", (Span.BEFORE,)),
    ("mac", (Span.MAC,)),
    ("gaps", (Span.ROW, Span.LOAD, Span.READOUT, Span.EMPTY)),
    ("waiting_for_sync", (Span.WAIT,)),
    ("refresh_and_end", (Span.REFRESH, Span.TAIL, Span.HOST_TAIL)),
    ("relaxation", ()),
    ("other_term", ()),
)


def distance(ms: dict[str, int], parts: StreamingParts) -> dict:
    """The program's cycles above its hardware bound, term by term: per part of the bound's
    streaming count (`parts`, solver/bound_parts.py) the spans of the critical channel's MAC
    stream that stand against it (`AGAINST`), both in cycles, and their difference. The bound's
    `relaxation` and `other_term` have no span. The differences sum to the program's cycles
    minus its hardware bound, exactly."""
    rows = {}
    for name, spans in AGAINST:
        program = sum(ms[str(s)] for s in spans)
        bound = getattr(parts, name, 0)
        rows[name] = {"program": program, "bound": bound, "distance": program - bound}
    program = sum(ms[str(s)] for s in Span)
    bound = parts.total + parts.relaxation + parts.other_term
    return {"view": parts.view, "terms": rows, "program": program, "bound": bound, "distance": program - bound}


def describe_distance(d: dict) -> str:
    """One line: the distance and its non-zero terms."""
    terms = [f"{k.replace('_', ' ')} {v['distance']:+,}" for k, v in d["terms"].items() if v["distance"]]
    return f"{d['distance']:+,} = " + ", ".join(terms) + f" ({d['view']} view)"
