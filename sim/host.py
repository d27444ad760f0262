"""The host stream: the host unit runs HOP, EPI and HMV one at a time (costs: hwmodel.host_costs).

Host stream timing: the unit runs one instruction at a time. HOP/EPI/HMV/LAUNCH start at
max(end of the previous one of them, release of every WAIT before it); a stamped one starts exactly
at its stamp, which must be >= that. end = start + duration. A SIG is set at the largest end of
the host instructions before it. WAIT id releases at signal time + ``sync_cycles``.
"""

from __future__ import annotations

import numpy as np

from hwmodel.host_costs import (  # noqa: F401  (re-exported: the simulator's API)
    MATRIX_KINDS,
    batch_range_error,
    chain_cycles,
    chain_error,
    epilogue_chain_cycles,
    epilogue_cycles,
    head_range_error,
    host_mv_cycles,
    host_op_cycles,
    launch_error,
    mv_chain_cycles,
)
from hwmodel.model import Hardware

from .encode import C_OP, C_ROW, C_STAMP, OP_EPI, OP_HMV, OP_HOP, OP_LAUNCH, OP_SIG, OP_WAIT
from .errors import SimulationError

HOST_KIND = {OP_HOP: 0, OP_EPI: 1, OP_HMV: 2, OP_LAUNCH: 3}  # index into sim.result.HOST_KINDS


class HostRunner:
    """Timing of the host stream; resumable like the channel kernel (run() -> done?)."""

    def __init__(self, hw: Hardware, program, stream, table: np.ndarray):
        self.hw, self.program, self.stream, self.table = hw, program, stream, table
        n = len(stream)
        self.issue = np.full(n, -1, dtype=np.int64)
        self.lastc = np.full(n, -1, dtype=np.int64)
        self.done = np.full(n, -1, dtype=np.int64)
        self.pos = 0
        self.free = 0  # end of the previous HOP/EPI
        self.max_end = 0
        self.wait = 0
        self.block = -1
        self.stall = {"sync": 0, "stamp": 0}
        self.events: list[tuple[int, int, int, int, int]] = []  # start, end, op, kind, instr
        self._cost: dict[tuple[int, int], int] = {}

    def _duration(self, kind: int, op_index: int, i: int) -> int:
        chained = self.stream[i].get("chain") == 1
        rows = self.stream[i].get("rows") if kind == OP_HMV else 0
        ins = self.stream[i]
        head0, heads = (0, 0) if kind == OP_HMV else (ins.get("head0"), ins.get("heads"))
        batch0, batches = (0, 0) if kind == OP_HMV else (ins.get("batch0"), ins.get("batches"))
        key = (kind, op_index, chained, rows, head0, heads, batch0, batches)
        if key not in self._cost:
            if self.program is None:
                raise SimulationError(
                    "stream",
                    "HOP/EPI needs the program (simulate(..., program=...))",
                    stream="host",
                    instr=i,
                    instruction=ins,
                )
            if op_index >= len(self.program.ops):
                raise SimulationError(
                    "symbol",
                    f"op {op_index} does not exist (program has {len(self.program.ops)} ops)",
                    stream="host",
                    instr=i,
                    instruction=ins,
                )
            if kind == OP_HMV:
                self._cost[key] = self._hmv_cycles(op_index, i) - (self.hw.host.dispatch_cycles if chained else 0)
                return self._cost[key]
            if kind == OP_EPI and self.program.ops[op_index].kind.value not in MATRIX_KINDS:
                raise SimulationError(
                    "symbol",
                    f"EPI of op {op_index} '{self.program.ops[op_index].name}' "
                    f"({self.program.ops[op_index].kind.value}): only gemv/attn_score/"
                    "attn_context run in memory",
                    stream="host",
                    instr=i,
                    instruction=ins,
                )
            bad = head_range_error(self.program, op_index, ins.op, head0, heads)
            if bad is not None:
                raise SimulationError("symbol", f"{ins.op} head range: {bad}", stream="host", instr=i, instruction=ins)
            bad = batch_range_error(self.program, op_index, ins.op, batch0, batches, heads)
            if bad is not None:
                raise SimulationError("symbol", f"{ins.op} batch range: {bad}", stream="host", instr=i, instruction=ins)
            fn = host_op_cycles if kind == OP_HOP else epilogue_cycles
            # a HOP (EPI) chained to the one before it is part of the same kernel launch
            self._cost[key] = fn(self.hw, self.program, op_index, heads, batches) - (
                self.hw.host.dispatch_cycles if chained else 0
            )
        return self._cost[key]

    def _hmv_cycles(self, op_index: int, i: int) -> int:
        ins, op = self.stream[i], self.program.ops[op_index]
        if op.kind.value != "gemv":
            raise SimulationError(
                "symbol",
                f"HMV of op {op_index} '{op.name}' ({op.kind.value}): only a gemv has rows to split",
                stream="host",
                instr=i,
                instruction=ins,
            )
        n = self.program.tensors[op.inputs[1]].shape[0]
        row0, rows = ins.get("row0"), ins.get("rows")
        if rows < 1 or row0 + rows > n:
            raise SimulationError(
                "symbol",
                f"HMV rows {row0}..{row0 + rows - 1} of op '{op.name}' outside its {n} rows",
                stream="host",
                instr=i,
                instruction=ins,
            )
        return host_mv_cycles(self.hw, self.program, op_index, rows)

    def _launch_error(self, op: int, i: int) -> str | None:
        """Why host instruction i cannot launch or continue a launch as it says (None: it can)."""
        if op == OP_LAUNCH:
            return launch_error(self.hw)
        if self.stream[i].get("chain") != 1:
            return None
        before, waited = self._chained_to(i)
        return chain_error(self.hw, before, self.stream[i].op, waited)

    def _chained_to(self, i: int) -> tuple[str | None, bool]:
        """The op of the nearest host instruction before i that is not a SIG or WAIT, and whether a
        WAIT lies between."""
        waited = False
        for j in range(i - 1, -1, -1):
            if self.stream[j].op not in ("SIG", "WAIT"):
                return self.stream[j].op, waited
            waited = waited or self.stream[j].op == "WAIT"
        return None, waited

    def run(self, sig: np.ndarray) -> bool:
        """Advance until the end (True) or a WAIT on an unset signal (False, self.block)."""
        t = self.table
        sync = self.hw.host.sync_cycles
        while self.pos < len(t):
            i = self.pos
            op, arg, stamp = int(t[i, C_OP]), int(t[i, C_ROW]), int(t[i, C_STAMP])
            if op == OP_SIG:
                if sig[arg] >= 0:
                    raise SimulationError(
                        "signal",
                        f"signal {self.stream[i].get('id')} set twice (first at cycle {int(sig[arg])})",
                        cycle=self.max_end,
                        stream="host",
                        instr=i,
                        instruction=self.stream[i],
                    )
                sig[arg] = self.max_end
                self.issue[i] = self.lastc[i] = self.done[i] = self.max_end
            elif op == OP_WAIT:
                if sig[arg] < 0:
                    self.block = arg
                    return False
                rel = int(sig[arg]) + sync
                self.wait = max(self.wait, rel)
                self.issue[i] = self.lastc[i] = self.done[i] = rel
            elif op in (OP_HOP, OP_EPI, OP_HMV, OP_LAUNCH):
                bad = self._launch_error(op, i)
                if bad is not None:
                    raise SimulationError("stream", bad, stream="host", instr=i, instruction=self.stream[i])
                if op == OP_LAUNCH:  # a kernel launch without work: no op (-1)
                    arg, dur = -1, self.hw.host.dispatch_cycles
                else:
                    dur = self._duration(op, arg, i)
                earliest = max(self.free, self.wait)
                if stamp >= 0:
                    if stamp < self.free:
                        raise SimulationError(
                            "bus",
                            f"host unit busy until cycle {self.free}",
                            cycle=stamp,
                            stream="host",
                            instr=i,
                            instruction=self.stream[i],
                            needed=self.free,
                            actual=stamp,
                        )
                    if stamp < self.wait:
                        raise SimulationError(
                            "sync",
                            f"a WAIT before it releases at cycle {self.wait}",
                            cycle=stamp,
                            stream="host",
                            instr=i,
                            instruction=self.stream[i],
                            needed=sync,
                            actual=stamp - (self.wait - sync),
                        )
                    self.stall["stamp"] += stamp - earliest
                    start = stamp
                else:
                    start = earliest
                if self.wait > self.free:
                    self.stall["sync"] += self.wait - self.free
                end = start + dur
                self.issue[i] = self.lastc[i] = start
                self.done[i] = end
                self.free = end
                self.max_end = max(self.max_end, end)
                self.events.append((start, end, arg, HOST_KIND[op], i))
            else:
                raise SimulationError(
                    "stream",
                    f"{self.stream[i].op} is a channel instruction; "
                    "the host stream runs HOP, EPI, HMV, LAUNCH, SIG and WAIT",
                    stream="host",
                    instr=i,
                    instruction=self.stream[i],
                )
            self.pos += 1
        return True
