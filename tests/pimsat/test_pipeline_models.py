"""Whole decode steps through the pipeline: layer templates, Q/K/V and gate/up fusion, host op
chains, KV append into banks, tied embeddings; refresh in the decoder; awkward sizes."""

from __future__ import annotations

import pytest

from pimsat.instance import Instance, load_instance
from pimsat.pipeline import SolveOptions, run

from .test_pipeline_fpga import ROOT


@pytest.mark.parametrize("name", ["tiny-llama-2l-hbm2-8ch", "tiny-gpt2-2l-hbm2-8ch"])
def test_model_every_method_exact_correct_ordered(name):
    inst = load_instance(ROOT / "instances" / "small" / f"{name}.yaml")
    res = {m: run(inst, SolveOptions(method=m, time_limit=5.0)) for m in ("naive", "greedy", "cpsat")}
    for m, r in res.items():
        assert r.outputs_match, (m, r.max_abs_error)
        assert r.sim.cycles == r.compiled.predicted_cycles
        assert r.bounds.cycles <= r.sim.cycles
    assert res["cpsat"].sim.cycles <= res["greedy"].sim.cycles <= res["naive"].sim.cycles
    modes = res["greedy"].solution.modes
    # the layer template was replicated: every layer got the same decisions
    for job, mode in modes.items():
        if job.startswith("layers.1."):
            assert modes[job.replace("layers.1.", "layers.0.")] == mode
    assert any("+" in job for job in modes)  # fusion groups / host chains exist as jobs
    # host chains run as one launch: chained HOPs in the host stream
    host = res["greedy"].compiled.streams.host
    assert any(i.op == "HOP" and i.get("chain") == 1 for i in host)
    # a fused GEMV group's epilogues run as one launch too: chained EPIs
    if any(mode.startswith("fused") for mode in modes.values()):
        assert any(i.op == "EPI" and i.get("chain") == 1 for i in host)


def test_refresh_is_scheduled_exactly():
    inst = Instance(
        name="refresh",
        program={"kind": "gemv", "n": 128, "k": 256},
        hardware={"preset": "fpga-proto", "set": ["timing.params.tREFI=600", "timing.params.tRFC=100"]},
    )
    for method in ("naive", "greedy", "cpsat"):
        r = run(inst, SolveOptions(method=method, time_limit=5.0))
        assert r.outputs_match and r.sim.cycles == r.compiled.predicted_cycles
        log = r.sim.log
        refs = int(((log["command"] == 4) & (log["channel"] == 0)).sum())  # decode's and the tasks' own
        assert refs >= r.sim.cycles // 600  # none owed at the end (the simulator checks it too)
        assert refs >= 2


def test_tilings_that_do_not_fit_a_bank_are_not_candidates():
    # 192 x 256 fp16 fits the device but not in a single channel group of fpga-proto
    inst = Instance(name="tight", program={"kind": "gemv", "n": 192, "k": 256}, hardware={"preset": "fpga-proto"})
    r = run(inst, SolveOptions(method="cpsat", time_limit=5.0))
    assert r.outputs_match and r.sim.cycles == r.compiled.predicted_cycles


def test_fewer_lanes_than_a_burst_slow_the_mac_in_the_simulator_too():
    base = Instance(name="lanes", program={"kind": "gemv", "n": 64, "k": 128}, hardware={"preset": "fpga-proto"})
    narrow = Instance(
        name="lanes4",
        program={"kind": "gemv", "n": 64, "k": 128},
        hardware={"preset": "fpga-proto", "set": ["pim.lanes=4"]},
    )
    a = run(base, SolveOptions(method="greedy"))
    b = run(narrow, SolveOptions(method="greedy"))
    assert b.sim.cycles > a.sim.cycles
    assert b.bounds.cycles <= b.sim.cycles and b.outputs_match


def test_streamed_timing_only_run_reports_what_a_recorded_run_reports(monkeypatch):
    """`compare` simulates timing-only without a command log: streamed, a few instructions at a time."""
    import sim.engine

    inst = load_instance(ROOT / "instances" / "small" / "tiny-llama-2l-hbm2-8ch.yaml")
    whole = run(inst, SolveOptions(method="cpsat", time_limit=5.0, functional=False, record=True))
    monkeypatch.setattr(sim.engine, "SLICE", 5)
    part = run(inst, SolveOptions(method="cpsat", time_limit=5.0, functional=False, record=False))
    assert part.sim.log is None and whole.sim.log is not None
    assert part.sim.cycles == whole.sim.cycles == part.compiled.predicted_cycles
    assert part.sim.counts.tolist() == whole.sim.counts.tolist()
    assert part.sim.row_hits.tolist() == whole.sim.row_hits.tolist()
    assert part.sim.stalls == whole.sim.stalls
