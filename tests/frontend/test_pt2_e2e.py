"""The torch.export frontend against PyTorch itself (issue 19 item 2): each fixture (a tiny Hugging
Face decode step exported by tools/make_pt2_fixtures.py, with PyTorch's own outputs beside it) is
imported without torch, compiled with every method, simulated functionally with the archive's
weights and the step's inputs, and compared with what PyTorch computed; at batch 4 also with
every job run as micro-batches."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import ir
from hwmodel import load_hardware
from hwmodel.numerics import within_tolerance
from ir.pt2 import import_pt2
from pimsat.pipeline import SolveOptions, lower_program, verify_program
from pimsat.pt2_run import compile_and_simulate
from solver.problem import Method

FIXTURES = Path(__file__).parent / "fixtures"
NAMES = (
    "tiny-llama-gqa",
    "tiny-qwen2",
    "tiny-gpt2",
    "tiny-opt",
    "tiny-llama-gqa-core",  # core ATen (run_decompositions)
    "tiny-gpt2-core",
    "tiny-llama-gqa-eager",  # eager attention: matmul, softmax, matmul
    "tiny-llama-gqa-static",  # static cache: index_copy_ into a filled cache the archive holds
    "tiny-llama-gqa-b2",  # two sequences per step
    "tiny-llama-gqa-b4",  # four: micro-batches offered (solver/micro_batch.py)
    "tiny-llama-gqa-bf16",  # bfloat16
)


def _fixture(name):
    step = dict(np.load(FIXTURES / f"{name}.npz"))
    # a static cache's position is a graph input, not a shape: given at import
    imp = import_pt2(FIXTURES / f"{name}.pt2", position=int(step["cache_position"][0]) if "static" in name else None)
    torch_out = [step[f"out_{i}"] for i in range(len(imp.outputs))]
    return imp, step, torch_out


def _check(imp, got: list[np.ndarray], want: list[np.ndarray]) -> float:
    """Every output within the dtype's tolerance of PyTorch's, next token equal; the worst |err|."""
    worst = 0.0
    for (name, _), g, w in zip(imp.outputs, got, want):
        dtype = imp.program.tensors[name].dtype.value
        ok, err = within_tolerance(g, w.astype(np.float32), dtype)
        assert ok, f"{name}: max |err| {err} vs PyTorch"
        worst = max(worst, err)
    assert np.array_equal(got[0].argmax(-1), want[0].argmax(-1))
    return worst


@pytest.mark.parametrize("name", NAMES)
def test_reference_equals_pytorch(name):
    imp, step, want = _fixture(name)
    inputs, state = imp.step(step)
    got = imp.torch_outputs(ir.run(imp.program, inputs, state))
    top = float(np.abs(want[0]).max())
    mantissa = {"fp16": 10, "bf16": 7}[imp.program.tensors[imp.outputs[0][0]].dtype.value]
    ulp = 2.0 ** (np.floor(np.log2(top)) - mantissa)  # the dtype's spacing at the largest logit
    assert _check(imp, got, want) <= 3 * ulp  # rounding order: fp16 results of each op vs. torch kernels


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("method", [Method.NAIVE, Method.GREEDY, Method.CPSAT])
def test_compiled_and_simulated_equals_pytorch(name, method):
    imp, step, want = _fixture(name)
    inputs, state = imp.step(step)
    hw = load_hardware("hbm2-pim", ["organization.channels=8"])
    run = compile_and_simulate(
        hw, imp.program, inputs, state, SolveOptions(method=method, time_limit=20, deterministic_time=2.0)
    )
    assert run.verdict.outputs_match and run.verdict.bit_exact
    _check(imp, imp.torch_outputs(run.outputs, banks=run.banks), want)


@pytest.mark.parametrize("share", [1.0, 0.5])
def test_micro_batched_programs_equal_pytorch(share):
    """tiny-llama-gqa-b4 (four sequences): every job that offers micro-batches run as two of them
    (1.0), or a random half of those jobs (0.5), the rest in their first plain mode; list
    scheduled, decoded, simulated with the archive's weights, bit-exact against pimsat's model and
    within tolerance of PyTorch's own outputs, next tokens equal; the host ran batch ranges."""
    import random

    import sim
    from solver.decode import decode
    from solver.heuristics import micro_batch_count, schedule_with_modes

    imp, step, want = _fixture("tiny-llama-gqa-b4")
    inputs, state = imp.step(step)
    hw = load_hardware("hbm2-pim", ["organization.channels=8"])
    problem, lowering = lower_program(hw, imp.program, 2).by_style["overlap"]
    rng, modes, cut = random.Random(3), {}, 0
    for j in problem.jobs:
        mb = [m.name for m in j.modes if micro_batch_count(m)]
        plain = [m.name for m in j.modes if not micro_batch_count(m) and not m.head_outputs]
        modes[j.name] = mb[0] if mb and rng.random() < share else plain[0]
        cut += modes[j.name] in mb
    assert cut >= (20 if share == 1.0 else 5)
    compiled = decode(problem, lowering, schedule_with_modes(problem, modes))
    result = sim.simulate(hw, compiled.streams, program=imp.program, state=state, inputs=inputs, functional=True)
    assert int(result.cycles) == compiled.predicted_cycles
    verdict = verify_program(hw, imp.program, compiled, result, inputs, state)
    assert verdict.outputs_match and verdict.bit_exact
    assert {(i.get("batch0"), i.get("batches")) for i in compiled.streams.host if i.op in ("HOP", "EPI")} >= {
        (0, 2),
        (2, 2),
    }
    _check(imp, imp.torch_outputs(dict(result.outputs), banks=result.resident), want)


def test_the_weights_are_the_archives():
    """Not the seeded generator's: a functional run of the imported program reads the real model."""
    imp, _, _ = _fixture("tiny-gpt2")
    fused = next(n for n in imp.weights if n.endswith("h.0.attn.c_attn.weight.T.rows0-64"))
    from ir.pt2 import read_archive

    stored = read_archive(FIXTURES / "tiny-gpt2.pt2").weights["model.transformer.h.0.attn.c_attn.weight"]
    assert np.array_equal(imp.weights[fused], stored.T[:64])  # Conv1D's [in, out], q columns


def test_rope_written_the_other_way_round(tmp_path):
    """rotate_half(x)*sin + x*cos (the operands of RoPE's add swapped) is the same RoPE."""
    from pt2_edit import edit_json, rewrite

    def swap(doc):
        n = 0
        for node in doc["graph_module"]["graph"]["nodes"]:
            ins = node["inputs"]
            if node["target"].endswith("aten.add.Tensor") and "self_attn" in node["metadata"]["nn_module_stack"]:
                ins[0]["arg"], ins[1]["arg"] = ins[1]["arg"], ins[0]["arg"]
                n += 1
        assert n == 4  # q and k in both layers

    p = rewrite(FIXTURES / "tiny-llama-gqa.pt2", tmp_path / "m.pt2", edit_json("models/model.json", swap))
    imp = import_pt2(p)
    step = dict(np.load(FIXTURES / "tiny-llama-gqa.npz"))
    inputs, state = imp.step(step)
    assert sum(op.kind is ir.OpKind.rope for op in imp.program.ops) == 4
    _check(imp, imp.torch_outputs(ir.run(imp.program, inputs, state)), [step[f"out_{i}"] for i in range(5)])
