"""The simulator benches stay runnable: sim_bench's stream generator gives valid streams and its
kernel-alone timing measures the same commands as a simulation of them; kernel_digest runs a
compiled instance's channels and hashes the same state twice."""

from __future__ import annotations

import sys
from pathlib import Path

from hwmodel import load_hardware
from sim import simulate

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from sim_bench import bench_kernel, make_streams  # noqa: E402


def test_kernel_alone_counts_the_simulated_commands():
    hw = load_hardware("hbm2-pim", ["organization.channels=2"])
    ss = make_streams(hw, 2, 1, 4)
    res = simulate(hw, ss, functional=False)
    k = bench_kernel(hw, ss)
    assert k["commands"] == res.commands > 0 and k["seconds"] > 0


def test_kernel_digest_runs_a_compiled_instance_deterministically():
    from kernel_digest import channel_tables, run

    root = Path(__file__).resolve().parents[2]
    hw, tables = channel_tables(str(root / "instances/small/tiny-gpt2-2l-hbm2-8ch.yaml"), "greedy", 4)
    assert len(tables) == 4
    first, again = run(hw, tables, 1), run(hw, tables, 1)
    assert first[1] == sum(len(t) for t in tables) > 0
    assert first[2] == again[2]
