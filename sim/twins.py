"""Twin channels: one kernel run for every channel whose stream encodes the same rows.

A decoded program's lockstep channels often run identical streams: the same tables at the same
issue cycles after the same WAITs, differing only in the ids of the SIGs that end their tasks
(on the batch-16 Llama-2-7B layer on hbm2-pim x64, the rows of 64 channels make 2 distinct
streams for the naive program, 18 for the greedy one; the keys below, which only match parts of
the same task, find 8 and 20). The decoder says so without building a row: each part of a LazyStream carries a
PartTwin (hwmodel/streams.py) whose `match` is the same for two channels exactly when their
rows are (the same table object from the task's cache, the same issue-cycle object from one
timing, the same WAIT ids; solver/assemble.py).

A channel's timing depends only on its rows and on the times of the signals its WAITs read, so a
twin computes what its leader computes, cycle for cycle: the same bank and bus state, counters
and stalls, at every instruction. A streamed timing run (sim/engine.py) therefore runs the
lowest channel of each class (its leader) and hands the others (the twins) the leader's state
at the end; a twin's SIG is set when its leader sets the SIG at the same place, to the same
cycle. On a shared command bus the unit is the pseudo-channel pair (both channels twins of a
leader pair's), so a twin pair's bus collisions are the leader pair's, checked once.

What could make a twin differ is an error of the program: a twin's SIG id that some stream sets
too (a signal set twice), a deadlock, a violation (met on the leader, but the serial run names
the channel it meets first). The twin run stops at any error and sim/engine runs the program
again without twins, which raises the error the plain run raises: a correct program never runs
twice.
"""

from __future__ import annotations

import os
from contextlib import nullcontext

from hwmodel.model import Hardware
from hwmodel.streams import LazyStream

__all__ = ["Twins", "SignalSetTwice", "twins_enabled"]


def twins_enabled() -> bool:
    """Twins are on unless the environment sets PIMSAT_TWINS=0 (to measure or test without)."""
    return os.environ.get("PIMSAT_TWINS", "1") != "0"


class SignalSetTwice(Exception):
    """A twin's SIG id was already set: an error of the program (sim/engine runs it again without
    twins, which names it)."""


class Twins:
    """leader[c]: the channel run for channel c (c itself for a leader and for channels without
    instructions; on a shared bus, the same member of the leader pair); relay: per leader, its
    SIG ids in order and each twin's id at that SIG."""

    def __init__(self, leader: list[int], relay: dict[int, tuple[list[int], list[list[int]]]]):
        self.leader = leader
        self.relay = relay
        self._next = {c: 0 for c in relay}  # per leader: its first SIG not relayed yet
        self.size = [0] * len(leader)  # per leader: the channels it runs for (itself included)
        for lead in leader:
            self.size[lead] += 1

    @classmethod
    def of(cls, hw: Hardware, channels) -> Twins | None:
        """The classes of `channels` (None: every channel is its own)."""
        keys = [
            s.twin_key() if isinstance(s, LazyStream) and len(s) and getattr(s, "has_rows", False) else None
            for s in channels
        ]
        n = len(channels)
        step = 2 if hw.organization.shared_bus else 1
        leader = list(range(n))
        first: dict[tuple, int] = {}
        for u in range(0, n, step):
            members = range(u, min(u + step, n))
            if any(keys[c] is None for c in members if len(channels[c])) or not any(len(channels[c]) for c in members):
                continue
            # (a member without instructions: key None where its partner's is not; a pair keeps
            # its width, so a lone last channel never matches a pair)
            unit = tuple(keys[c] for c in members) + (len(members),)
            lead = first.setdefault(unit, u)
            for c in members:
                if len(channels[c]):  # (an empty member runs nothing either way)
                    leader[c] = lead + (c - u)
        if all(leader[c] == c for c in range(n)):
            return None
        relay: dict[int, tuple[list[int], list[list[int]]]] = {}
        for c in range(n):
            lead = leader[c]
            if lead == c:
                continue
            mine, theirs = channels[c].twin_signals(), channels[lead].twin_signals()
            if lead not in relay:
                relay[lead] = (theirs, [[] for _ in theirs])
            for at, sid in enumerate(mine):
                relay[lead][1][at].append(sid)
        return cls(leader, relay)

    def runs(self, c: int) -> bool:
        """Channel c is run (a leader), not handed its leader's state."""
        return self.leader[c] == c

    def twins(self) -> list[int]:
        return [c for c, lead in enumerate(self.leader) if lead != c]

    def unread(self, channels) -> None:
        """The twins' streams are not read: their parts let go of what they keep for them."""
        for c in self.twins():
            channels[c].unread()

    def relay_signals(self, lead: int, signals, lock=None, grow=None, write=None) -> None:
        """Set the twins' SIGs for the leader's SIGs set so far (each is set once, in stream order).
        sim/parallel passes how it shares the signal map with its threads: `lock` (held while
        ids get indices), grow() (grows the array while no kernel runs) and write(fn) (runs fn
        while the array does not grow). Raises SignalSetTwice if a twin's id is set already."""
        ids, twins = self.relay.get(lead, ((), ()))
        start = at = self._next.get(lead, 0)
        if at == len(ids):
            return
        with lock or nullcontext():
            index = signals.index
            while at < len(ids):
                d = index.get(ids[at])
                if d is None or signals.time[d] < 0:
                    break
                for sid in twins[at]:
                    index.setdefault(sid, len(index))
                at += 1
            if at == start:
                return
            if signals.short():
                (grow or signals.grow)()

        def put() -> None:
            time = signals.time
            for k in range(start, at):
                dense = [index[sid] for sid in twins[k]]
                if (time[dense] >= 0).any():
                    raise SignalSetTwice()
                time[dense] = time[index[ids[k]]]

        (write or (lambda fn: fn()))(put)
        self._next[lead] = at
