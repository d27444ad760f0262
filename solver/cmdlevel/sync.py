"""SIG / WAIT, the host stream, refresh limits and the makespan, exactly as the simulator has them.

Channel streams (sim/channel.py): a SIG is set at max(largest completion of every earlier
command of the stream, previous instruction's issue + 1) (a WAIT's issue is its release, a
SIG's its time); a WAIT releases at signal + sync_cycles and holds every later command. The
host (sim/host.py): each HOP/EPI/HMV starts at max(end of the previous one, every earlier WAIT's
release) and runs its fixed duration; a host SIG is set at the largest end so far. The makespan
is the largest of every channel's last completion, the host's last end and every signal.
Completions: hwmodel.model.COMPLETION. All are equalities (AddMaxEquality), so the model's
makespan is the simulator's for the stamped program, not only a bound on it.
"""

from __future__ import annotations

from hwmodel import Hardware
from hwmodel.model import completion_cycles

from .commands import ChannelStream, segments


class Sync:
    def __init__(self, m, hw: Hardware, horizon: int):
        self.m, self.hw, self.H = m, hw, horizon
        self.sync = hw.host.sync_cycles
        self.sig: dict[int, object] = {}
        self.ends: list = []  # expressions the makespan is the max of
        self.compl = completion_cycles(hw.timing)
        self._later: dict[int, list[int]] = {}  # command -> the SIGs after it in its stream

    def _max(self, name: str, terms: list):
        terms = [x for x in terms if x is not None]
        v = self.m.NewIntVar(-1, 2 * self.H + 1, name)
        self.m.AddMaxEquality(v, terms)
        return v

    def signal(self, sid: int):
        if sid not in self.sig:
            self.sig[sid] = self.m.NewIntVar(0, 2 * self.H + 1, f"sig{sid}")
        return self.sig[sid]

    def after_sig(self, host, durations: dict[int, int]) -> dict[int, int]:
        """Command j -> the least the host still runs after the later SIGs of j's stream: for a
        host WAIT on signal s, sync + the durations of the host ops after it (they start after
        its release, one after another). Filled by `channel` (self._later)."""
        hold: dict[int, int] = {}
        for i, ins in enumerate(host):
            if ins.op == "WAIT":
                rest = sum(d for k, d in durations.items() if k > i)
                hold[ins.get("id")] = max(hold.get(ins.get("id"), 0), self.sync + rest)
        out = {}
        for j, sids in self._later.items():
            out[j] = max((hold.get(s, 0) for s in sids), default=0)
        return out

    def channel(self, cs: ChannelStream, t: list) -> None:
        """Segments in order: barriers between them, WAITs before them, SIGs after them."""
        m = self.m
        maxdone, prev, wait, last = 0, -1, None, None  # last: the previous non-empty segment's last issue
        segs = segments(cs)
        syncs = [(k, x) for k, x in cs.items if k != "cmd"]
        for s, seg in enumerate(segs):
            later = [sid for k, sid in syncs[s:] if k == "SIG"]
            for x in seg:
                self._later[x.j] = later
        for s, seg in enumerate(segs):
            if seg:
                for x in seg:
                    if wait is not None:
                        m.Add(t[x.j] >= wait)
                    if last is not None:
                        m.Add(t[x.j] >= last + 1)
                last = self._max(f"c{cs.ch}s{s}last", [t[x.j] for x in seg])
                prev = last
                maxdone = self._max(f"c{cs.ch}s{s}done", [maxdone] + [t[x.j] + self.compl[x.op] for x in seg])
            if s < len(syncs):
                kind, sid = syncs[s]
                v = self.signal(sid)
                if kind == "SIG":
                    m.AddMaxEquality(v, [maxdone, prev + 1])
                    prev = v
                    self.ends.append(v)
                else:
                    rel = v + self.sync
                    wait = rel if wait is None else self._max(f"c{cs.ch}w{s}", [wait, rel])
                    prev = rel
        self.ends.append(maxdone)

    def host(self, stream, durations: dict[int, int]) -> None:
        """`durations[i]`: cycles of host instruction i (HOP/EPI/HMV)."""
        free, wait, end = 0, 0, 0
        for i, ins in enumerate(stream):
            if ins.op == "SIG":
                self.m.Add(self.signal(ins.get("id")) == end)
            elif ins.op == "WAIT":
                wait = self._max(f"hw{i}", [wait, self.signal(ins.get("id")) + self.sync])
            else:
                start = self._max(f"hs{i}", [free, wait])
                end = start + durations[i]
                free = end
        self.ends.append(end)

    def refresh(self, cs: ChannelStream, t: list, makespan) -> None:
        """JEDEC limits per bank (sim/channel.py, sim/engine.py _check_end): REF #j no earlier than
        (j - max_pulled_in) tREFI, earlier than (j + max_postponed) tREFI, at most
        max_refresh_interval x tREFI after the previous (or cycle 0); at the end every REF due
        issued and the last within that interval of the makespan."""
        tm = self.hw.timing
        trefi, maxp, pull, gap = (
            tm.p("tREFI"),
            tm.max_postponed_refresh,
            tm.max_pulled_in_refresh,
            tm.max_refresh_interval,
        )
        nb = self.hw.organization.banks_per_channel
        count, last = [0] * nb, [0] * nb
        for kind, x in cs.items:
            if kind != "cmd" or x.op not in ("REF", "REFSB"):
                continue
            for b in range(nb):
                if (x.banks >> b) & 1:
                    count[b] += 1
                    j = count[b]
                    self.m.Add(t[x.j] >= (j - pull) * trefi)
                    self.m.Add(t[x.j] <= (j + maxp) * trefi - 1)
                    self.m.Add(t[x.j] - last[b] <= gap * trefi)
                    last[b] = t[x.j]
        for b in range(nb):
            self.m.Add(makespan <= (count[b] + 1) * trefi - 1)
            self.m.Add(makespan - last[b] <= gap * trefi)
