"""pimsat testgen: every directed test and 50 fixed-seed random programs, each exported as a
bundle (simulated, golden results reconciled), run bit-identical in the RTL under Icarus, and
reproduced by the simulator from the bundle's own streams; the timing tests issue `next` at
exactly the row's latency wherever no other row dominates it."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

import sim
from hwmodel.model import COMMANDS
from hwmodel.streams_io import read_streams
from ir import generate_inputs, generate_state
from pimsat.bringup.bundle import check_bundle, export
from pimsat.bringup.directed import directed_cases
from pimsat.bringup.rtl import run_bundle
from pimsat.bringup.testgen import GenKind, random_case
from pimsat.cli import main
from pimsat.stream_inputs import manifest_inputs

from .conftest import require_iverilog

require_iverilog()

RANDOM_SEEDS = range(1000, 1050)  # fixed: the same 50 programs on every run
DIRECTED = {c.name: c for c in directed_cases()}


def _run(case, tmp_path):
    out = tmp_path / case.name
    m = export(case.compiled(), out, case.name)
    assert check_bundle(out) == m
    for r in run_bundle(out, m, tmp_path / "rtl"):
        assert r.ok, f"{case.name} {r.stem}: {r.first_difference}"
    streams, manifest = read_streams(out / "streams")
    hw, program, seed = manifest_inputs(out / "streams", manifest, None, [])
    res = sim.simulate(hw, streams, program, generate_state(program, seed=seed), generate_inputs(program, seed=seed))
    assert res.cycles == m.golden.cycles
    for o in m.golden.outputs:
        assert np.array_equal(np.load(out / o.npy).view(np.uint8), res.outputs[o.name].view(np.uint8))
    return m


@pytest.mark.parametrize("seed", RANDOM_SEEDS)
def test_random_program_is_bit_identical_in_the_rtl(seed, tmp_path):
    m = _run(random_case(seed), tmp_path)
    assert m.test["kind"] == "random" and m.test["seed"] == seed


@pytest.mark.parametrize("name", sorted(DIRECTED))
def test_directed_test_is_bit_identical_in_the_rtl(name, tmp_path):
    m = _run(DIRECTED[name], tmp_path)
    if "next_instr" in m.test:
        _one_cycle_early_is_a_violation(tmp_path / name, m)


def _one_cycle_early_is_a_violation(bundle, m):
    """The timing test's `next` stamped one cycle before its legal gap: the RTL's own counters
    refuse it, naming a row with the test's two commands (its own, or one that dominates it)."""
    from pimsat.bringup.rtl import run_channel

    cycles = bundle / "program" / "ch00.cycles.hex"
    lines = cycles.read_text().split()
    k = m.test["next_instr"]
    lines[k] = f"{int(lines[k], 16) - 1:016x}"
    cycles.write_text("\n".join(lines) + "\n")
    r = run_channel(bundle, m, "ch00", bundle.parent / "early")
    assert not r.ok and "RTL VIOLATION" in r.log and "timing table row" in r.log, r.log
    rule = next(ln for ln in r.log.splitlines() if ln.startswith("RTL rule: timing row"))
    prev_next = m.test["row"].split(" ")[0].split("->")
    assert rule.split("(")[1].split(" ")[0] == "->".join(str(COMMANDS.index(c)) for c in prev_next), rule


def test_random_programs_cover_the_instruction_set():
    """Across the 50 seeds: every command, single- and all-bank masks, partial element masks,
    RDACC sums (stride 0) and strides, sweeps, refresh."""
    seen: set[str] = set()
    for seed in RANDOM_SEEDS:
        for stream in random_case(seed).channels:
            for i in stream:
                f = i.fields()
                seen.add(i.op)
                if "mask" in f and i.op in ("ACT", "MAC", "PRE"):
                    seen.add(f"{i.op}:{'single' if f['mask'] & (f['mask'] - 1) == 0 else 'multi'}")
                if i.op == "WR" and f["emask"] != 0xFFFF:
                    seen.add("WR:partial")
                if i.op == "RDACC":
                    seen.add(f"RDACC:stride{min(f['stride'], 1)}")
                if f.get("count", 1) > 1:
                    seen.add(f"{i.op}:sweep")
    want = {"ACT", "PRE", "RD", "WR", "MAC", "WRGB", "RDACC", "REF", "SIG"}
    want |= {f"{o}:{m}" for o in ("ACT", "MAC", "PRE") for m in ("single", "multi")}
    want |= {"WR:partial", "RDACC:stride0", "RDACC:stride1", "MAC:sweep", "RD:sweep", "WR:sweep", "WRGB:sweep"}
    assert want <= seen, want - seen


def test_every_timing_row_has_a_test_at_its_gap():
    """A timing test's `next` issues exactly `latency` after `prev`, unless another row with the
    same commands covers the same units with a longer latency (on one rank the rank and channel
    scopes are the same units: the 2-cycle link rows under the 13-cycle read/write turnarounds)."""
    from hwmodel import load_hardware
    from sim.timing import compile_tables

    t = compile_tables(load_hardware("fpga-proto"))
    cases = [c for c in DIRECTED.values() if "row" in c.exercises]
    # the prototype refreshes all banks (as the RTL model): the per-bank refresh rows have no test
    # here (tests/sim/test_timing_rows.py tests them on per-bank devices)
    refsb = {n for n in t.names[: t.rows] if "REFSB" in n}
    assert refsb and {c.exercises["row"] for c in cases} == set(t.names[: t.rows]) - refsb
    for c in cases:
        x = c.exercises
        k = t.names.index(x["row"])
        if t.win[k]:  # the window test raises tFAW (directed.tfaw_case)
            assert x["binds"], x
            continue
        lowest = min(int(t.scope[k]), 2)  # rows of this scope and broader apply; rank = channel here
        applies = [
            int(t.lat[j])
            for j in range(t.rows)
            if (t.prev[j], t.nxt[j]) == (t.prev[k], t.nxt[k]) and not t.win[j] and min(int(t.scope[j]), 2) >= lowest
        ]
        dominated = max(applies) > x["latency"]
        assert x["binds"] != dominated, x
        assert x["gap"] == max(applies), x


def test_testgen_command_writes_a_folder_of_bundles(tmp_path):
    r = CliRunner().invoke(
        main, ["testgen", "--kind", "random", "--seed", "7", "--count", "3", "--out", str(tmp_path / "t")]
    )
    assert r.exit_code == 0, r.output
    index = json.loads((tmp_path / "t" / "index.json").read_text())
    assert [t["name"] for t in index["tests"]] == ["random-000007", "random-000008", "random-000009"]
    r = CliRunner().invoke(main, ["check-bundle", str(tmp_path / "t")])
    assert r.exit_code == 0 and "3 bundles" in r.output, r.output
    (tmp_path / "f").write_text("x")
    r = CliRunner().invoke(main, ["testgen", "--kind", "directed", "--out", str(tmp_path / "f")])
    assert r.exit_code == 2 and len(r.output.strip().splitlines()) == 1, r.output
    assert GenKind("instances") is GenKind.INSTANCES


@pytest.mark.parametrize("mutation", ["late", "missing"])
def test_the_rtl_checks_the_refresh_deadlines(tmp_path, mutation):
    """REF #1 one cycle past its deadline, or the last REF dropped (the program ends owing one):
    the RTL's refresh counters refuse both."""
    from pimsat.bringup.rtl import run_channel

    case = DIRECTED["refresh-deadline"]
    out = tmp_path / case.name
    m = export(case.compiled(), out, case.name)
    words, cycles = (out / "program" / f"ch00.{w}.hex" for w in ("words", "cycles"))
    w, c = words.read_text().split(), cycles.read_text().split()
    refs = [i for i, x in enumerate(w) if int(x[-2:], 16) == 0x08]
    if mutation == "late":
        c[refs[0]] = f"{int(c[refs[0]], 16) + 1:016x}"
        want = "REF later than its deadline"
    else:
        del w[refs[-1]], c[refs[-1]]
        want = "program ends owing refreshes"
    words.write_text("\n".join(w) + "\n")
    cycles.write_text("\n".join(c) + "\n")
    r = run_channel(out, m, "ch00", tmp_path / "rtl")
    assert not r.ok and want in r.log, r.log
