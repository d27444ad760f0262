"""The REF blocks a long task carries (solver/refresh_points.py): the vectorised all-bank
placement is the instruction-by-instruction rule's, and the early-stopping estimate decides as
the whole count would."""

from __future__ import annotations

import pytest

import ir
import solver.emit_mv as emit_mv
from hwmodel import load_hardware
from solver import refresh_points as rp
from solver.layout import Layout
from solver.mvshape import mv_shape
from solver.symbols import Symbols
from solver.task_timing import time_task
from solver.tiling import make_tiling

CASES = [
    # (preset, overrides, n, k, batch, style): tREFI small, so that the tasks carry many REFs
    ("fpga-proto", ["timing.params.tREFI=300", "timing.params.tRFC=60"], 128, 256, 1, "overlap"),
    ("fpga-proto", ["timing.params.tREFI=300", "timing.params.tRFC=60"], 128, 256, 2, "naive"),
    ("hbm2-pim", ["organization.channels=2", "organization.rows=512"], 256, 1024, 16, "overlap"),
    (
        "hbm2-pim",
        ["organization.channels=2", "organization.rows=512", "timing.params.tREFI=700"],
        256,
        1024,
        4,
        "naive",
    ),
    ("gddr6-aim", ["organization.channels=2", "timing.params.tREFI=900"], 256, 2048, 1, "overlap"),
]


def _unrefreshed(hw, n: int, k: int, batch: int, style: str, monkeypatch) -> list:
    """A GEMV task's commands before refresh points are placed."""
    program = ir.gemv_program(n, k, batch=batch)
    t = make_tiling(hw, mv_shape(program, program.ops[0].name), tuple(range(hw.organization.channels)))
    monkeypatch.setattr(emit_mv, "with_refresh", lambda hw, seq: seq)
    return emit_mv.MVEmitter(hw, Layout(hw, t), Symbols(), style).emit(0)


@pytest.mark.parametrize("preset, sets, n, k, batch, style", CASES)
def test_vectorised_placement_is_the_loop(preset, sets, n, k, batch, style, monkeypatch):
    hw = load_hardware(preset, sets)
    seq = _unrefreshed(hw, n, k, batch, style, monkeypatch)
    timing = time_task(hw, seq)
    trefi = hw.timing.p("tREFI")
    assert timing.duration >= rp.LONG_TASK_INTERVALS * trefi  # a task that carries REFs
    p = hw.timing.params
    for block in (p["tRP"] + p["tRFC"] + p["tRCDMAC"], 0, 3 * trefi // 2):  # the rule's, none, a long one
        for at_loads in (True, False):
            marks_fast, marks_slow = [], []
            fast = rp._placed(seq, timing, trefi, block, at_loads, marks=marks_fast)
            nb = hw.organization.banks_per_channel
            slow = rp._placed_by_loop(seq, timing, trefi, block, nb, False, at_loads, marks=marks_slow)
            assert [(i.op, i.args) for i in fast] == [(i.op, i.args) for i in slow]
            # the marks name the first instruction after each block, in both lists (blocks
            # shorter than a tREFI: longer ones may follow each other at one load)
            assert marks_fast == marks_slow
            if block < trefi:
                assert all((fast[a].op, fast[a].args) == (seq[b].op, seq[b].args) for a, b in marks_fast)
                assert all(fast[a - 1].op in ("REF", "ACT") for a, _ in marks_fast)
            assert sum(i.op == "REF" for i in fast) >= (1 if block < trefi else 0)


def test_a_ref_block_takes_in_the_buffer_load_after_its_point(monkeypatch):
    """hbm2-pim (data-bus write path): each REF block of a long GEMV task moves to the buffer
    load that follows its point, the load's WRGBs between the block's PRE and its REF, where they
    cost no MAC time of their own; the task gets shorter and runs the same MACs. On gddr6-aim
    (dedicated path) a load overlaps the MACs and the blocks stay where the rule puts them."""
    hw = load_hardware("hbm2-pim", ["organization.channels=2", "organization.rows=512"])
    assert rp.loads_stop_macs(hw) and not rp.loads_stop_macs(load_hardware("gddr6-aim"))
    seq = _unrefreshed(hw, 256, 1024, 4, "overlap", monkeypatch)
    timing = time_task(hw, seq)
    trefi = hw.timing.p("tREFI")
    p = hw.timing.params
    block = p["tRP"] + p["tRFC"] + p["tRCDMAC"]
    moved, kept = (rp._placed(seq, timing, trefi, block, at_loads) for at_loads in (True, False))
    refs = [i for i, ins in enumerate(moved) if ins.op == "REF"]
    assert refs and len(refs) == sum(ins.op == "REF" for ins in kept)
    for i in refs:  # PRE, the load's WRGBs, REF
        assert moved[i - 1].op == "WRGB"
        j = i - 1
        while moved[j].op == "WRGB":
            j -= 1
        assert moved[j].op == "PRE"
    assert sorted(map(repr, moved)) == sorted(map(repr, kept))  # the same instructions, reordered
    faster, slower = time_task(hw, moved).duration, time_task(hw, kept).duration
    # 88,362 -> 88,115 cycles with 21 REFs: a REF elsewhere may already sit beside a load (the
    # WRGBs then wait for its tRFC, 23 cycles of the 45 hidden); here all of it is but 12
    assert slower - faster >= 10 * len(refs), (slower, faster, len(refs))


@pytest.mark.parametrize("preset, sets, n, k, batch, style", CASES)
def test_estimate_stops_where_the_whole_count_decides_alike(preset, sets, n, k, batch, style, monkeypatch):
    hw = load_hardware(preset, sets)
    seq = _unrefreshed(hw, n, k, batch, style, monkeypatch)
    whole = rp._estimate(hw, seq)
    for enough in (1, whole // 3, whole, whole + 1, 10 * whole):
        part = rp._estimate(hw, seq, enough)
        assert (part >= enough) == (whole >= enough)
        assert part == whole or part >= enough


def _points_by_rule(codes, issue, duration, trefi, block):
    out, k = [], 1
    for i in range(len(codes)):
        if issue[i] + (k - 1) * block >= k * trefi and duration - issue[i] > trefi and codes[i] != rp._CODE["RDACC"]:
            out.append(i)
            k += 1
    return out


@pytest.mark.parametrize("ordered", [True, False])
def test_points_follow_the_rule_in_order_or_not(ordered):
    import numpy as np

    rng = np.random.default_rng(3)
    for _ in range(200):
        n = int(rng.integers(1, 400))
        issue = np.cumsum(rng.integers(0, 40, n)) if ordered else rng.integers(0, 20 * n, n)
        codes = rng.choice([0, 0, 0, 1, 2, 3], n).astype(np.int8)
        duration = int(issue.max()) + int(rng.integers(1, 300))
        trefi, block = int(rng.integers(50, 400)), int(rng.integers(0, 100))
        timing = type("T", (), {"issue": issue, "duration": duration})
        assert rp._points(codes, timing, trefi, block) == _points_by_rule(codes, issue, duration, trefi, block)


@pytest.mark.parametrize("refresh_mode", ["all_bank", "per_bank"])
def test_the_refs_of_a_long_task_drift_at_most_the_limit(refresh_mode, monkeypatch):
    """The rule's points assume each block adds tRP + tRFC + tRCDMAC (per-bank: its round's
    estimate); a block that takes a load in adds less, a per-bank round more, and over many
    blocks the REFs drift from k x tREFI: ahead, more REFs than the run needs and a pull-in the
    decoder can only meet by starting the task late, idle and owing REFs (a one-channel hbm2 GEMV
    2048 x 4096 at batch 16: 78,000 cycles over 2,900 REFs, a program the simulator rejected);
    behind, more postponed than JEDEC's 8. `with_refresh` keeps the drift within DRIFT_LIMIT tREFI
    (placed again from the measured cost of the first blocks)."""
    sets = ["organization.channels=2", "organization.rows=512", "timing.params.tREFI=700"]
    hw = load_hardware("hbm2-pim", [*sets, f'timing.refresh_mode="{refresh_mode}"'])
    seq = _unrefreshed(hw, 256, 1024, 4, "overlap", monkeypatch)
    timing = time_task(hw, seq)
    trefi = hw.timing.p("tREFI")
    p, nb = hw.timing.params, hw.organization.banks_per_channel

    def drift(placed):
        return [r - k * trefi for k, r in enumerate(time_task(hw, placed).refreshes, 1)]

    if refresh_mode == "all_bank":
        rule = drift(rp._placed(seq, timing, trefi, p["tRP"] + p["tRFC"] + p["tRCDMAC"]))
        assert min(rule) < -(rp.DRIFT_LIMIT + 4) * trefi  # ahead: 247 REFs, 9.4 tREFI
    else:
        block = p["tRP"] + p["tRFCSB"] + (nb // 2) * p["tRREFD"] + p["tRCDMAC"]
        rule = drift(rp._placed_by_loop(seq, timing, trefi, block, nb, True))
        assert max(rule) > (rp.DRIFT_LIMIT + 4) * trefi  # behind: 11 tREFI
    kept = drift(rp.with_refresh(hw, seq))
    assert all(abs(d) < (rp.DRIFT_LIMIT + 1) * trefi for d in kept), (min(kept), max(kept))


@pytest.mark.parametrize("style", ["naive", "overlap"])
def test_a_load_longer_than_a_refresh_window_is_written_once(style, monkeypatch):
    """Over a slow link (2 bytes a cycle: 16 cycles a WRGB) a buffer load takes longer than what
    the REF blocks leave of a tREFI (700 here), so the next refresh point falls inside the load
    the last block took in. Each block then took the load's WRGBs from its point on: the load
    written twice, the task 11x longer and its REFs ever later (a naive Llama-3-8B layer on 16
    hbm3-pim channels, found by bench/whatif_fuzz.py --size llm, stopped in decode). Every
    column command of the task is in the refreshed task once, and the REFs keep to k x tREFI."""
    sets = ["organization.channels=2", "organization.rows=256", "host.link_bytes_per_cycle=2"]
    hw = load_hardware("hbm3-pim", [*sets, "timing.params.tREFI=700"])
    seq = _unrefreshed(hw, 1024, 1024, 4, style, monkeypatch)
    trefi = hw.timing.p("tREFI")
    assert time_task(hw, seq).duration >= 20 * trefi
    out = rp.with_refresh(hw, seq)
    columns = ("MAC", "WRGB", "RDACC")
    assert [repr(i) for i in out if i.op in columns] == [repr(i) for i in seq if i.op in columns]
    refs = time_task(hw, out).refreshes
    assert len(refs) >= 20
    drift = [r - k * trefi for k, r in enumerate(refs, 1)]
    assert all(abs(d) < (rp.DRIFT_LIMIT + 1) * trefi for d in drift), (min(drift), max(drift))
