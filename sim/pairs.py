"""Pseudo-channel pairs on shared command buses (organization.command_bus = shared_pair): the
check that channels 2k and 2k+1 never hold the same bus in the same cycle.

Each channel's kernel records its bus occupancy (hwmodel/bus.py records: a sweep at its spacing
is one record) into a buffer of its own (sim/channel.py). Whenever a channel stops (a WAIT, the
end of a slice or of its stream) its records move here, and while its partner is stopped too
the pair's pending records are checked and those that can meet nothing new are let go: a record
ending before both channels' current bus cycle has been checked against everything the other
channel will ever issue (its next command comes later). So memory stays bounded by how far the
two channels of a pair run apart, not by the program.

Each pair's result is its earliest collision, the same whatever the order or threads the
channels ran in: a collision found at or before both channels' current cycle cannot be beaten
by a command still to come (those come later), and on one bus two channels each hold at most one
command per cycle, so the earliest cycle names one pair of commands per bus (the column bus
first). After every channel has run, `finish` raises the earliest over the pairs (the lowest pair
on a tie); a channel's own violation is met while it runs and comes first.
"""

from __future__ import annotations

import numpy as np

from hwmodel import bus
from hwmodel.model import COMMANDS, Hardware
from hwmodel.table import encode_stream

from . import channel as K
from .encode import C_N
from .errors import SimulationError, instruction_text

_FAR = 1 << 62


class PairCheck:
    def __init__(self, hw: Hardware, channels, states, twins: frozenset[int] = frozenset()):
        """twins: channels not run (sim/twins.py: whole pairs, whose leader pair is checked)."""
        self.hw, self.channels, self.states = hw, channels, states
        self.act_w = bus.act_bus_cycles(hw)
        n = len(channels)
        self.pairs = [a for a in range(0, n - 1, 2) if len(channels[a]) and len(channels[a + 1]) and a not in twins]
        self.pending: dict[int, list[np.ndarray]] = {c: [] for a in self.pairs for c in (a, a + 1)}
        self.finished: set[int] = set()
        self.found: dict[int, tuple] = {}  # pair -> (cycle, its two commands' records and cycles)
        self.checked: dict[int, int] = {}  # pair -> the horizon T of its last check

    def stopped(self, c: int, finished: bool, idle=lambda c: True) -> None:
        """Channel c's kernel returned (finished: its stream has ended); `idle(ch)`: whether
        channel ch is not running (sim/parallel: its partner may be on another thread)."""
        if c not in self.pending:
            return
        self._collect(c)
        if finished:
            self.finished.add(c)
        if idle(c ^ 1):
            self._collect(c ^ 1)
            self._check(c & ~1)

    def finish(self) -> None:
        """After every channel has run: check what is left, raise the earliest collision."""
        for c in self.pending:
            self._collect(c)
            self.finished.add(c)
        for a in self.pairs:
            self._check(a)
        if self.found:
            a = min(self.found, key=lambda a: (self.found[a][0], a))
            raise self._error(a, *self.found[a])

    def _collect(self, c: int) -> None:
        s = self.states[c]
        n = int(s["st"][K.ST_NOCC])
        parts = s["occ_parts"]
        if n:
            parts.append(s["occ"][: n * K.OCC_WIDTH].reshape(n, K.OCC_WIDTH).copy())
            s["st"][K.ST_NOCC] = 0
        if parts:
            self.pending[c].extend(parts)
            s["occ_parts"] = []

    def _horizon(self, c: int) -> int:
        """Every command channel c issues from now on starts after this cycle."""
        return _FAR if c in self.finished else int(self.states[c]["st"][K.ST_BUS])

    def _check(self, a: int) -> None:
        b = a + 1
        pa, pb = self.pending[a], self.pending[b]
        if a in self.found:
            pa.clear(), pb.clear()
            return
        T = min(self._horizon(a), self._horizon(b))
        if T < _FAR and self.checked.get(a) == T:
            # nothing to learn: the records added since the last check start after it (after
            # their channel's horizon then, >= T), so any collision they have is after T and not
            # final yet, and none of the records kept then ends before T
            return
        self.checked[a] = T
        ra = np.concatenate(pa) if len(pa) > 1 else (pa[0] if pa else np.zeros((0, K.OCC_WIDTH), np.int64))
        rb = np.concatenate(pb) if len(pb) > 1 else (pb[0] if pb else np.zeros((0, K.OCC_WIDTH), np.int64))
        out = bus.collision(ra, rb, 0, self.act_w)
        if out is not None and out[0] <= T:
            ia, ib = int(out[1]), int(out[2])
            self.found[a] = (int(out[0]), ra[ia].copy(), int(out[3]), rb[ib].copy(), int(out[4]))
            pa.clear(), pb.clear()
            return
        pa[:] = [_keep(ra, T, self.act_w)] if len(ra) else []
        pb[:] = [_keep(rb, T, self.act_w)] if len(rb) else []

    def _error(self, a: int, cyc: int, ra, ta: int, rb, tb: int) -> SimulationError:
        b = a + 1
        act_w, channels = self.act_w, self.channels
        who = sorted([(ta, a, ra), (tb, b, rb)], key=lambda w: (w[0], w[1]))  # the command issued first holds the bus
        (t0, c0, r0), (t1, c1, r1) = who
        cmd0, cmd1 = COMMANDS[int(r0[bus.O_CMD])], COMMANDS[int(r1[bus.O_CMD])]
        row = bool(bus.ROW_BUS[int(r0[bus.O_CMD])])
        which = "row" if row else "column"
        i0, i1 = self._instruction(c0, r0, t0), self._instruction(c1, r1, t1)
        held = f"cycles {t0}-{t0 + act_w - 1}" if cmd0 == "ACT" and act_w > 1 else f"cycle {t0}"
        err = SimulationError(
            "bus",
            f"channels {a} and {b} share a {which} command bus (organization.command_bus = shared_pair): "
            f"{cmd1} here at cycle {t1} while channel {c0} instr {i0} `{instruction_text(channels[c0][i0])}` "
            f"({cmd0}) holds it {held}; two {which} commands of a pseudo-channel pair may not overlap"
            + (f" (an ACT holds the row bus tACT_BUS={act_w} cycles)" if row and act_w > 1 else ""),
            cycle=cyc,
            stream=c1,
            instr=i1,
            instruction=channels[c1][i1],
        )
        err.partner = (c0, i0)
        return err

    def _instruction(self, c: int, r: np.ndarray, t: int) -> int:
        """The instruction of channel c whose command at cycle t is in record r: counted from the
        record's first instruction (a record may hold several whole instructions in a row, see
        sim/channel.py ST_OCCWHOLE; the part of a sweep split by its spacing names its own)."""
        i, step = int(r[bus.O_INSTR]), int(r[bus.O_STEP])
        x = (t - int(r[bus.O_T0])) // step if step else 0
        if x == 0:
            return i
        # every instruction issues at least one command: the one wanted is among the next x + 1
        counts = encode_stream(self.hw, list(self.channels[c][i : i + x + 1]))[:, C_N]
        return i + int(np.searchsorted(np.cumsum(counts), x, side="right"))


def _keep(r: np.ndarray, T: int, act_w: int) -> np.ndarray:
    """The records that still end at or after cycle T (the others can meet no later command)."""
    return bus.ending_from(r, np.int64(T), np.int64(act_w))
