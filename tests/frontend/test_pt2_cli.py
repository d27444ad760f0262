"""`pimsat import` and a .pt2 file as an instance: exit 0 with the program, exit 2 with one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from pt2_edit import edit_json, node, rewrite

import ir
from ir.pt2 import import_pt2
from pimsat.cli import main

FIXTURES = Path(__file__).parent / "fixtures"
LLAMA = FIXTURES / "tiny-llama-gqa.pt2"


def cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_import_writes_the_program_and_weights(tmp_path):
    r = cli("import", LLAMA, "--out", tmp_path / "p.json", "--weights", tmp_path / "w.npz")
    assert r.exit_code == 0, r.output
    prog = ir.Program.from_json((tmp_path / "p.json").read_text())
    imp = import_pt2(LLAMA)
    assert prog == imp.program
    import numpy as np

    w = np.load(tmp_path / "w.npz")
    assert sorted(w) == sorted(imp.weights) and all((w[k] == imp.weights[k]).all() for k in w)


def test_import_config_json_meets_the_same_ir(tmp_path):
    cfg = FIXTURES / "tiny-qwen2.config.json"
    r = cli("import", cfg, "--position", 5, "--out", tmp_path / "p.json")
    assert r.exit_code == 0, r.output
    prog = ir.Program.from_json((tmp_path / "p.json").read_text())
    built = ir.build_decode_step(ir.from_hf_config(json.loads(cfg.read_text())), batch=1, context=5)
    assert [op.kind for op in prog.ops] == [op.kind for op in built.ops]


@pytest.mark.parametrize(
    "args,words",
    [
        (["import", LLAMA, "--position", 3], ["past cache holds 5 tokens"]),
        (["import", FIXTURES / "tiny-gpt2.npz"], ["expected a torch.export archive"]),
        (["import", FIXTURES / "tiny-qwen2.config.json"], ["--position is required"]),
    ],
)
def test_import_refusals_exit_2_with_one_line(tmp_path, args, words):
    r = cli(*args, "--out", tmp_path / "p.json")
    assert r.exit_code == 2, r.output
    line = r.output.strip()
    assert "\n" not in line and all(w in line for w in words), line
    assert not (tmp_path / "p.json").exists()


def test_custom_op_archive_exits_2(tmp_path):
    def custom(doc):
        node(doc, "aten.silu.default")["target"] = "torch.ops.mylib.fancy_act.default"

    p = rewrite(LLAMA, tmp_path / "m.pt2", edit_json("models/model.json", custom))
    for args in (["import", p, "--out", tmp_path / "p.json"], ["solve", p, "--method", "naive"]):
        r = cli(*args)
        assert r.exit_code == 2, r.output
        assert "mylib.fancy_act.default" in r.output and "node 'silu'" in r.output


def test_solve_a_pt2_file_directly(tmp_path):
    r = cli("solve", LLAMA, "--hw", "hbm2-pim", "--set", "organization.channels=8", "--method", "greedy", "--json")
    assert r.exit_code == 0, r.output
    rep = json.loads(r.output)
    assert rep["instance"] == "tiny-llama-gqa" and rep["outputs_match"] is True and rep["violations"] == 0


HW = ("--hw", "hbm2-pim", "--set", "organization.channels=8", "--method", "greedy")


def test_solve_with_the_steps_inputs_is_checked_against_pytorch(tmp_path):
    """`solve X.pt2 --inputs STEP.npz`: the functional run takes the archive's weights and the
    step's inputs, and its outputs (written to outputs/) are PyTorch's within tolerance."""
    import numpy as np

    from hwmodel.numerics import within_tolerance

    opt = FIXTURES / "tiny-opt.pt2"
    r = cli("solve", opt, "--inputs", FIXTURES / "tiny-opt.npz", *HW, "--json", "--out", tmp_path / "o")
    assert r.exit_code == 0, r.output
    rep = json.loads(r.output)
    assert rep["pytorch"]["outputs_match"] and rep["pytorch"]["next_token_equal"], rep["pytorch"]
    imp = import_pt2(opt)
    logits = np.load(tmp_path / "o" / "outputs" / f"{imp.outputs[0][0]}.npy")
    want = np.load(FIXTURES / "tiny-opt.npz")["out_0"]
    ok, err = within_tolerance(logits.reshape(want.shape), want.astype(np.float32), "fp16")
    assert ok, err


def test_a_step_that_differs_from_pytorch_exits_2(tmp_path, monkeypatch):
    """The check can fail: PyTorch's logits with the top token moved elsewhere.

    The console is narrowed to 12 columns (narrower than the words of the verdict): the verdict stays one
    line a script can grep."""
    import numpy as np

    from pimsat import cli_base

    monkeypatch.setattr(cli_base.console, "width", 12)

    step = dict(np.load(FIXTURES / "tiny-opt.npz"))
    logits = step["out_0"].copy()
    top = int(logits.reshape(-1).argmax())
    logits.reshape(-1)[top] = logits.min() - 1
    step["out_0"] = logits
    np.savez(tmp_path / "step.npz", **step)
    r = cli("solve", FIXTURES / "tiny-opt.pt2", "--inputs", tmp_path / "step.npz", *HW)
    assert r.exit_code == 2, r.output
    assert "OUTSIDE tolerance" in r.output and "next token DIFFERENT" in r.output
    assert "differs from PyTorch's outputs" in r.output.strip().splitlines()[-1]


@pytest.mark.parametrize(
    "args,words",
    [
        (
            [FIXTURES.parents[2] / "instances/fpga/gemv-64x128-fpga.yaml", "--inputs", FIXTURES / "tiny-opt.npz"],
            ["for a .pt2 program"],
        ),
        ([FIXTURES / "tiny-opt.pt2", "--inputs", "nope.npz"], ["nope.npz: no such file"]),
        ([FIXTURES / "tiny-opt.pt2", "--inputs", FIXTURES / "tiny-opt.npz", "--timing-only"], ["reads no values"]),
    ],
)
def test_bad_inputs_option_exits_2_with_one_line(args, words):
    r = cli("solve", *args)
    assert r.exit_code == 2, r.output
    line = r.output.strip()
    assert "\n" not in line and all(w in line for w in words), line


def test_a_yaml_instance_names_a_pt2_file(tmp_path):
    import shutil

    shutil.copy(LLAMA, tmp_path / "m.pt2")
    (tmp_path / "i.yaml").write_text(
        "name: tiny\nprogram: {kind: pt2, path: m.pt2}\nhardware: {preset: hbm2-pim, set: [organization.channels=8]}\n"
    )
    r = cli("show", tmp_path / "i.yaml")
    assert r.exit_code == 0, r.output
    assert "tiny" in r.output


def test_both_frontends_meet_at_one_ir():
    """The exported Qwen2 step and its config.json give programs of the same ops (the config's adds
    the argmax of the next token), the same weights by shape, the same RoPE and attention."""
    from collections import Counter

    imported = import_pt2(FIXTURES / "tiny-qwen2.pt2").program
    cfg = json.loads((FIXTURES / "tiny-qwen2.config.json").read_text())
    built = ir.build_decode_step(ir.from_hf_config(cfg), batch=1, context=5)
    kinds = Counter(op.kind for op in built.ops)
    kinds[ir.OpKind.argmax] -= 1
    assert +kinds == Counter(op.kind for op in imported.ops)
    assert sorted(t.shape for t in built.weights()) == sorted(t.shape for t in imported.weights())
    attrs = lambda p, k: sorted(
        tuple(sorted((a, v) for a, v in op.attrs.items() if a != "layer")) for op in p.ops if op.kind is k
    )  # noqa: E731
    for k in (ir.OpKind.rope, ir.OpKind.attn_score, ir.OpKind.rmsnorm):
        assert attrs(built, k) == attrs(imported, k)


@pytest.mark.parametrize(
    "name,words",
    [
        (
            "refuse-custom-op",
            ["node 'quick_act'", "pimsat_fixture.quick_act.default", "layers.0.mlp.act_fn (QuickAct)"],
        ),
        ("refuse-dynamic", ["dynamic shapes are not supported", "static shapes"]),
    ],
)
def test_real_exports_pimsat_refuses(tmp_path, name, words):
    """Written by torch itself (tools/make_pt2_fixtures.py): a torch.library custom op in the MLP,
    and a step exported with a dynamic past length."""
    for args in (
        ["import", FIXTURES / f"{name}.pt2", "--out", tmp_path / "p.json"],
        ["show", FIXTURES / f"{name}.pt2"],
    ):
        r = cli(*args)
        assert r.exit_code == 2, r.output
        line = r.output.strip()
        assert "\n" not in line and all(w in line for w in words), line
