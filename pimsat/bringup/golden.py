"""Golden results of one compiled program: what each channel's stream does to the data, replayed
instruction by instruction from the bundle's own images, and reconciled with the simulator.

A channel sees host memory only through WR and WRGB (sources) and RD and RDACC (read-outs). In a
pimsat program every tensor a channel reads is written once before it is read (the simulator
checks that the streams' SIG/WAIT order every such pair), so the host image holds each source
tensor's final value, as the simulator's host memory ends up with it. The replay then needs no
host: per channel, in stream order (= issue order), it applies ACT / PRE (open rows), WRGB, MAC
(hwmodel.numerics: exact fp32 products, the burst adder tree, fp32 accumulation), WR, and
records every RD burst and every RDACC accumulator read out (the accumulators cleared).

Reconciliation (`reconcile`), so that the golden files are the simulator's results, not a second
opinion: the final banks, read back through the placements, equal the simulator's resident
tensors bit for bit; the RDACC read-outs, added into the staging tensors in the simulator's
delivery order, give its `X#acc` values bit for bit; the RD read-outs give its `X#host` copies.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from hwmodel.model import Hardware
from hwmodel.numerics import accumulate, burst_sums
from hwmodel.streams import StreamSet
from ir.types import round_to
from sim.memory import BankMemory

F32 = np.float32


class GoldenMismatch(RuntimeError):
    """The replayed golden results disagree with the simulator: a pimsat bug, never the user's."""


@dataclass
class ChannelGolden:
    rdacc: list[np.ndarray] = field(default_factory=list)  # per RDACC instruction: fp32 [count]
    rdacc_at: list[int] = field(default_factory=list)  # its instruction index
    rd: list[np.ndarray] = field(default_factory=list)  # per RD instruction: [count, E] PIM dtype
    rd_at: list[int] = field(default_factory=list)

    def rdacc_values(self) -> np.ndarray:
        return np.concatenate(self.rdacc).astype(F32) if self.rdacc else np.zeros(0, F32)

    def rd_bursts(self, e: int) -> np.ndarray:
        return np.concatenate(self.rd) if self.rd else np.zeros((0, e), np.float16)


def source_symbols(ss: StreamSet) -> list[int]:
    """Symbols a channel reads (WR / WRGB sources), in symbol order."""
    used = {i.get("src") for s in ss.channels for i in s if i.op in ("WR", "WRGB")}
    return sorted(used)


def initial_banks(hw: Hardware, program, ss: StreamSet, state) -> BankMemory:
    """The memory image: every placement laid out as the simulator loads it (a kv cache's rows
    this step appends are zero: only its WRs fill them)."""
    banks = BankMemory(hw)
    appended = {
        program.storage(op.inputs[0]): op.attrs["position"] for op in program.ops if op.kind.value == "kv_append"
    }
    flat: dict[str, np.ndarray] = {}
    for p in ss.placements:
        if p.tensor not in flat:
            image = np.array(state[p.tensor], dtype=np.float32, copy=True)
            if p.tensor in appended:
                image[:, :, appended[p.tensor] :, :] = 0
            flat[p.tensor] = round_to(hw.pim.dtype, image.reshape(-1))
        banks.load(p, flat[p.tensor])
    return banks


def bank_array(hw: Hardware, banks: BankMemory, ch: int, bank: int) -> np.ndarray:
    """[rows * columns, E] float16: one bank's contents, line = row * columns + col."""
    org = hw.organization
    return np.concatenate([banks.row(ch, bank, r)[0] for r in range(org.rows)]).astype(np.float16)


def replay(hw: Hardware, ss: StreamSet, banks: BankMemory, host: dict[int, np.ndarray]) -> list[ChannelGolden]:
    """Run every channel's data effects on `banks` (changed in place); host: symbol -> its flat
    values in the PIM dtype (float16)."""
    e, bpp = hw.elements_per_burst, hw.pim.banks_per_pu
    out = []
    for ch, stream in enumerate(ss.channels):
        g = ChannelGolden()
        openrow = [-1] * hw.organization.banks_per_channel
        gb = np.zeros((hw.gb_bursts, e), dtype=F32)
        acc = np.zeros((hw.pus_per_channel, hw.pim.acc_registers), dtype=F32)
        for k, ins in enumerate(stream):
            f = ins.fields()
            if ins.op in ("ACT", "PRE"):
                for b in _bits(f["mask"]):
                    openrow[b] = f["row"] if ins.op == "ACT" else -1
            elif ins.op == "WRGB":
                n = f["count"]
                gb[f["gb"] : f["gb"] + n] = _padded(host[f["src"]], f["offset"], n * e).reshape(n, e)
            elif ins.op == "MAC":
                n, c0, g0 = f["count"], f["col"], f["gb"]
                for b in _bits(f["mask"]):
                    data = banks.row(ch, b, openrow[b])[0][c0 : c0 + n].astype(F32)
                    sums = burst_sums(data * gb[g0 : g0 + n])
                    acc[b // bpp, f["acc"]] = accumulate(acc[b // bpp, f["acc"]], sums)
            elif ins.op == "RDACC":
                pu, a, n = f["bank"] // bpp, f["acc"], f["count"]
                g.rdacc.append(acc[pu, a : a + n].copy())
                g.rdacc_at.append(k)
                acc[pu, a : a + n] = 0
            elif ins.op == "RD":
                b, c0, n = f["bank"], f["col"], f["count"]
                g.rd.append(banks.row(ch, b, openrow[b])[0][c0 : c0 + n].astype(np.float16).copy())
                g.rd_at.append(k)
            elif ins.op == "WR":
                b, c0, n, em = f["bank"], f["col"], f["count"], f["emask"]
                lanes = [j for j in range(e) if (em >> j) & 1]
                v = _padded(host[f["src"]], f["offset"], n * len(lanes)).reshape(n, len(lanes))
                data = banks.row(ch, b, openrow[b])[0]
                data[c0 : c0 + n][:, lanes] = v
            # REF, SIG, WAIT: no data effect
        out.append(g)
    return out


def _padded(flat: np.ndarray, off: int, n: int) -> np.ndarray:
    v = np.zeros(n, dtype=np.float16)
    take = flat[off : off + n]
    v[: len(take)] = take
    return v


def _bits(mask: int) -> list[int]:
    return [b for b in range(mask.bit_length()) if (mask >> b) & 1]


def reconcile(hw: Hardware, program, ss: StreamSet, banks: BankMemory, golden: list[ChannelGolden], res) -> None:
    """Raise GoldenMismatch unless the replay agrees with the simulator's run `res` (see above)."""
    for name, held in res.resident.items():
        mine = banks.read_back(ss.placements, name, int(np.prod(np.shape(held)))).reshape(np.shape(held))
        _same(f"final bank contents of '{name}'", mine, held)
    staged: dict[str, np.ndarray] = {}
    touched: dict[str, np.ndarray] = {}
    hmv = {program.ops[i.get("op")].outputs[0] + "#acc" for i in ss.host if i.op == "HMV"}
    events = []
    for ch, g in enumerate(golden):
        done = res.times(ch).done
        events += [(int(done[k]), ch, k, "RDACC", v) for k, v in zip(g.rdacc_at, g.rdacc)]
        events += [(int(done[k]), ch, k, "RD", v) for k, v in zip(g.rd_at, g.rd)]
    for _t, ch, k, kind, vals in sorted(events, key=lambda x: x[:3]):
        f = ss.channels[ch][k].fields()
        name = ss.symbols[f["dst"]]
        if name in hmv:
            continue  # the host's HMV adds into it too: not a channel's result alone
        want = res.host[name].reshape(-1)
        cur = staged.setdefault(name, np.zeros(want.size, dtype=want.dtype))
        hit = touched.setdefault(name, np.zeros(want.size, dtype=bool))
        if kind == "RDACC":
            n, stride, off = f["count"], f["stride"], f["offset"]
            if stride == 0 and n > 1:
                vals, n = np.cumsum(vals, dtype=F32)[-1:], 1
            idx = off + stride * np.arange(n)
            cur[idx] = round_to(_dtype(want), cur[idx].astype(F32) + vals)
        else:
            flat = vals.reshape(-1)
            idx = np.arange(f["offset"], min(f["offset"] + flat.size, want.size))
            cur[idx] = round_to(_dtype(want), flat[: idx.size].astype(F32))
        hit[idx] = True
    for name, cur in staged.items():
        want = res.host[name].reshape(-1)
        _same(f"host tensor '{name}' from the read-outs", cur[touched[name]], want[touched[name]])


def _dtype(a: np.ndarray) -> str:
    return "fp16" if a.dtype == np.float16 else "fp32"


def _same(what: str, got: np.ndarray, want: np.ndarray) -> None:
    g, w = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    bad = ~((g == w) | (np.isnan(g) & np.isnan(w)))
    if g.shape != w.shape or bad.any():
        raise GoldenMismatch(
            f"golden replay disagrees with the simulator on the {what}: "
            f"{int(bad.sum()) if g.shape == w.shape else 'shape'} elements differ"
        )
