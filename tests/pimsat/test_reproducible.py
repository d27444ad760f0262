"""Reproducible by default: the same command gives the same program whatever the machine's load.
CP-SAT's search ends by proof or by its deterministic work budget (the default); the wall clock
is only a guard, and a search it stops says so (Solution.search_end, the report's status)."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

from click.testing import CliRunner

from pimsat.cli import main
from solver.cpsat import solve_cpsat
from solver.problem import SearchEnd

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
from solver_bench import layered_problem  # noqa: E402


@contextmanager
def cpu_hog():
    """A busy process beside the solve (the machine has 2 cores: it takes one)."""
    p = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield
    finally:
        p.kill()
        p.wait()


def _digest(folder: Path) -> str:
    h = hashlib.sha256()
    for f in sorted((folder / "streams").iterdir()):
        h.update(f.name.encode() + f.read_bytes())
    return h.hexdigest()


def test_a_search_ended_by_the_work_budget_is_the_same_under_load():
    p = layered_problem(400, seed=0)  # not proven optimal within the budget
    quiet = solve_cpsat(p, time_limit=60, deterministic_time=0.15)
    with cpu_hog():
        loaded = solve_cpsat(p, time_limit=60, deterministic_time=0.15)
    assert quiet.search_end is SearchEnd.work_budget and quiet.status == "FEASIBLE"
    assert (loaded.modes, loaded.starts, loaded.objective) == (quiet.modes, quiet.starts, quiet.objective)
    assert "reproducible" in quiet.message


def test_a_search_stopped_by_the_wall_clock_says_so():
    p = layered_problem(400, seed=0)
    s = solve_cpsat(p, time_limit=0.3, deterministic_time=None)
    assert s.search_end is SearchEnd.wall_clock and "not reproducible" in s.message


def test_pimsat_solve_defaults_give_identical_streams_beside_a_busy_process(tmp_path):
    inst = ROOT / "instances" / "fpga" / "attention-gqa-h4-kv2-d16-c15-fpga.yaml"
    a, b = tmp_path / "a", tmp_path / "b"
    assert CliRunner().invoke(main, ["solve", str(inst), "--out", str(a)]).exit_code == 0
    with cpu_hog():
        assert CliRunner().invoke(main, ["solve", str(inst), "--out", str(b)]).exit_code == 0
    assert _digest(a) == _digest(b)
    import json

    rep = json.loads((a / "report.json").read_text())
    assert rep["search_end"] in ("proof", "work budget")
