"""Constrained-random what-ifs (bench/whatif_fuzz.py): a case is its seed alone, and the checks
catch a hardware bound above a program (the case the fuzz found: the host's share of a gemv
priced with a second launch)."""

from __future__ import annotations

import sys
from pathlib import Path

from pimsat.instance import Instance

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
from whatif_fuzz import check, draw, main  # noqa: E402


def test_a_case_is_its_seed():
    assert draw(17, "small") == draw(17, "small")
    assert draw(17, "large") == draw(17, "large")
    assert {draw(s, "small")[1] for s in range(12)} == {"hbm2-pim", "gddr6-aim", "hbm3-pim", "fpga-proto"}


def test_an_llm_case_is_one_layer_of_a_real_model_on_an_llm_preset():
    assert draw(5, "llm") == draw(5, "llm")
    cases = [draw(s, "llm") for s in range(40)]
    assert {preset for _p, preset, _s in cases} == {"hbm2-pim", "gddr6-aim", "hbm3-pim"}
    for program, _preset, sets in cases:
        assert program["kind"] == "model" and program["layers"] == 1 and not program["lm_head"]
        assert program["preset"] in {"llama-2-7b", "llama-3-8b", "mistral-7b", "opt-6.7b", "gpt2"}
        assert 1 <= program["context"] <= (1023 if program["preset"] == "gpt2" else 2048) and sets[0].startswith(
            "organization.channels="
        )


def test_the_checks_pass_on_a_host_split_and_a_run_of_cases(capsys):
    inst = Instance(
        name="host-split",
        program={"kind": "gemv", "n": 100, "k": 128, "batch": 2, "bias": True},
        hardware={"preset": "fpga-proto", "set": ["host.dispatch_cycles=900"]},
    )
    cycles, failed, _notes = check(inst, time_limit=5.0)
    assert failed == [] and cycles["cpsat"] <= cycles["greedy"] <= cycles["naive"], (cycles, failed)
    assert main(["--seed", "3", "--count", "3", "--time-limit", "5"]) == 0
    assert "3 cases (small, seeds 3..5)" in capsys.readouterr().out


def test_the_standard_check_refuses_what_a_loosened_table_lets_through():
    """Our table's ACT -> REF row cut to 1 cycle (an override): the simulator then accepts REF
    blocks that come before the row cycle time is out, and the fuzz's check against the
    standard's rule list (sim.stdcheck, which never reads our table) still refuses them. This is
    the program of large case 90, which found the row missing."""
    from hwmodel import load_hardware

    rows = load_hardware("gddr6-aim").timing.constraints
    i = next(k for k, c in enumerate(rows) if (c.prev, c.next, c.scope) == ("ACT", "REF", "rank"))
    inst = Instance(
        name="loosened",
        program={"kind": "gemv", "n": 256, "k": 1024, "batch": 8, "bias": False},
        hardware={
            "preset": "gddr6-aim",
            "set": [
                "organization.channels=1",
                "pim.global_buffer_bytes=4096",
                "host.link_bytes_per_cycle=2",
                f"timing.constraints[{i}].latency=1",
            ],
        },
    )
    _cycles, failed, _notes = check(inst, time_limit=5.0)
    assert any(f.startswith("standard: greedy") and "nRC" in f for f in failed), failed
    assert not any(f.startswith("sim:") for f in failed), failed
