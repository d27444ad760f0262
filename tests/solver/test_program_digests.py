"""Golden digests of every emitted fpga- and micro-tier program, per method
(tests/solver/golden/program_digests.json, written by `python bench/program_digests.py --write`):
a change that alters any stream, even at the same cycle count, fails here until the digests are
re-recorded on purpose (and the figures it moves are re-measured)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
from program_digests import GOLDEN, METHODS  # noqa: E402

from hwmodel.streams import program_digest  # noqa: E402
from pimsat.instance import instance_files, load_instance  # noqa: E402
from pimsat.pipeline import SolveOptions, run  # noqa: E402

HEAVY = {"gemv-4096-b16-hbm2-64ch"}  # ~100 s for its three programs: PIMSAT_FULL=1
FULL = os.environ.get("PIMSAT_FULL") == "1"
PATHS = [
    pytest.param(p, marks=pytest.mark.skipif(p.stem in HEAVY and not FULL, reason="heavy: PIMSAT_FULL=1"))
    for t in ("fpga", "micro")
    for p in instance_files(ROOT / "instances" / t)
]


def test_every_fpga_and_micro_instance_has_digests():
    golden = json.loads(GOLDEN.read_text())
    names = {load_instance(p).name for t in ("fpga", "micro") for p in instance_files(ROOT / "instances" / t)}
    assert names <= set(golden) and all(set(golden[n]) == set(METHODS) for n in names)


@pytest.mark.parametrize("path", PATHS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_emitted_programs_match_their_golden_digest(path):
    inst = load_instance(path)
    golden = json.loads(GOLDEN.read_text())[inst.name]
    for m in METHODS:
        r = run(inst, SolveOptions(method=m, functional=False, record=False))
        got = {"cycles": r.compiled.predicted_cycles, "sha256": program_digest(r.compiled.streams)}
        assert got == golden[m], f"{inst.name} {m}: the emitted program changed ({golden[m]} -> {got})"
