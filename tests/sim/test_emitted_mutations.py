"""Mutations of emitted programs (bench/mutations.py): every change of one instruction field, of
an issue stamp, or the deletion of an instruction is detected by the checks `pimsat simulate`
makes (a refused rule, other cycles than compiled, the tolerance, the bit-true model), or shown
harmless (same command log, tensors and cycles) or a legal variant (same commands, data and
cycles at other legal issue cycles, or one pulled-in REF fewer). None goes unnoticed.

Full analysis of two fpga programs here; a sample of every (opcode, mutation) class of tiny GPT-2
(the full runs of the fpga tier and GPT-2 are `python bench/mutations.py INSTANCE...`)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
from mutations import DETECTED, UNDETECTED, analyse, compile_instance  # noqa: E402


@pytest.mark.parametrize(
    "name, per_class",
    [
        ("fpga/gemv-64x128-fpga", 0),
        ("fpga/attention-h2-d16-c31-fpga", 0),
        ("small/tiny-gpt2-2l-hbm2-8ch", 3),
    ],
)
def test_no_mutation_goes_unnoticed(name, per_class):
    c = compile_instance(ROOT / "instances" / f"{name}.yaml")
    counts, undetected = analyse(c, per_class=per_class, seed=1)
    assert undetected == []
    classes = {cls for cls, _ in counts}
    # every data-moving instruction's deletion is among the classes, and always detected
    for op in ("WRGB", "RDACC", "MAC", "ACT") + {"gemv": (), "attention": ("WR",)}.get(
        name.split("/")[1].split("-")[0], ("RD", "WR")
    ):
        assert f"{op}.deleted" in classes, op
        assert counts[(f"{op}.deleted", DETECTED)] > 0 and counts[(f"{op}.deleted", UNDETECTED)] == 0
        deleted = sum(v for (cls, _v), v in counts.items() if cls == f"{op}.deleted")
        assert counts[(f"{op}.deleted", DETECTED)] == deleted, op
