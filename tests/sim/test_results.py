"""SimResult contents: per-instruction times, log format, statistics; host costs; the fallback."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
from simgen import compile_gemv, streams

from hwmodel.isa import make
from hwmodel.model import COMMANDS
from ir import PRESETS, build_decode_step, gemv_program
from sim import HOST_EVENT_DTYPE, LOG_DTYPE, epilogue_cycles, host_op_cycles, simulate


def test_log_format_and_counts(hbm2):
    prog = gemv_program(24, 128, dtype="fp16")
    ss = compile_gemv(hbm2, prog, channels=2)
    res = simulate(hbm2, ss, prog)
    log = res.log
    assert log.dtype == LOG_DTYPE and res.host_events.dtype == HOST_EVENT_DTYPE
    assert len(log) == res.commands == sum(res.command_counts.values())
    assert np.all(np.diff(log["channel"]) >= 0)  # channel after channel
    for c in range(2):
        mine = log[log["channel"] == c]
        assert np.all(np.diff(mine["cycle"]) > 0)  # one command per cycle per bus, in order
        t = res.times(c)
        cmd = np.array([i.op not in ("SIG", "WAIT") for i in ss.channels[c]])
        first = mine[np.r_[True, np.diff(mine["instr"]) != 0]]
        assert first["cycle"].tolist() == t.issue[cmd].tolist()
        assert np.all(t.last[cmd] >= t.issue[cmd]) and np.all(t.done[cmd] > t.last[cmd])
    mac = log[log["command"] == COMMANDS.index("MAC")]
    assert np.all(mac["bank"] == -1) and np.all(mac["mask"] > 0) and np.all(mac["row"] >= 0)
    act = log[log["command"] == COMMANDS.index("ACT")]
    assert np.all(act["col"] == -1)
    assert res.cycles == max(int(res.times(c).done.max()) for c in range(2)) or res.cycles == int(
        res.host_events["end"].max()
    )
    assert 0 < res.utilization <= 1 and np.all(res.pu_utilization <= 1)
    assert res.pu_macs.sum() == sum(bin(int(m)).count("1") for m in mac["mask"])
    assert 0 < res.row_hit_rate < 1
    assert res.refreshes.tolist() == [
        int(np.sum(log[log["channel"] == c]["command"] == COMMANDS.index("REF"))) for c in range(2)
    ]
    assert "MAC->MAC channel tMAC" in res.stalls and "sync" not in res.stalls
    assert set(res.summary()) >= {"cycles", "commands", "utilization", "stalls"}


def test_timing_only_has_no_values_and_no_log(hbm2):
    prog = gemv_program(24, 128, dtype="fp16")
    ss = compile_gemv(hbm2, prog, channels=2)
    res = simulate(hbm2, ss, prog, functional=False, record=False)
    assert res.log is None and res.outputs == {} and not res.functional
    assert res.cycles == simulate(hbm2, ss, prog).cycles


def test_host_costs(hbm2):
    prog = build_decode_step(PRESETS["gpt2"] if "gpt2" in PRESETS else next(iter(PRESETS.values())), 1, 8)
    h = hbm2.host
    for i, op in enumerate(prog.ops):
        c = host_op_cycles(hbm2, prog, i)
        if op.kind.value == "gemv":
            b, k = prog.tensors[op.inputs[0]].shape
            n = prog.tensors[op.inputs[1]].shape[0]
            assert c == h.dispatch_cycles + math.ceil(b * n * k / h.matrix_macs_per_cycle)
            out = prog.tensors[op.outputs[0]].shape
            assert epilogue_cycles(hbm2, prog, i) == h.dispatch_cycles + math.ceil(
                math.prod(out) / h.vector_elements_per_cycle
            )
        elif op.kind.value == "softmax":
            n = math.prod(prog.tensors[op.inputs[0]].shape)
            assert c == h.dispatch_cycles + math.ceil(2 * n / h.vector_elements_per_cycle)
        assert c >= h.dispatch_cycles


def test_host_stream_timing(hbm2):
    prog = gemv_program(8, 64, dtype="fp16")
    host = [make("HOP", op=0), make("HOP", op=0, cycle=5000), make("SIG", id=1)]
    res = simulate(
        hbm2, streams(hbm2, [make("WAIT", id=1), make("REF")], host=host, symbols=["x"]), prog, functional=False
    )
    d = host_op_cycles(hbm2, prog, 0)
    assert res.host_events["start"].tolist() == [0, 5000] and res.host_events["end"].tolist() == [d, 5000 + d]
    assert res.signals[1] == 5000 + d and res.stalls["host stamp"] == 5000 - d


def test_pure_python_fallback_matches(tmp_path):
    """PIMSAT_SIM_NOJIT=1 runs the same kernel without numba: same cycles and log."""
    code = (
        "import sys, numpy as np; sys.path.insert(0, %r)\n"
        "from hwmodel import load_hardware\nfrom ir import gemv_program\nfrom sim import simulate\n"
        "from sim.jit import JIT\nfrom simgen import compile_gemv\n"
        "hw = load_hardware('fpga-proto'); prog = gemv_program(12, 128, batch=2)\n"
        "r = simulate(hw, compile_gemv(hw, prog), prog)\n"
        "np.save(%r, r.log); print(JIT, r.cycles)\n"
    ) % (str(Path(__file__).parent), str(tmp_path / "log.npy"))
    env = dict(os.environ, PIMSAT_SIM_NOJIT="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    jit, cycles = out.stdout.split()
    from hwmodel import load_hardware

    hw = load_hardware("fpga-proto")
    prog = gemv_program(12, 128, batch=2)
    r = simulate(hw, compile_gemv(hw, prog), prog)
    assert jit == "False" and int(cycles) == r.cycles
    assert np.array_equal(np.load(tmp_path / "log.npy"), r.log)
