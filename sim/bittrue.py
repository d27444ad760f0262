"""The bit-true model: what the hardware must compute for a program, op by op, with no
instruction stream, no timing and no memory layout.

It evaluates the program in topological order like `ir.reference.run`, but with the hardware's
arithmetic where it differs from the float reference:

- a gemv, attn_score or attn_context takes its dot products from `hwmodel.numerics` (fp32
  products, the burst adder tree, fp32 accumulation in burst order; a gemv whose weights the
  program placed split along k, the halves' sums added in fp32), then its epilogue in fp32
  (+ bias, * 1/sqrt(head_dim)) and one rounding to the output dtype;
- its operands are the values the hardware holds: run in PIM (the default), the vector is
  rounded to the PIM dtype (WRGB) and so is the resident matrix or kv cache (the memory image and
  WR); run by the host (HOP, or HMV rows of a split gemv), the matrix is the host copy that RD
  made of the banks (PIM dtype, then the host tensor's dtype) and the vector is as the host
  holds it;
- every other op is the host's, `ir.reference.execute`.

The simulator's functional outputs must equal this model exactly (`compare`): every data
movement of the program (which burst meets which global-buffer word, which accumulator goes to
which staging element) is checked to the last bit, which the tolerance check cannot do.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from hwmodel import numerics
from hwmodel.model import Hardware
from ir.ops import PIM_CAPABLE, RESIDENT_OPERAND, OpKind, resolved_attrs
from ir.program import Program
from ir.reference import execute
from ir.types import as_stored, round_to


@dataclass(frozen=True)
class Dispatch:
    """Where each PIM-capable op runs: op name -> rows the host computes ((row0, rows) ranges;
    absent: all in PIM; None: the whole op on the host); and the gemvs split along k over
    channels: op name -> the elements where a range of k on other channels starts (its partial
    sums meet in the staging, `numerics.gemv`)."""

    host: Mapping[str, tuple[tuple[int, int], ...] | None]
    k_cuts: Mapping[str, tuple[int, ...]] = field(default_factory=dict)

    @staticmethod
    def from_streams(program: Program, streams) -> Dispatch:
        """`from_host_stream`, and the k cuts from where the program placed each gemv's weights:
        the first k each channel holds of the matrix (0 on every channel of a row tiling)."""
        host = Dispatch.from_host_stream(program, streams.host).host
        return Dispatch(host, k_cuts(program, streams.placements))

    @staticmethod
    def from_host_stream(program: Program, host) -> Dispatch:
        """HOP op=k: op k runs on the host; HMV op=k row0 rows: those rows of op k do."""
        out: dict[str, list[tuple[int, int]] | None] = {}
        for ins in host:
            if ins.op == "HOP":
                k = ins.get("op")
                if 0 <= k < len(program.ops) and program.ops[k].kind in PIM_CAPABLE:
                    out[program.ops[k].name] = None
            elif ins.op == "HMV":
                k = ins.get("op")
                if 0 <= k < len(program.ops):
                    rows = out.setdefault(program.ops[k].name, [])
                    if rows is not None:
                        rows.append((ins.get("row0"), ins.get("rows")))
        return Dispatch({k: None if v is None else tuple(v) for k, v in out.items()})


def k_cuts(program: Program, placements) -> dict[str, tuple[int, ...]]:
    """Per gemv op whose weights some channel holds from a k other than 0: those first k's."""
    of = {}
    for op in program.ops:
        if op.kind is OpKind.gemv:
            of.setdefault(program.storage(op.inputs[1]), []).append(op.name)
    row = {t: program.tensors[t].shape[-1] for t in of}  # (elements per matrix row)
    first: dict[str, dict[int, int]] = {t: {} for t in of}
    for p in placements:
        n = row.get(p.tensor)
        if n is not None:
            held, k = first[p.tensor], p.elem_start % n
            if k < held.get(p.channel, n):
                held[p.channel] = k
    out = {}
    for tensor, held in first.items():
        cuts = tuple(sorted(set(held.values()) - {0}))
        if cuts:
            for name in of[tensor]:
                out[name] = cuts
    return out


def run(
    hw: Hardware,
    program: Program,
    inputs: Mapping[str, np.ndarray],
    state: Mapping[str, np.ndarray],
    dispatch: Dispatch | None = None,
) -> dict[str, np.ndarray]:
    """The value of every tensor as the hardware computes it."""
    dispatch = dispatch or Dispatch({})
    pim = hw.pim.dtype
    e = hw.elements_per_burst
    values: dict[str, np.ndarray] = {}
    for n in program.inputs:  # read only: the caller's arrays where they are in storage form
        values[n] = as_stored(program.tensors[n].dtype, inputs[n])
    for n, v in state.items():
        if n in program.tensors:
            values[n] = as_stored(program.tensors[n].dtype, v)
    for op in program.topo_order():
        if op.kind not in PIM_CAPABLE:
            values[op.outputs[0]] = execute(op, program, values)
            continue
        out_dtype = program.tensors[op.outputs[0]].dtype
        attrs = resolved_attrs(op.name, op.kind, op.attrs)
        where = dispatch.host.get(op.name, ())
        r = RESIDENT_OPERAND[op.kind]
        operands = [np.asarray(values[n]) for n in op.inputs]

        def on(device: str) -> np.ndarray:
            ops = list(operands)
            if device == "pim":
                ops[0] = round_to(pim, ops[0])
                ops[r] = round_to(pim, ops[r])
            else:  # the host copy that RD made of the banks
                ops[r] = round_to(program.tensors[op.inputs[r]].dtype, round_to(pim, ops[r]))
            cuts = dispatch.k_cuts.get(op.name, ()) if device == "pim" else ()
            return round_to(out_dtype, numerics.pim_op(op.kind.value, attrs, ops, e, cuts))

        if where is None:
            y = on("host")
        else:
            y = on("pim")
            if where and op.kind is OpKind.gemv:
                h = on("host")
                for row0, rows in where:
                    y[..., row0 : row0 + rows] = h[..., row0 : row0 + rows]
        values[op.outputs[0]] = y
    return values


@dataclass(frozen=True)
class BitCheck:
    """Simulated tensors against the bit-true model."""

    exact: bool
    mismatches: dict[str, int]  # tensor -> elements that differ (program order)
    first: str | None  # the first differing tensor and element, in words

    def summary(self) -> str:
        if self.exact:
            return "bit-exact"
        return f"{sum(self.mismatches.values()):,} elements differ from the bit-true model; first: {self.first}"


def bank_image(
    hw: Hardware, program: Program, model: Mapping[str, np.ndarray], changed=lambda name: True
) -> dict[str, np.ndarray]:
    """What the banks must hold at the end, per resident root tensor, in the PIM dtype: the
    weights as loaded; a kv cache as this step leaves it (positions 0..position; NaN beyond,
    which is not compared). Only the kv caches this step appends to and the tensors for which
    `changed(name)` says the banks may differ from what was loaded (a WR wrote into their rows)."""
    final: dict[str, tuple[str, int]] = {}
    for op in program.ops:
        if op.kind is OpKind.kv_append:
            final[program.storage(op.inputs[0])] = (op.outputs[0], op.attrs["position"])
    out = {}
    for t in program.tensors.values():
        if not t.resident or t.name not in model or program.storage(t.name) != t.name:
            continue
        if t.name not in final and not changed(t.name):
            continue
        if t.name in final:
            version, pos = final[t.name]
            v = round_to(hw.pim.dtype, np.asarray(model[version])).astype(np.float32)
            v[:, :, pos + 1 :, :] = np.nan
        else:
            v = round_to(hw.pim.dtype, np.asarray(model[t.name])).astype(np.float32)
        out[t.name] = v
    return out


def compare(
    program: Program,
    simulated: Mapping[str, np.ndarray],
    model: Mapping[str, np.ndarray],
    names: list[str] | None = None,
    banks: tuple[Mapping, Mapping] | None = None,
) -> BitCheck:
    """Exact comparison (values; -0 equals +0, NaN equals NaN) of the tensors `names` (default:
    every tensor the simulation holds that the model has, in program order); with `banks`
    (the simulated banks' resident tensors, `bank_image`), also the final bank contents of
    every resident tensor the program placed (where the image is not NaN)."""
    order = names if names is not None else [n for n in program.tensors if n in simulated and n in model]
    pairs = [(n, simulated[n], model[n]) for n in order]
    if banks is not None:
        held, image = banks
        pairs += [(f"banks:{n}", np.where(np.isnan(image[n]), np.nan, held[n]), image[n]) for n in held if n in image]
    mism: dict[str, int] = {}
    first = None
    for n, got, want in pairs:
        got = np.asarray(got)
        want = np.asarray(want)
        if got.shape != want.shape:
            mism[n] = max(got.size, want.size)
            first = first or f"{n}: shape {got.shape}, model {want.shape}"
            continue
        count, at = _differ(got, want)
        if count:
            mism[n] = count
            if first is None:
                idx = np.unravel_index(at, got.shape)
                first = f"{n}{list(map(int, idx))} = {got[idx]!r}, model {want[idx]!r}"
    return BitCheck(not mism, mism, first)


_CHUNK = 1 << 20


def _differ(got: np.ndarray, want: np.ndarray) -> tuple[int, int]:
    """(elements that differ, flat index of the first) of two arrays of one shape, compared as
    values (-0 equals +0, NaN equals NaN), chunk by chunk in their own dtypes: a 2 GB embedding
    table costs no float64 copies. The same memory (a frozen host tensor is the state itself)
    is equal without a pass."""
    if got.dtype == want.dtype and got.strides == want.strides and got.ctypes.data == want.ctypes.data:
        return 0, -1
    g, w = got.reshape(-1), want.reshape(-1)
    count, at = 0, -1
    for s in range(0, g.size, _CHUNK):
        a, b = g[s : s + _CHUNK], w[s : s + _CHUNK]
        bad = a != b
        if a.dtype.kind == "f" or b.dtype.kind == "f":
            bad &= ~(np.isnan(a) & np.isnan(b))
        k = int(np.count_nonzero(bad))
        if k and at < 0:
            at = s + int(np.flatnonzero(bad)[0])
        count += k
    return count, at
