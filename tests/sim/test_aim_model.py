"""The gddr6-aim preset against the public AiM simulator (hwmodel/standards/aim_model.yaml:
arkhadem/aim_simulator GDDR6.cpp, the model the CENT artifact runs), independently of our table.

1. The model's rules fire: each at its gap with the model's own values, legal at the boundary and
   refused one cycle earlier (AiM-specific rows: MAC16's row delay, WR_GB and RD_MAC latencies).
2. Every timing value of the preset is the model's (GDDR6_AiM_timing), except the listed deviations.
3. Programs pimsat emits for gddr6-aim break no rule of the model with the model's own values.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hwmodel.loader import load_hardware
from sim.stdcheck import CheckOptions, check_log, load_standard, standard_for

from .test_stdcheck import log, pair, rules

ROOT = Path(__file__).resolve().parents[2]
ALL16 = 0xFFFF
MODEL = CheckOptions(values="standard")


@pytest.fixture(scope="module")
def aim():
    return load_hardware("gddr6-aim")


def test_the_aim_model_is_the_standard_of_gddr6_aim(aim):
    assert standard_for(aim) == "aim_model"
    assert "c2f8ab6c" in load_standard("aim_model")["source"]


# (id, rows builder(gap), the model's gap, rules broken one cycle earlier)
CASES = [
    (
        "nRCDRDMAC all-bank",
        lambda g: pair("ACT", "MAC", g, None, None, ALL16, ALL16),
        56,
        {"nRCDRDMAC", "ACT->MAC16 nRCDRDMAC", "ACT16->MAC nRCDRDMAC"},
    ),
    ("nRCDRD host read", lambda g: pair("ACT", "RD", g, 3, 3), 36, {"nRCDRD"}),
    ("nRCDWR", lambda g: pair("ACT", "WR", g, 3, 3), 28, {"nRCDWR"}),
    (
        "MAC16 every nCCDL",
        lambda g: pair("MAC", "MAC", g, None, None, ALL16, ALL16),
        2,
        {"nCCDS read family", "nCCDL -> all-bank", "nCCDL all-bank ->", "nCCDL RD/MAC"},
    ),
    ("RD->WR_GB", lambda g: pair("RD", "WRGB", g, 0, None, None, 0), 55, {"RD->WR_GB"}),
    ("RD_MAC->WR_GB", lambda g: pair("RDACC", "WRGB", g, None, None, ALL16, 0), 5, {"RD_MAC->WR_GB"}),
    ("WR_GB->RD_MAC", lambda g: pair("WRGB", "RDACC", g, None, None, 0, ALL16), 12, {"WR_GB->RD nWTRS"}),
    ("RD->WR", lambda g: pair("RD", "WR", g, 0, 5), 50, {"RD->WR"}),
    ("WR->RD_MAC", lambda g: pair("WR", "RDACC", g, 0, None, None, ALL16), 19, {"WR->RD_MAC nWTRL"}),
    (
        "MAC16->PRE nRTP",
        lambda g: log((0, "ACT", None, ALL16), (100, "MAC", None, ALL16), (100 + g, "PRE", None, ALL16)),
        12,
        {"MAC16->PRE nRTP", "read->PREA nRTP", "RD/MAC->PRE nRTP (bank group)"},
    ),
    (
        "ACT16->ACT nRRDL",
        lambda g: pair("ACT", "ACT", g, None, None, ALL16, 0b10),
        11,
        {"ACT16->ACT nRRDL", "ACT->ACT nRRDS", "ACT->ACT nRRDL"},
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_model_rule_boundary(case, aim):
    _, build, gap, expected = case
    assert check_log(build(gap), aim, options=MODEL) == []
    assert rules(check_log(build(gap - 1), aim, options=MODEL)) == expected


def test_the_global_buffer_and_registers_are_usable_during_refresh(aim):
    """The model lists only REFab -> ACT nRFC: WR_GB and RD_MAC may follow a REF at once."""
    assert check_log(pair("REF", "WRGB", 1, None, None, ALL16, 0), aim, options=MODEL) == []
    assert rules(check_log(pair("REF", "ACT", 209, None, 0, ALL16, None), aim, options=MODEL)) == {
        "REFab->ACT nRFC",
        "command during tRFC",
    }


def test_preset_values_are_the_models():
    std = load_standard("aim_model")
    params = load_hardware("gddr6-aim").timing.params
    deviations = std["deviations"]
    differ = {
        theirs: (params[ours], std["standard_values"][theirs])
        for theirs, ours in std["param_map"].items()
        if params[ours] != std["standard_values"][theirs] and theirs not in deviations
    }
    assert differ == {}, f"gddr6-aim differs from the AiM model (ours, model's): {differ}"
    # the read-to-write constant: nCL + nBL + 3 - nCWL + nWPRE
    assert params["RTW_GAP"] == 3 + std["standard_values"]["nWPRE"]


GDDR6_PROGRAMS = [
    ("micro/gemv-4096-gddr6-32ch.yaml", None),
    ("small/tiny-llama-2l-hbm2-8ch.yaml", "gddr6-aim"),
    ("small/tiny-gpt2-2l-hbm2-8ch.yaml", "gddr6-aim"),
    ("fpga/attention-gqa-h4-kv2-d16-c15-fpga.yaml", "gddr6-aim"),
]


@pytest.mark.parametrize("path,preset", GDDR6_PROGRAMS, ids=[p for p, _ in GDDR6_PROGRAMS])
@pytest.mark.parametrize("method", ["naive", "greedy", "cpsat"])
def test_emitted_gddr6_programs_are_legal_on_the_aim_model(path, preset, method):
    from pimsat.instance import load_instance
    from pimsat.pipeline import SolveOptions, run

    res = run(
        load_instance(ROOT / "instances" / path),
        SolveOptions(method=method, time_limit=20, functional=False, record=True),
        preset=preset,
    )
    assert res.hardware.name == "gddr6-aim"
    assert len(res.sim.log) > 0
    vs = check_log(res.sim.log, res.hardware, options=MODEL)
    assert vs == [], vs[:3]
