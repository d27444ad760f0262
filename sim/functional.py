"""The functional pass: data effects of every instruction, in cycle order, after timing.

Timing does not depend on data, so values are computed after the timing pass, replaying the
instructions in the order of the cycles their effects happen:

  channel instruction   acts at its first command's issue cycle (bank, global buffer and
                        accumulator effects; reads of host tensors by WR/WRGB);
                        RD / RDACC deliver into host tensors at completion (last command + CL + BL2)
  HOP / EPI / HMV       read their inputs at start, write their outputs at end (HMV adds into
                        the staging tensor `Y#acc`, like RDACC)
  SIG / WAIT            carry vector clocks (which instructions of other streams are known done)
At one cycle, deliveries come before SIG, then reads, WAITs and issues (in stream order).

Numerics (hwmodel/numerics.py defines the arithmetic): operands in the PIM dtype (fp16, or bf16
held in float32); MAC multiplies lane by lane in fp32 (exact for fp16/bf16 operands), sums the
burst's products by the balanced adder tree, then adds that sum to the accumulator in fp32, burst
after burst. RDACC adds the accumulators (fp32) into the host tensor and clears them (stride 0:
their sum, in order, into one element); the result is rounded to the host tensor's dtype (fp32
for staging tensors `X#acc`). WRGB and WR convert host values to the PIM dtype; RD converts to
the host tensor's dtype. EPI: gemv out = round(staging + bias), attn_score out = round(staging *
1/sqrt(head_dim)), attn_context out = round(staging). HOP runs ir.reference.execute, but for a
gemv or attention (the host matrix unit), whose dot products follow hwmodel.numerics as in PIM.
HMV: the rows' dot products by hwmodel.numerics (x and W as stored on the host), added to the
staging tensor. A HOP or EPI with a head range (ISA 1.4) reads and writes only the elements of
those heads (a softmax's rows are independent, so its values are the whole op's); one with a
batch range (ISA 1.5) only the rows of those sequences (weights read whole).
"""

from __future__ import annotations

import math

import numpy as np

from hwmodel import numerics
from hwmodel.host_costs import op_heads
from hwmodel.model import Hardware
from hwmodel.numerics import accumulate, burst_sums
from hwmodel.streams import StreamSet
from ir.ops import PIM_CAPABLE, RESIDENT_OPERAND, resolved_attrs
from ir.reference import execute
from ir.types import round_to

from .encode import OP_SIG, OPCODES
from .engine import Timed
from .errors import SimulationError, stream_name
from .memory import BankMemory, HostTensor, pim_round

F32 = np.float32
_ISSUE, _DELIVER, _SIGNAL = 2, 0, 1


class Machine:
    def __init__(self, hw: Hardware, streams: StreamSet, program, state, inputs, timed: Timed):
        self.hw, self.ss, self.program, self.timed = hw, streams, program, timed
        self.C = len(streams.channels)
        self.E = hw.elements_per_burst
        self.banks = BankMemory(hw)
        nb = hw.organization.banks_per_channel
        self.openrow = np.full((self.C, nb), -1, dtype=np.int64)
        self.gb = np.zeros((self.C, hw.gb_bursts, self.E), dtype=F32)  # PIM-dtype values, held in fp32
        self.gb_written = np.zeros((self.C, hw.gb_bursts), dtype=bool)
        self.acc = np.zeros((self.C, hw.pus_per_channel, hw.pim.acc_registers), dtype=F32)
        S = self.C + 1
        self.vc = np.full((S, S), -1, dtype=np.int64)
        self.sigvc: dict[int, np.ndarray] = {}
        self.pending: dict[tuple[int, int], tuple] = {}
        self.host: dict[str, HostTensor] = {}
        self._masks: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._writers: set[str] | None = None
        self._init_memory(state, inputs)

    # ---- set-up -----------------------------------------------------------------------------
    def _init_memory(self, state, inputs) -> None:
        prog = self.program
        pim_flat: dict[str, np.ndarray] = {}
        self.in_banks = {p.tensor for p in self.ss.placements}
        # the rows a kv_append of this step writes are not in the memory image: only its WRs fill them
        appended = {prog.storage(op.inputs[0]): op.attrs["position"] for op in prog.ops if op.kind.value == "kv_append"}
        for p in self.ss.placements:
            if p.tensor not in pim_flat:
                if p.tensor not in state:
                    raise SimulationError(
                        "symbol",
                        f"placement names tensor '{p.tensor}', which is not a weight "
                        "or kv cache of the program (not in state)",
                    )
                image = np.asarray(state[p.tensor])
                if p.tensor in appended:
                    image = image.copy()
                    image[:, :, appended[p.tensor] :, :] = 0
                pim_flat[p.tensor] = pim_round(self.hw, image.reshape(-1))
            self.banks.load(p, pim_flat[p.tensor])
        for name in prog.inputs:
            t = prog.tensors[name]
            self.host[name] = HostTensor(name, t.shape, t.dtype.value, inputs[name], frozen=True)
        for i, name in enumerate(self.ss.symbols):
            if name in self.host:
                continue
            base, _, suffix = name.partition("#")
            if suffix == "acc" and base in prog.tensors:
                self.host[name] = HostTensor(name, prog.tensors[base].shape, "fp32", staging=True)
            elif suffix == "host" and base in prog.tensors:
                t = prog.tensors[base]
                self.host[name] = HostTensor(name, t.shape, t.dtype.value)
            elif name in prog.tensors:
                t = prog.tensors[name]
                if t.resident and name in state:  # host memory's own copy (e.g. a tied embedding table)
                    self.host[name] = HostTensor(name, t.shape, t.dtype.value, state[name], frozen=True)
                else:
                    self.host[name] = HostTensor(name, t.shape, t.dtype.value)
            else:
                raise SimulationError(
                    "symbol",
                    f"symbols[{i}] = '{name}' is neither a tensor of program "
                    f"'{prog.name}' nor '<tensor>#acc' / '<tensor>#host'",
                )

    # ---- host memory access ----------------------------------------------------------------
    def _ctx(self, s: int, i: int) -> dict:
        stream = "host" if s == self.C else s
        ins = (self.ss.host if s == self.C else self.ss.channels[s])[i]
        return dict(stream=stream, instr=i, instruction=ins)

    def _tensor(self, sym: int, s: int, i: int, cycle: int) -> HostTensor:
        if not 0 <= sym < len(self.ss.symbols):
            raise SimulationError(
                "symbol",
                f"symbol index {sym} out of range ({len(self.ss.symbols)} symbols)",
                cycle=cycle,
                **self._ctx(s, i),
            )
        return self._named(self.ss.symbols[sym], s, i, cycle)

    def _named(self, name: str, s: int, i: int, cycle: int) -> HostTensor:
        t = self.host.get(name)
        if t is None:
            raise SimulationError(
                "uninitialised", f"host tensor '{name}' was never written", cycle=cycle, **self._ctx(s, i)
            )
        return t

    def _operand(self, op, k: int, s: int, i: int, cycle: int) -> HostTensor:
        """Operand k of a host op. The resident operand of a PIM-capable op (a gemv's matrix, an
        attention's kv cache) that lives in the banks is read from its host copy `X#host` (X the
        tensor or, for a kv-cache version, its root storage), which only RD commands fill; every
        other operand from host memory under its own name (activations, norms, biases, an
        embedding table the host keeps for its gather)."""
        name = op.inputs[k]
        if op.kind in PIM_CAPABLE and k == RESIDENT_OPERAND[op.kind]:
            root = self.program.storage(name)
            if name in self.in_banks or root in self.in_banks:
                for cand in (name + "#host", root + "#host"):
                    if cand in self.host:
                        return self.host[cand]
                raise SimulationError(
                    "uninitialised",
                    f"host op '{op.name}' reads '{name}', which lives in the "
                    f"banks, but the program declares no host copy '{root}#host' for RD commands "
                    "to fill",
                    cycle=cycle,
                    **self._ctx(s, i),
                )
        return self._named(name, s, i, cycle)

    def _span(self, t: HostTensor, idx, s, i, cycle):
        lo, hi = (idx.start, idx.stop - 1) if isinstance(idx, slice) else (int(idx.min()), int(idx.max()))
        if lo < 0 or hi >= t.size:
            raise SimulationError(
                "range",
                f"elements {lo}..{hi} outside host tensor '{t.name}' ({t.size} elements)",
                cycle=cycle,
                **self._ctx(s, i),
            )

    def _clip(self, t: HostTensor, off: int, n: int, s, i, cycle) -> slice:
        """Elements off..off+n-1 of a burst-granular transfer, cut at the tensor's end (the host pads
        the last burst with zeros / drops its padding); starting past the end is an error."""
        if off >= t.size:
            raise SimulationError(
                "range",
                f"element offset {off} is past the end of host tensor '{t.name}' ({t.size} elements)",
                cycle=cycle,
                **self._ctx(s, i),
            )
        return slice(off, min(off + n, t.size))

    def read_padded(self, t: HostTensor, off: int, n: int, s: int, i: int, cycle: int) -> np.ndarray:
        sl = self._clip(t, off, n, s, i, cycle)
        v = self.read(t, sl, s, i, cycle)
        if sl.stop - sl.start < n:
            v = np.concatenate([v, np.zeros(n - (sl.stop - sl.start), dtype=v.dtype)])
        return v

    def read(self, t: HostTensor, idx, s: int, i: int, cycle: int) -> np.ndarray:
        self._span(t, idx, s, i, cycle)
        if t.init is not None and not t.init[idx].all():
            bad = np.flatnonzero(~t.init[idx])[0] + (idx.start if isinstance(idx, slice) else 0)
            if not isinstance(idx, slice):
                bad = int(idx[np.flatnonzero(~t.init[idx])[0]])
            raise SimulationError(
                "uninitialised",
                f"reads element {bad} of host tensor '{t.name}', not written "
                f"by cycle {cycle}{self._later_hint(t.name)}",
                cycle=cycle,
                **self._ctx(s, i),
            )
        for b, arr in t.contrib.items():
            if b != s:
                m = int(arr[idx].max())
                if m >= 0 and self.vc[s, b] < m:
                    raise SimulationError(
                        "race",
                        f"reads host tensor '{t.name}' written by {stream_name(self._sn(b))}"
                        f" instr {m}, with no SIG/WAIT ordering that write before this read",
                        cycle=cycle,
                        **self._ctx(s, i),
                    )
        if not t.frozen:
            r = t.readers.get(s)
            if r is None:
                r = t.readers[s] = np.full(t.size, -1, dtype=np.int32)
            r[idx] = i
        return t.value[idx]

    def write(self, t: HostTensor, idx, values, s: int, i: int, cycle: int, accumulate: bool) -> None:
        self._span(t, idx, s, i, cycle)
        if t.frozen:
            raise SimulationError(
                "symbol",
                f"writes host tensor '{t.name}', a program input / host copy of state (read-only)",
                cycle=cycle,
                **self._ctx(s, i),
            )
        for a, arr in t.readers.items():
            if a != s:
                m = int(arr[idx].max())
                if m >= 0 and self.vc[s, a] < m:
                    raise SimulationError(
                        "race",
                        f"writes host tensor '{t.name}' that {stream_name(self._sn(a))} "
                        f"instr {m} read earlier, with no SIG/WAIT ordering that read before "
                        "this write",
                        cycle=cycle,
                        **self._ctx(s, i),
                    )
        if accumulate:
            if t.staging:  # starts at 0; read only where some RDACC / HMV added into it
                t.init[idx] = True
            elif t.init is not None and not t.init[idx].all():
                raise SimulationError(
                    "uninitialised",
                    f"accumulates into uninitialised elements of host tensor '{t.name}'",
                    cycle=cycle,
                    **self._ctx(s, i),
                )
            t.value[idx] = round_to(t.dtype, t.value[idx].astype(F32) + np.asarray(values, dtype=F32))
        else:
            t.value[idx] = round_to(t.dtype, values)
            if t.init is not None:
                t.init[idx] = True
            for arr in t.contrib.values():
                arr[idx] = -1
        c = t.contrib.get(s)
        if c is None:
            c = t.contrib[s] = np.full(t.size, -1, dtype=np.int32)
        c[idx] = i

    def _sn(self, s: int):
        return "host" if s == self.C else s

    def _later_hint(self, name: str) -> str:
        if self._writers is None:  # (built on the first error only)
            names = set()
            for st in self.ss.channels:
                for x in st:
                    if x.op in ("RD", "RDACC") and 0 <= x.get("dst") < len(self.ss.symbols):
                        names.add(self.ss.symbols[x.get("dst")])
            for x in self.ss.host:
                if x.op in ("HOP", "EPI", "HMV") and 0 <= x.get("op") < len(self.program.ops):
                    o = self.program.ops[x.get("op")]
                    names.update(o.outputs)
                    names.update(n + "#acc" for n in o.outputs if x.op == "HMV")
            self._writers = names
        if name in self._writers:
            return " (an instruction writes it later: missing WAIT?)"
        return " (no instruction of the program writes it)"

    # ---- the replay -------------------------------------------------------------------------
    def run(self) -> None:
        ev = self._events()
        for time, prio, s, i in ev:
            if s == self.C:
                self._host_event(int(time), int(prio), int(i))
            else:
                self._channel_event(int(time), int(prio), int(s), int(i))

    def _events(self) -> np.ndarray:
        parts = []
        deliver = (OPCODES["RD"], OPCODES["RDACC"])
        for s in range(self.C + 1):
            if s == self.C:
                issue, done = self.timed.host.issue, self.timed.host.done
                ops = np.array([OPCODES[x.op] for x in self.ss.host], dtype=np.int64)
                deliv = np.isin(ops, (OPCODES["HOP"], OPCODES["EPI"], OPCODES["HMV"]))
            else:
                st = self.timed.channels[s]
                issue, done = st["issue"], st["done"]
                ops = np.array([OPCODES[x.op] for x in self.ss.channels[s]], dtype=np.int64)
                deliv = np.isin(ops, deliver)
            n = len(ops)
            idx = np.arange(n)
            prio = np.where(ops == OP_SIG, _SIGNAL, _ISSUE)
            parts.append(np.stack([issue, prio, np.full(n, s), idx], axis=1))
            parts.append(
                np.stack(
                    [done[deliv], np.full(deliv.sum(), _DELIVER), np.full(deliv.sum(), s), idx[deliv] + (1 << 40)],
                    axis=1,
                )
            )
        ev = np.concatenate(parts) if parts else np.zeros((0, 4), dtype=np.int64)
        order = np.lexsort((ev[:, 3], ev[:, 2], ev[:, 1], ev[:, 0]))
        return ev[order]

    def _sync(self, s: int, i: int, ins, cycle: int) -> None:
        sid = ins.get("id")
        if ins.op == "SIG":
            v = self.vc[s].copy()
            v[s] = i - 1
            self.sigvc[sid] = v
        else:
            np.maximum(self.vc[s], self.sigvc[sid], out=self.vc[s])

    def _deliver(self, s: int, i: int, cycle: int) -> None:
        t, idx, vals, acc = self.pending.pop((s, i))
        self.write(t, idx, vals, s, i, cycle, acc)

    def _host_event(self, time: int, prio: int, i: int) -> None:
        s = self.C
        if i >= 1 << 40:
            return self._deliver(s, i - (1 << 40), time)
        ins = self.ss.host[i]
        if ins.op in ("SIG", "WAIT"):
            return self._sync(s, i, ins, time)
        if ins.op == "LAUNCH":  # a kernel launch: no data
            return None
        op = self.program.ops[ins.get("op")]
        if ins.op == "HMV":
            return self._hmv(op, ins, s, i, time)
        heads = ins.get("heads")  # ISA 1.4: > 0, only heads head0.. of every batch row
        if heads:
            return self._head_range(op, ins, s, i, time)
        if ins.get("batches"):  # ISA 1.5: > 0, only batch rows batch0..
            return self._batch_range(op, ins, s, i, time)
        if ins.op == "HOP":
            vals = {}
            for k, n in enumerate(op.inputs):
                t = self._operand(op, k, s, i, time)
                vals[n] = self.read(t, slice(0, t.size), s, i, time).reshape(self.program.tensors[n].shape)
            if op.kind in PIM_CAPABLE:  # the host matrix unit: the hardware's dot product (hwmodel.numerics)
                out = round_to(
                    self.program.tensors[op.outputs[0]].dtype,
                    numerics.pim_op(
                        op.kind.value, resolved_attrs(op.name, op.kind, op.attrs), [vals[n] for n in op.inputs], self.E
                    ),
                )
            else:
                out = execute(op, self.program, vals)
        else:
            st = self._named(op.outputs[0] + "#acc", s, i, time)
            out = self._epilogue(op, self.read(st, slice(0, st.size), s, i, time), s, i, time)
        t = self._output_tensor(op.outputs[0])
        self.pending[(s, i)] = (t, slice(0, t.size), np.asarray(out).reshape(-1), False)

    def _output_tensor(self, name: str) -> HostTensor:
        """The host tensor a HOP or EPI writes, made on its first write."""
        t = self.host.get(name)
        if t is None:
            tt = self.program.tensors[name]
            t = self.host[name] = HostTensor(name, tt.shape, tt.dtype.value)
        return t

    def _epilogue(self, op, staged: np.ndarray, s: int, i: int, time: int) -> np.ndarray:
        """EPI's arithmetic on whole rows of the staging `staged`: a gemv's bias added to each
        output row, attention scores scaled by 1/sqrt(head_dim) (fp32; rounded on delivery)."""
        out = staged.astype(F32)
        kind = op.kind.value
        if kind == "gemv" and len(op.inputs) == 3:
            bt = self._operand(op, 2, s, i, time)
            bias = self.read(bt, slice(0, bt.size), s, i, time).astype(F32)
            out = (out.reshape(-1, bias.size) + bias).reshape(-1)
        elif kind == "attn_score":
            out = out * F32(1.0 / math.sqrt(op.attrs["head_dim"]))
        return out

    def _heads_index(self, name: str, op, head0: int, heads: int) -> np.ndarray:
        """Flat indices of heads head0..head0+heads-1 of every batch row of tensor `name`, seen as
        [B, H, X] (H the op's heads: scores and probabilities [B, H, L], context [B, H * hd])."""
        shape = self.program.tensors[name].shape
        b, h = shape[0], op_heads(self.program, op)
        x = math.prod(shape) // (b * h)
        rows = np.arange(b)[:, None] * h + head0 + np.arange(heads)[None, :]
        return (rows.reshape(-1, 1) * x + np.arange(x)[None, :]).reshape(-1)

    def _head_range(self, op, ins, s: int, i: int, time: int) -> None:
        """HOP softmax or EPI of an attention op on a head range (the simulator's timing pass
        checked the range): reads and writes only those heads' elements."""
        head0, heads = ins.get("head0"), ins.get("heads")
        out_name = op.outputs[0]
        idx = self._heads_index(out_name, op, head0, heads)
        if ins.op == "HOP":  # a softmax over [B, H, L]: its rows are independent
            src = op.inputs[0]
            t = self._operand(op, 0, s, i, time)
            b, _h, length = self.program.tensors[src].shape
            x = self.read(t, self._heads_index(src, op, head0, heads), s, i, time).reshape(b, heads, length)
            out = execute(op, self.program, {src: np.ascontiguousarray(x)})
        else:
            st = self._named(out_name + "#acc", s, i, time)
            out = self._epilogue(op, self.read(st, idx, s, i, time), s, i, time)
        t = self._output_tensor(out_name)
        self.pending[(s, i)] = (t, idx, np.asarray(out).reshape(-1), False)

    def _batch_range(self, op, ins, s: int, i: int, time: int) -> None:
        """HOP or EPI on batch rows batch0.. (the timing pass checked the range): reads the rows
        of its activation inputs (weights whole) or of its staging, writes those rows."""
        batch0, batches = ins.get("batch0"), ins.get("batches")
        out_name = op.outputs[0]

        def rows(name: str) -> slice:
            shape = self.program.tensors[name].shape
            x = math.prod(shape[1:])
            return slice(batch0 * x, (batch0 + batches) * x)

        if ins.op == "HOP":  # not a gemv or attention (the timing pass refused those)
            vals = {}
            for k, n in enumerate(op.inputs):
                tt = self.program.tensors[n]
                t = self._operand(op, k, s, i, time)
                if tt.role.value == "activation":
                    vals[n] = self.read(t, rows(n), s, i, time).reshape((batches, *tt.shape[1:]))
                else:
                    vals[n] = self.read(t, slice(0, t.size), s, i, time).reshape(tt.shape)
            out = execute(op, self.program, vals)
        else:
            st = self._named(out_name + "#acc", s, i, time)
            out = self._epilogue(op, self.read(st, rows(out_name), s, i, time), s, i, time)
        t = self._output_tensor(out_name)
        self.pending[(s, i)] = (t, rows(out_name), np.asarray(out).reshape(-1), False)

    def _hmv(self, op, ins, s: int, i: int, time: int) -> None:
        """Rows row0.. of a gemv on the host: fp32 x . W[n] added into the staging `Y#acc` at delivery."""
        shape = self.program.tensors[op.inputs[0]].shape
        b, k = math.prod(shape[:-1]), shape[-1]
        n = self.program.tensors[op.inputs[1]].shape[0]
        row0, rows = ins.get("row0"), ins.get("rows")
        xt = self._operand(op, 0, s, i, time)
        x = self.read(xt, slice(0, xt.size), s, i, time).astype(F32).reshape(b, k)
        wt = self._operand(op, 1, s, i, time)
        w = self.read(wt, slice(row0 * k, (row0 + rows) * k), s, i, time).astype(F32).reshape(rows, k)
        st = self._named(op.outputs[0] + "#acc", s, i, time)
        idx = (np.arange(b)[:, None] * n + row0 + np.arange(rows)[None, :]).reshape(-1)
        self.pending[(s, i)] = (st, idx, numerics.dot(x, w, self.E).reshape(-1), True)

    def _channel_event(self, time: int, prio: int, s: int, i: int) -> None:
        if i >= 1 << 40:
            return self._deliver(s, i - (1 << 40), time)
        ins = self.ss.channels[s][i]
        op = ins.op
        if op in ("SIG", "WAIT"):
            return self._sync(s, i, ins, time)
        E = self.E
        if op == "ACT":
            for b in _bits(ins.get("mask")):
                self.openrow[s, b] = ins.get("row")
        elif op == "PRE":
            for b in _bits(ins.get("mask")):
                self.openrow[s, b] = -1
        elif op == "MAC":
            self._mac(s, i, ins, time)
        elif op == "WRGB":
            g, n = ins.get("gb"), ins.get("count")
            t = self._tensor(ins.get("src"), s, i, time)
            off = ins.get("offset")
            v = self.read_padded(t, off, n * E, s, i, time)
            self.gb[s, g : g + n] = pim_round(self.hw, v).reshape(n, E)
            self.gb_written[s, g : g + n] = True
        elif op == "RD":
            b, col, n = ins.get("bank"), ins.get("col"), ins.get("count")
            data = self._bank_read(s, i, b, col, n, time)
            t = self._tensor(ins.get("dst"), s, i, time)
            off = ins.get("offset")
            sl = self._clip(t, off, n * E, s, i, time)
            self.pending[(s, i)] = (t, sl, data.reshape(-1)[: sl.stop - sl.start].astype(F32), False)
        elif op == "WR":
            self._wr(s, i, ins, time)
        elif op == "RDACC":
            pu = self.hw.pu_of(ins.get("bank"))
            a, n, stride, off = ins.get("acc"), ins.get("count"), ins.get("stride"), ins.get("offset")
            vals = self.acc[s, pu, a : a + n].copy()
            self.acc[s, pu, a : a + n] = 0
            t = self._tensor(ins.get("dst"), s, i, time)
            if stride == 0 and n > 1:  # every accumulator into one element: add their sum
                vals, n = np.cumsum(vals, dtype=F32)[-1:], 1
            idx = off + stride * np.arange(n) if n > 1 else slice(off, off + 1)
            self._span(t, idx, s, i, time)
            self.pending[(s, i)] = (t, idx, vals, True)

    def _bank_read(self, s, i, b, col, n, time) -> np.ndarray:
        data, _ = self.banks.row(s, b, int(self.openrow[s, b]))
        return data[col : col + n]

    def _mac(self, s, i, ins, time) -> None:
        col, n, g, a = ins.get("col"), ins.get("count"), ins.get("gb"), ins.get("acc")
        if not self.gb_written[s, g : g + n].all():
            x = g + int(np.flatnonzero(~self.gb_written[s, g : g + n])[0])
            raise SimulationError(
                "uninitialised",
                f"MAC reads global-buffer burst {x}, which no WRGB wrote",
                cycle=time,
                **self._ctx(s, i),
            )
        banks, pus = self._mask(ins.get("mask"))
        d = self.banks.gather(s, banks, self.openrow[s, banks], col, n)  # [nb, n, E]
        sums = burst_sums(d.astype(F32) * self.gb[s, g : g + n][None])  # exact fp32 products
        self.acc[s, pus, a] = accumulate(self.acc[s, pus, a], sums)

    def _mask(self, mask: int) -> tuple[np.ndarray, np.ndarray]:
        r = self._masks.get(mask)
        if r is None:
            banks = np.array(_bits(mask), dtype=np.int64)
            r = self._masks[mask] = (banks, banks // self.hw.pim.banks_per_pu)
        return r

    def _wr(self, s, i, ins, time) -> None:
        E = self.E
        b, col, n, em, off = ins.get("bank"), ins.get("col"), ins.get("count"), ins.get("emask"), ins.get("offset")
        lanes = np.arange(E) if em == 0xFFFF else np.array([j for j in range(16) if (em >> j) & 1])
        if len(lanes) == 0 or lanes.max() >= E:
            raise SimulationError(
                "range",
                f"emask 0x{em:X} selects no lane or lanes beyond the {E} of a burst",
                cycle=time,
                bank=b,
                **self._ctx(s, i),
            )
        t = self._tensor(ins.get("src"), s, i, time)
        v = pim_round(self.hw, self.read_padded(t, off, n * len(lanes), s, i, time)).reshape(n, len(lanes))
        row = int(self.openrow[s, b])
        data, written = self.banks.row(s, b, row)
        self.banks.stored.add((s, row))
        data[col : col + n][:, lanes] = v
        written[col : col + n] = True


def _bits(mask: int) -> list[int]:
    return [b for b in range(mask.bit_length()) if (mask >> b) & 1]
