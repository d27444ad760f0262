"""bench/sim_bench.py stays runnable: its stream generator gives valid streams, and the kernel-alone
timing measures the same commands as a simulation of them."""
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
