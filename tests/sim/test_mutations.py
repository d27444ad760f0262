"""Mutation testing: single mutations of valid, stamped programs must be rejected (SimulationError)
or change the outputs. Classes:

  stamp-1     a stamped instruction's cycle moved one earlier (its stamp was its earliest legal cycle)
  bank        one bank of an ACT/PRE/MAC mask moved to another bank; RD/WR bank changed; RDACC bank
              moved to another PIM unit (another bank of the same unit is the same instruction)
  row         an ACT's row changed
  drop-PRE    a PRE removed
  drop-SIG    a SIG removed
  drop-WAIT   a WAIT removed (the stamps keep the old cycles: caught by the SIG/WAIT ordering rule)

The detection rate of every class is printed and must be 100 %.
"""

from __future__ import annotations

import random
from collections import defaultdict

import numpy as np
import pytest
from simgen import LOCKSTEP, compile_attention, compile_gemv, norm_gemv_program

from hwmodel import load_hardware
from hwmodel.isa import Instruction
from ir import attention_program, gemv_program, generate_inputs, generate_state
from sim import SimulationError, simulate

MAX_PER_CLASS = 80


def _norm_gemv_program(dtype):
    return norm_gemv_program(dtype, rows=20)


def _programs():
    out = []
    fpga = load_hardware("fpga-proto")
    p = gemv_program(20, 128, batch=2, bias=True, dtype="fp16")
    out.append(pytest.param(fpga, p, compile_gemv(fpga, p, channels=2, ref_every=6), id="gemv-fpga"))
    hbm2 = load_hardware("hbm2-pim", ["organization.channels=2", LOCKSTEP])
    p = _norm_gemv_program("fp16")
    ss = compile_gemv(hbm2, p, channels=2, host_first=[0])
    ss.symbols.append("norm.weight")
    out.append(pytest.param(hbm2, p, ss, id="norm-gemv-hbm2"))
    hbm1 = load_hardware("hbm2-pim", ["organization.channels=1"])
    p = attention_program(2, 1, 16, 15, dtype="fp16")
    out.append(pytest.param(hbm1, p, compile_attention(hbm1, p), id="attention-hbm2"))
    return out


def _mutants(hw, ss, rng):
    """(class, description, mutated StreamSet) for one stamped program."""
    org = hw.organization
    nb, bpp = org.banks_per_channel, hw.pim.banks_per_pu
    streams = [("c", c, s) for c, s in enumerate(ss.channels)] + [("h", None, ss.host)]
    by_class = defaultdict(list)

    def replaced(kind, c, i, new):
        chans = [list(s) for s in ss.channels]
        host = list(ss.host)
        target = host if kind == "h" else chans[c]
        if new is None:
            del target[i]
        else:
            target[i] = new
        return type(ss)(ss.hardware, ss.isa_version, list(ss.symbols), chans, host, list(ss.placements))

    for kind, c, s in streams:
        for i, ins in enumerate(s):
            where = f"{'host' if kind == 'h' else f'ch{c}'}[{i}] {ins.op}"
            if ins.cycle is not None and ins.cycle > 0:
                by_class["stamp-1"].append((where, replaced(kind, c, i, ins.at(ins.cycle - 1))))
            f = ins.fields()
            if "mask" in f:
                bits = [b for b in range(nb) if f["mask"] >> b & 1]
                free = [b for b in range(nb) if not f["mask"] >> b & 1]
                if free:
                    b, b2 = rng.choice(bits), rng.choice(free)
                    new = dict(f, mask=f["mask"] & ~(1 << b) | (1 << b2))
                    by_class["bank"].append(
                        (where, replaced(kind, c, i, Instruction(ins.op, tuple(new.values()), ins.cycle)))
                    )
            if "bank" in f:
                if ins.op == "RDACC":
                    choices = [b for b in range(nb) if b // bpp != f["bank"] // bpp]
                else:
                    choices = [b for b in range(nb) if b != f["bank"]]
                new = dict(f, bank=rng.choice(choices))
                by_class["bank"].append(
                    (where, replaced(kind, c, i, Instruction(ins.op, tuple(new.values()), ins.cycle)))
                )
            if ins.op == "ACT":
                new = dict(f, row=(f["row"] + rng.randrange(1, org.rows)) % org.rows)
                by_class["row"].append(
                    (where, replaced(kind, c, i, Instruction(ins.op, tuple(new.values()), ins.cycle)))
                )
            if ins.op in ("PRE", "SIG", "WAIT"):
                by_class[f"drop-{ins.op}"].append((where, replaced(kind, c, i, None)))
    for k, v in by_class.items():
        if len(v) > MAX_PER_CLASS:
            by_class[k] = rng.sample(v, MAX_PER_CLASS)
    return by_class


def _same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k], equal_nan=True) for k in a)


@pytest.mark.parametrize("hw, prog, ss", _programs())
def test_mutations_are_detected(hw, prog, ss, capsys, request):
    name = request.node.callspec.id
    rng = random.Random(1234)
    state, inputs = generate_state(prog, 5), generate_inputs(prog, 5)
    base = simulate(hw, ss, prog, state, inputs)
    stamped = base.stamped(ss)
    ref = simulate(hw, stamped, prog, state, inputs)
    assert _same(ref.outputs, base.outputs) and ref.cycles == base.cycles
    rates = {}
    missed = []
    for cls, cases in sorted(_mutants(hw, stamped, rng).items()):
        caught = 0
        for where, mut in cases:
            try:
                r = simulate(hw, mut, prog, state, inputs, record=False)
            except SimulationError:
                caught += 1
                continue
            if not _same(r.outputs, ref.outputs):
                caught += 1
            else:
                missed.append(f"{cls}: {where}")
        rates[cls] = (caught, len(cases))
    with capsys.disabled():
        print(
            f"\n[{name}] mutation detection: "
            + ", ".join(f"{k} {c}/{n} ({100 * c / n:.0f} %)" for k, (c, n) in rates.items())
        )
    assert {"stamp-1", "bank", "row", "drop-PRE", "drop-SIG", "drop-WAIT"} <= set(rates)
    assert not missed, missed
