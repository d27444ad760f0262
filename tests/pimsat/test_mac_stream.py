"""The report's `mac_stream`: the critical channel's makespan term by term, read off the command
log; the terms sum to the simulated cycles, and each gap is named by what the channel issued in it.
The report's `distance`: those terms against the hardware bound's streaming parts
(solver/bound_parts.py), summing to the program's cycles above its bound."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hwmodel import load_hardware
from hwmodel.model import COMMANDS, completion_cycles
from pimsat.instance import instance_files, load_instance
from pimsat.mac_stream import Held, Span, describe, mac_stream
from pimsat.pipeline import SolveOptions, run
from pimsat.report import report_dict
from sim.result import LOG_DTYPE

ROOT = Path(__file__).resolve().parents[2]
HW = load_hardware("fpga-proto")
CMD = {c: i for i, c in enumerate(COMMANDS)}


def _log(rows):
    log = np.zeros(len(rows), dtype=LOG_DTYPE)
    for i, (cycle, ch, cmd) in enumerate(rows):
        log[i]["cycle"], log[i]["channel"], log[i]["command"] = cycle, ch, CMD[cmd]
    return log


def test_each_gap_is_named_by_what_the_channel_issued_in_it():
    iv = HW.mac_interval
    done = completion_cycles(HW.timing)
    rows = [(10, 0, "ACT"), (20, 0, "MAC"), (20 + iv, 0, "MAC")]  # back to back: no gap
    t = 20 + iv
    rows += [(t + 5, 0, "WRGB"), (t + 7, 0, "WRGB"), (t + 30, 0, "MAC")]  # a gap with loads
    rows += [(t + 40, 0, "RDACC"), (t + 31, 0, "PRE"), (t + 60, 0, "MAC")]  # read-outs beat row changes
    rows += [(t + 100, 0, "MAC")]  # a gap without commands
    rows += [(t + 100 + iv + 3, 0, "PRE")]
    rows += [(5, 1, "MAC"), (t + 50, 1, "MAC")]  # channel 1's last MAC is earlier: not critical
    rows.sort()
    end = max(c + done[cmd] for c, ch, cmd in rows if ch == 0)  # (its last MAC's or PRE's completion)
    makespan = end + 20
    ms = mac_stream(_log(rows), HW, makespan)
    assert ms["channel"] == 0 and ms["macs"] == 5
    assert ms[Span.BEFORE] == 20 and ms[Span.MAC] == 5 * iv
    assert ms[Span.LOAD] == 30 - iv and ms[Span.READOUT] == 30 - iv and ms[Span.EMPTY] == 40 - iv
    assert ms[Span.ROW] == ms[Span.REFRESH] == 0
    assert ms[Span.TAIL] == end - (t + 100) - iv and ms[Span.HOST_TAIL] == 20
    assert sum(ms[str(k)] for k in Span) == makespan
    assert describe(ms).endswith(f"= {makespan:,}")
    # the channel sat at WAITs for 8 cycles before its first MAC, 12 inside the gap with loads and
    # 15 across the gap without commands and the next: those cycles are waiting, the rest as before
    held = Held(np.array([2, t + 10, t + 80]), np.array([10, t + 22, t + 100 + iv + 5]))
    mw = mac_stream(_log(rows), HW, makespan, lambda ch: held)
    assert mw[Span.WAIT] == 8 + 12 + (t + 100 - (t + 80)) + 5 and mw[Span.BEFORE] == 20 - 8
    assert mw[Span.LOAD] == 30 - iv - 12 and mw[Span.EMPTY] == 40 - iv - 20
    assert mw[Span.TAIL] == ms[Span.TAIL] - 5 and mw[Span.READOUT] == ms[Span.READOUT]
    assert sum(mw[str(k)] for k in Span) == makespan


def test_a_wait_holds_its_channel_from_the_instruction_before_it_to_its_release():
    from hwmodel.isa import make
    from sim.result import StreamTimes

    stream = [make("WAIT", id=0), make("ACT", mask=1, row=0), make("WAIT", id=1), make("WAIT", id=2)]
    stream += [make("PRE", mask=1), make("WAIT", id=3)]
    times = StreamTimes(np.array([30, 31, 40, 60, 61, 62]), np.array([30, 35, 40, 60, 61, 62]), np.zeros(6))
    held = Held.of(stream, times)
    # [0, 30) before the first; [36, 40) after the ACT's last command, then [40, 60) (a WAIT takes
    # no bus cycle: merged); the last WAIT released the cycle after the PRE: none
    assert held.starts.tolist() == [0, 36] and (held.starts + held.lens).tolist() == [30, 60]
    assert held.within([0, 35, 50], [100, 38, 55]).tolist() == [54, 2, 5]


def test_no_mac_no_stream():
    assert mac_stream(_log([(0, 0, "ACT"), (9, 0, "RD")]), HW, 30) is None


@pytest.mark.parametrize("path", instance_files(ROOT / "instances" / "fpga"), ids=lambda p: p.stem)
def test_the_terms_sum_to_the_simulated_cycles(path):
    r = run(load_instance(path), SolveOptions(method="cpsat", time_limit=10.0, record=True))
    rep = report_dict(r)
    ms = rep["mac_stream"]
    macs = r.sim.log["command"] == CMD["MAC"]
    if not macs.any():  # (a host-run GEMV)
        assert ms is None
        return
    assert sum(ms[str(k)] for k in Span) == rep["simulated_cycles"]
    assert ms["macs"] == int((r.sim.log["channel"][macs] == ms["channel"]).sum())
    assert ms[Span.MAC] <= ms["macs"] * r.hardware.mac_interval
    d = rep["distance"]
    assert d["program"] == rep["simulated_cycles"] and d["bound"] == rep["hardware_bound_cycles"]
    assert d["distance"] == sum(t["distance"] for t in d["terms"].values()) == d["program"] - d["bound"]
    assert sum(t["program"] for t in d["terms"].values()) == d["program"]
    assert sum(t["bound"] for t in d["terms"].values()) == d["bound"]
    assert all(t["bound"] >= 0 for k, t in d["terms"].items() if k != "relaxation")


def test_the_distance_of_the_hbm2_anchor_by_hand():
    """GEMV 4096 on hbm2-pim x64 (docs/results.md, the anchors): the bound's channel view counts
    2,048 MACs x 4, the first load (WRGB -> MAC 19), 31 boundaries x 34 (the read-outs of all 8
    units, tMACL 22 + 7 x 2 + RDACC -> MAC 2 - 4, below a load of the whole buffer, 16 + 7 x 2 +
    19 - 4 = 45) and two REFs with their row commands and the end (732); the host's share of a
    sliver of rows relaxes it by 160. The program's load blocks cost 45 each: the distance is in
    the gaps (31 x 11 + 2) and the relaxation (+160)."""
    r = run(
        load_instance(ROOT / "instances/micro/gemv-4096-hbm2-64ch.yaml"), SolveOptions(functional=False, record=True)
    )
    d = report_dict(r)["distance"]
    assert d["view"] == "channel"
    assert {k: t["bound"] for k, t in d["terms"].items()} == {
        "first": 19,
        "mac": 8192,
        "gaps": 31 * 34,
        "waiting_for_sync": 0,
        "refresh_and_end": 732,
        "relaxation": -160,
        "other_term": 0,
    }
    assert {k: t["distance"] for k, t in d["terms"].items()} == {
        "first": 15,
        "mac": 0,
        "gaps": 31 * 11 + 2,
        "waiting_for_sync": 0,
        "refresh_and_end": 24,
        "relaxation": 160,
        "other_term": 0,
    }


def test_a_streamed_run_has_no_stream():
    r = run(load_instance(ROOT / "instances/fpga/gemv-64x128-fpga.yaml"), SolveOptions(functional=False, record=False))
    assert report_dict(r)["mac_stream"] is None
