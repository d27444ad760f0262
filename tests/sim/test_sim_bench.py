"""The simulator benches stay runnable: sim_bench's stream generator gives valid streams and its
kernel-alone timing measures the same commands as a simulation of them; kernel_digest runs a
compiled instance's channels and hashes the same state twice; twins_ab finds a compiled program's
results equal with twin channels and without."""

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


def test_twins_ab_runs_and_finds_the_results_equal(capsys, monkeypatch):
    import twins_ab

    monkeypatch.setenv("PIMSAT_TWINS", "1")  # (restored after the test, whatever twins_ab leaves)
    root = Path(__file__).resolve().parents[2]
    monkeypatch.setattr(
        sys,
        "argv",
        [
            "twins_ab",
            str(root / "instances/micro/gemv-4096-hbm2-64ch.yaml"),
            "--methods",
            "naive",
            "--repeat",
            "1",
            "--jobs",
            "1",
        ],
    )
    twins_ab.main()
    line = capsys.readouterr().out.strip().splitlines()[-1].split()
    assert line[0] == "naive" and int(line[2]) < int(line[1]) and line[-1] == "yes"
