"""Instance.values: what a functional run of an instance computes with. For a .pt2 the archive's
own weights, and with `program.inputs` the step's inputs, so that a run reproduces PyTorch's step."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

import ir
from hwmodel.numerics import within_tolerance
from pimsat.instance import InstanceError, load_instance

FIXTURES = Path(__file__).parent / "fixtures"


def _instance(tmp_path, extra: str = ""):
    shutil.copy(FIXTURES / "tiny-qwen2.pt2", tmp_path / "m.pt2")
    shutil.copy(FIXTURES / "tiny-qwen2.npz", tmp_path / "step.npz")
    (tmp_path / "i.yaml").write_text(f"name: q\nprogram: {{kind: pt2, path: m.pt2{extra}}}\n")
    return load_instance(tmp_path / "i.yaml")


def test_with_the_steps_inputs_the_reference_is_pytorchs(tmp_path):
    inst = _instance(tmp_path, ", inputs: step.npz")
    program = inst.build_program()
    inputs, state = inst.values(program)
    got = inst.imported().torch_outputs(ir.run(program, inputs, state))
    want = np.load(FIXTURES / "tiny-qwen2.npz")
    for i, g in enumerate(got):
        ok, err = within_tolerance(g, want[f"out_{i}"].astype(np.float32), "fp16")
        assert ok, (i, err)


def test_without_inputs_the_weights_are_still_the_archives(tmp_path):
    inst = _instance(tmp_path)
    program = inst.build_program()
    inputs, state = inst.values(program)
    imp = inst.imported()
    assert all(state[k] is v for k, v in imp.weights.items())
    seeded = ir.generate_state(program, seed=inst.seed)
    assert all(np.array_equal(state[c.name], seeded[c.name]) for c in program.kv_caches())
    assert inputs.keys() == ir.generate_inputs(program, seed=inst.seed).keys()


def test_other_kinds_take_the_seeded_generators():
    inst = load_instance(Path(__file__).resolve().parents[2] / "instances" / "small" / "tiny-llama-2l-hbm2-8ch.yaml")
    program = inst.build_program()
    inputs, state = inst.values(program)
    seeded = ir.generate_state(program, seed=inst.seed)
    assert state.keys() == seeded.keys() and all(np.array_equal(state[k], seeded[k]) for k in state)


def test_a_bad_inputs_file(tmp_path):
    inst = _instance(tmp_path, ", inputs: nosuch.npz")
    with pytest.raises(InstanceError, match="nosuch.npz"):
        inst.values(inst.build_program())
