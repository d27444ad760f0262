"""Re-emit a command schedule as stamped streams: one single-burst instruction per command at
its model cycle, each segment's commands in issue order, SIG/WAIT where they were; the host
stream unstamped (the simulator starts each host op at the earliest, as the model does)."""

from __future__ import annotations

import dataclasses

from hwmodel.isa import make
from hwmodel.streams import StreamSet

from .commands import segments
from .model import CommandSchedule


def restamp(streams: StreamSet, sched: CommandSchedule) -> StreamSet:
    chans = []
    for cs in sched.streams:
        out = []
        syncs = [(k, x) for k, x in cs.items if k != "cmd"]
        for s, seg in enumerate(segments(cs)):
            for x in sorted(seg, key=lambda x: sched.times[x.j]):
                out.append(x.ins.at(sched.times[x.j]))
            if s < len(syncs):
                out.append(make(syncs[s][0], id=syncs[s][1]))
        chans.append(out)
    host = [ins.at(None) for ins in streams.host]
    return dataclasses.replace(streams, channels=chans, host=host)
