"""What a simulation returns: `SimResult`, and the record formats of the command log.

Definitions (all per run of `simulate`):

cycles              makespan: the last completion over all streams (command completions as in
                    sim/__init__, host instruction ends, signal times).
StreamTimes         per instruction of a stream: `issue` (first command's cycle; host: start;
                    SIG: the cycle the signal is set; WAIT: its release), `last` (last command's
                    cycle; host: start), `done` (completion; host: end).
command_counts      DRAM/PIM commands on the buses, every command of a sweep counted.
row hits / misses   per bank: after an ACT, the first column command (RD, WR, MAC) to the bank
                    is a miss (it needed the activation), every further column command to the same
                    activation a hit; each command of a sweep counts, and an all-bank MAC counts
                    once per bank of its mask.
bank_utilization    bursts the bank delivered (RD/WR/MAC) x mac_interval / cycles: the share of
                    time the bank streams at the PIM unit's rate.
pu_utilization      PIM-unit busy fraction: MAC commands x mac_interval / cycles.
channel_utilization commands on the channel's command bus / cycles.
utilization         sum of PIM-unit busy cycles / (every PIM unit of the device x cycles).
stalls              cycles commands waited beyond back-to-back issue, by the reason that bound
                    them: a timing-row name, "sync" (a WAIT), "stamp" (a stamp later than the
                    earliest legal cycle), "WRGB->MAC global-buffer burst tGB", "host sync",
                    "host stamp". (One command per cycle on a channel's bus is not a stall.)
log                 (record=True) every command, LOG_DTYPE: channel 0's commands in issue (= cycle)
                    order, then channel 1's, ... (sort by `cycle` for one global timeline).
host_events         every HOP/EPI/HMV/LAUNCH, HOST_EVENT_DTYPE.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from hwmodel.isa import Instruction
from hwmodel.model import COMMANDS
from hwmodel.streams import StreamSet

LOG_DTYPE = np.dtype(
    [
        ("cycle", np.int64),
        ("channel", np.int32),
        ("command", np.uint8),
        ("bank", np.int32),
        ("mask", np.uint64),
        ("row", np.int32),
        ("col", np.int32),
        ("instr", np.int32),
    ]
)
"""Command log record. command: index into hwmodel.model.COMMANDS. bank: -1 for multi-bank
commands, REF and WRGB. mask: banks acted on (0 for WRGB). row: ACT's row, the open row for
RD/WR/MAC (-1 if the banks of a MAC have different rows), else -1. col: column for RD/WR/MAC,
global-buffer burst for WRGB, first accumulator of the burst for RDACC, else -1. instr: index of
the instruction in its channel stream."""

HOST_EVENT_DTYPE = np.dtype(
    [("start", np.int64), ("end", np.int64), ("op", np.int32), ("kind", np.uint8), ("instr", np.int32)]
)
"""Host event record. kind: 0 = HOP, 1 = EPI, 2 = HMV, 3 = LAUNCH (index into HOST_KINDS). op: index into
program.ops (-1 for a LAUNCH)."""

HOST_KINDS = ("HOP", "EPI", "HMV", "LAUNCH")


@dataclass
class StreamTimes:
    issue: np.ndarray
    last: np.ndarray
    done: np.ndarray


@dataclass
class SimResult:
    hardware: str
    cycles: int
    functional: bool
    channel_times: list[StreamTimes]
    host_times: StreamTimes
    counts: np.ndarray  # [C, len(COMMANDS)]
    bank_bursts: np.ndarray  # [C, banks]
    pu_macs: np.ndarray  # [C, PIM units]
    row_hits: np.ndarray  # [C, banks]
    row_misses: np.ndarray  # [C, banks]
    refreshes: np.ndarray  # [C]
    stalls: dict[str, int]
    signals: dict[int, int]  # signal id -> cycle set
    mac_interval: int
    total_pus: int
    log: np.ndarray | None = None
    host_events: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=HOST_EVENT_DTYPE))
    outputs: dict[str, np.ndarray] = field(default_factory=dict)
    host: dict[str, np.ndarray] = field(default_factory=dict)
    resident: Mapping[str, np.ndarray] = field(default_factory=dict)  # functional: banks at the end
    output_dtypes: dict[str, str] = field(default_factory=dict)
    phase_seconds: dict[str, float] = field(default_factory=dict)  # wall time: encode, issue, log, functional
    violations: int = 0
    # channels with instructions whose streams the timing pass ran; the others were twins of one
    # of them (sim/twins.py: identical streams, handed its state)
    channels_run: int | None = None

    # ---- per-instruction times ---------------------------------------------------------------
    def times(self, stream: int | str) -> StreamTimes:
        """Times of channel `stream` (int) or of the host stream ("host")."""
        if stream != "host" and not self.channel_times:
            raise ValueError("a streamed run (timing-only, no command log) keeps no per-instruction channel times")
        return self.host_times if stream == "host" else self.channel_times[stream]

    def stamped(self, streams: StreamSet) -> StreamSet:
        """Copy of `streams` with every command instruction (and HOP/EPI) stamped at the cycle
        this run issued it; SIG/WAIT stay unstamped. Simulating the copy reproduces this run."""
        if not self.channel_times and streams.channels:
            raise ValueError("a streamed run (timing-only, no command log) keeps no per-instruction channel times")

        def stamp(instrs: list[Instruction], times: StreamTimes) -> list[Instruction]:
            return [ins if ins.op in ("SIG", "WAIT") else ins.at(int(t)) for ins, t in zip(instrs, times.issue)]

        return StreamSet(
            streams.hardware,
            streams.isa_version,
            list(streams.symbols),
            [stamp(s, t) for s, t in zip(streams.channels, self.channel_times)],
            stamp(streams.host, self.host_times),
            list(streams.placements),
        )

    # ---- derived figures ---------------------------------------------------------------------
    @property
    def command_counts(self) -> dict[str, int]:
        tot = self.counts.sum(axis=0) if len(self.counts) else np.zeros(len(COMMANDS), dtype=np.int64)
        return {c: int(n) for c, n in zip(COMMANDS, tot)}

    @property
    def commands(self) -> int:
        return int(self.counts.sum())

    @property
    def bank_utilization(self) -> np.ndarray:
        return self.bank_bursts * self.mac_interval / max(self.cycles, 1)

    @property
    def pu_utilization(self) -> np.ndarray:
        return self.pu_macs * self.mac_interval / max(self.cycles, 1)

    @property
    def channel_utilization(self) -> np.ndarray:
        return self.counts.sum(axis=1) / max(self.cycles, 1)

    @property
    def utilization(self) -> float:
        return float(self.pu_macs.sum() * self.mac_interval / max(self.total_pus * self.cycles, 1))

    @property
    def row_hit_rate(self) -> float:
        h, m = int(self.row_hits.sum()), int(self.row_misses.sum())
        return h / (h + m) if h + m else 0.0

    def summary(self) -> dict:
        return {
            "cycles": self.cycles,
            "commands": self.command_counts,
            "utilization": self.utilization,
            "row_hits": int(self.row_hits.sum()),
            "row_misses": int(self.row_misses.sum()),
            "stalls": dict(self.stalls),
            "violations": self.violations,
        }
