"""The kernel's LATEST shortcut (a timing row read once from the previous command's latest issue
when that issue touched one of the units of the command at hand), and the per-unit times it lets
a run of one command on the same banks defer, against the unit-by-unit walk (HWP_WALK, which
defers nothing): every issue time, stall and error the same on random legal and illegal
streams. The walk also reads every timing row, the shortcut only the binding candidates of the
commands met so far (`_bind_rows`), so the same comparison checks that those give the earliest
cycle and the binding row every row gives."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hwmodel import load_hardware
from hwmodel.isa import make
from hwmodel.table import encode_stream
from sim import channel as K
from sim.timing import CMD, compile_tables

HW = {p: load_hardware(p, ["organization.channels=1"]) for p in ("hbm2-pim", "gddr6-aim", "hbm3-pim")}
REPEATABLE = ("RD", "WR", "MAC", "WRGB", "RDACC", "PRE")
COMPARED = ("issue", "lastc", "done", "stall", "counts", "openrow", "gbready", "brefs", "err", "viol")


KINDS = ["ACT", "PRE", "RD", "WR", "MAC", "WRGB", "RDACC", "REF"]


def _stream(hw, draw):
    """Unstamped commands on random bank sets, legal bank states; some stamped too early. The
    commands are of a random subset of the kinds (plain DRAM traffic, PIM traffic, all)."""
    kinds = draw(st.sampled_from([KINDS, ["ACT", "PRE", "RD", "WR", "REF"], ["ACT", "PRE", "MAC", "WRGB", "RDACC"]]))
    org = hw.organization
    per_unit = hw.pim.banks_per_pu
    units = org.banks_per_channel // per_unit
    open_banks: set[int] = set()
    out = []
    for _ in range(draw(st.integers(5, 60))):
        if out and out[-1].op in REPEATABLE and draw(st.integers(0, 2)) == 0:
            out.append(out[-1])  # a run of one command on the same banks (its per-unit times deferred)
            continue
        kind = draw(st.sampled_from(kinds))
        # a mask of banks, at most one per PIM unit (MAC's rule), drawn from a small set of
        # shapes so that later commands often share units with earlier ones (and often not)
        offset = draw(st.integers(0, per_unit - 1))
        first = draw(st.integers(0, units - 1))
        count = draw(st.integers(1, units - first))
        banks = [(first + i) * per_unit + offset for i in range(count)]
        mask = sum(1 << b for b in banks)
        stamp = None
        if draw(st.integers(0, 9)) == 0:
            stamp = draw(st.integers(0, 40 * len(out) + 40))
        if kind == "ACT":
            banks = [b for b in banks if b not in open_banks]
            if not banks:
                continue
            out.append(make("ACT", stamp, mask=sum(1 << b for b in banks), row=draw(st.integers(0, 3))))
            open_banks |= set(banks)
        elif kind == "PRE":
            out.append(make("PRE", stamp, mask=mask))
            open_banks -= set(banks)
        elif kind in ("RD", "WR", "MAC"):
            banks = [b for b in banks if b in open_banks]
            if not banks:
                continue
            m = sum(1 << b for b in banks)
            n = draw(st.integers(1, 4))
            if kind == "MAC":
                out.append(make("MAC", stamp, mask=m, col=0, count=n, gb=0, acc=0))
            elif kind == "RD":
                out.append(make("RD", stamp, bank=banks[0], col=0, count=n, dst=0, offset=0))
            else:
                out.append(make("WR", stamp, bank=banks[0], col=0, count=n, src=0, offset=0, emask=0xFFFF))
        elif kind == "WRGB":
            out.append(make("WRGB", stamp, gb=0, count=draw(st.integers(1, 4)), src=0, offset=0))
        elif kind == "RDACC":
            out.append(make("RDACC", stamp, bank=first * per_unit, acc=0, count=1, dst=0, offset=0, stride=1))
        elif not open_banks:
            out.append(make("REF", stamp))
    return out


def _run(hw, rows: np.ndarray, walk: int) -> dict[str, np.ndarray]:
    tab = compile_tables(hw)
    s = K.new_state(tab, len(rows), None)
    s["hwp"][K.HWP_WALK] = walk
    status = K.call(tab, np.ascontiguousarray(rows.reshape(-1)), s, np.full(1, -1, dtype=np.int64))
    s["status"] = np.array([status])
    return s


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(HW)), st.data())
def test_the_latest_shortcut_times_and_blames_as_the_walk_does(preset, data):
    hw = HW[preset]
    stream = _stream(hw, data.draw)
    if not stream:
        return
    rows = encode_stream(hw, stream)
    fast, walk = _run(hw, rows, 0), _run(hw, rows, 1)
    assert fast["status"][0] == walk["status"][0]
    for k in COMPARED:
        assert np.array_equal(fast[k], walk[k]), k


def test_a_command_on_other_banks_than_the_latest_issue_is_timed_from_its_own_banks():
    """ACT bank 0, then ACT bank 8 much later: a RD of bank 0 waits tRCD after bank 0's ACT, not
    after the latest ACT (which touched no bank of the RD)."""
    hw = HW["hbm2-pim"]
    trcd = hw.timing.p("tRCDRD")
    stream = [
        make("ACT", 0, mask=1, row=0),
        make("ACT", 200, mask=1 << 8, row=0),
        make("RD", None, bank=0, col=0, count=1, dst=0, offset=0),
    ]
    s = _run(hw, encode_stream(hw, stream), 0)
    assert s["status"][0] == K.DONE
    assert trcd < 201 and s["issue"][2] == 201  # the bus, not 200 + tRCD


def _reads_then_pre(pre_stamp, other_bank: bool):
    """ACT banks 0 and 8; RD bank 0 at 40, then two more (a run: their per-unit times deferred);
    RD bank 8 if `other_bank` (RD's latest issue moves to other banks); PRE bank 0."""
    stream = [make("ACT", 0, mask=1, row=0), make("ACT", 10, mask=1 << 8, row=0)]
    stream += [make("RD", 40 if i == 0 else None, bank=0, col=i, count=1, dst=0, offset=0) for i in range(3)]
    if other_bank:
        stream.append(make("RD", None, bank=8, col=0, count=1, dst=0, offset=0))
    stream.append(make("PRE", pre_stamp, mask=1))
    return stream


def test_a_run_s_deferred_times_are_written_when_the_command_moves_to_other_banks():
    """RD bank 0 at 40, 44, 48 (tCCD_L 4), RD bank 8 at 50 (tCCD_S): the PRE of bank 0 reads
    bank 0's own RD time (RD's latest touched bank 8 only), which must be 48, not the run's
    first 40: PRE at 48 + tRTP = 53, not the bus's 51."""
    hw = HW["hbm2-pim"]
    t = hw.timing
    assert (t.p("tCCD_L"), t.p("tCCD_S"), t.p("tRTP")) == (4, 2, 5)  # (the cycles below)
    rows = encode_stream(hw, _reads_then_pre(None, True))
    fast, walk = _run(hw, rows, 0), _run(hw, rows, 1)
    assert fast["status"][0] == K.DONE
    assert list(fast["issue"][2:]) == [40, 44, 48, 50, 53]
    for k in COMPARED:
        assert np.array_equal(fast[k], walk[k]), k


def test_an_error_inside_a_run_names_the_run_s_latest_issue():
    """PRE bank 0 stamped at 52 after RDs at 40, 44, 48: tRTP (5) violated by one cycle, and the
    error names the RD at 48 (actual gap 4), as the walk does, not the run's first."""
    hw = HW["hbm2-pim"]
    rows = encode_stream(hw, _reads_then_pre(52, False))
    fast, walk = _run(hw, rows, 0), _run(hw, rows, 1)
    assert fast["status"][0] == K.ERROR
    err = fast["err"]
    assert err[K.ERR_CODE] == K.E_TIMING and (err[K.ERR_NEEDED], err[K.ERR_ACTUAL]) == (5, 4)
    for k in COMPARED:
        assert np.array_equal(fast[k], walk[k]), k


def _candidates(hw, seen: list[str]) -> dict[str, list[str]]:
    tab = compile_tables(hw)
    start, idx = np.zeros(K.NCMD + 1, dtype=np.int64), np.zeros(tab.rows, dtype=np.int64)
    bits = sum(1 << CMD[c] for c in seen)
    K._bind_rows(bits, tab.rows_start, tab.rows_idx, tab.prev, tab.scope, tab.lat, tab.win, start, idx)
    return {c: [tab.names[k] for k in idx[start[i] : start[i + 1]]] for c, i in CMD.items()}


def test_binding_candidates_leave_out_rows_of_commands_not_met_and_dominated_rows():
    hw = HW["hbm2-pim"]
    tab = compile_tables(hw)
    dram = _candidates(hw, ["ACT", "PRE", "RD", "WR", "REF"])
    every = _candidates(hw, list(CMD))
    for c, i in CMD.items():
        rows = [tab.names[k] for k in tab.rows_idx[tab.rows_start[i] : tab.rows_start[i + 1]]]
        assert set(dram[c]) <= set(every[c]) <= set(rows)
        # every row with a window is a candidate once its earlier command is met
        assert all(r in every[c] for r in rows if "window" in r)
        assert not any(r.split("->")[0] in ("MAC", "WRGB", "RDACC", "REFSB") for r in dram[c])
    assert len(dram["RD"]) < len(every["RD"]) < tab.rows_start[CMD["RD"] + 1] - tab.rows_start[CMD["RD"]]
    # nothing met yet: no candidate at all
    assert all(v == [] for v in _candidates(hw, []).values())


def test_a_row_dominated_by_a_longer_one_over_a_wider_scope_is_no_candidate():
    """Two rows RD->RD: bank_group 4 and channel 6; the channel row's requirement is never below
    the bank-group row's (RD's latest issue over the channel is at least its latest over a group
    inside it), so only it is a candidate; with 4 and 2 both are, and with equal latencies too
    (the bank-group row comes first: where both reach the maximum, it is the binding row)."""
    start, idx = np.zeros(K.NCMD + 1, dtype=np.int64), np.zeros(2, dtype=np.int64)
    rd = CMD["RD"]
    rows_start = np.array([0] * (rd + 1) + [2] * (K.NCMD - rd), dtype=np.int64)
    prev, scope, win = np.array([rd, rd]), np.array([1, 3]), np.zeros(2, dtype=np.int64)
    for lat, kept in (([4, 6], [1]), ([4, 4], [0, 1]), ([4, 2], [0, 1])):
        K._bind_rows(1 << rd, rows_start, np.arange(2), prev, scope, np.array(lat), win, start, idx)
        assert list(idx[start[rd] : start[rd + 1]]) == kept, lat
    # the same scope, the same latency: the first row only
    K._bind_rows(1 << rd, rows_start, np.arange(2), prev, np.array([3, 3]), np.array([5, 5]), win, start, idx)
    assert list(idx[start[rd] : start[rd + 1]]) == [0]
