"""Per-bank refresh (timing.refresh_mode = per_bank, ISA 1.3 REFSB): the refresh obligation is
counted per bank (a REF refreshes every bank, a REFSB its own), each bank under the JEDEC limits -
legal at the limit, refused one step beyond, the error naming the bank. The REFSB timing rows are
tested with the rest of the table in test_timing_rows.py."""

from __future__ import annotations

import pytest
from simgen import streams

from hwmodel import load_hardware
from hwmodel.isa import make
from sim import SimulationError, simulate
from sim.stdcheck import check_log


@pytest.fixture(scope="module")
def pb():
    return load_hardware("fpga-proto", ["organization.channels=1", "timing.refresh_mode=per_bank"])


def _run(hw, s):
    return simulate(hw, streams(hw, s), functional=False)


def _round(hw, cycle=None):
    """A REFSB of every bank, the first stamped at `cycle` (tRREFD apart: the rank row)."""
    nb = hw.organization.banks_per_channel
    return [make("REFSB", bank=0, cycle=cycle)] + [make("REFSB", bank=b) for b in range(1, nb)]


def test_refsb_is_refused_on_an_all_bank_device():
    hw = load_hardware("fpga-proto", ["organization.channels=1"])
    with pytest.raises(SimulationError) as e:
        _run(hw, [make("REFSB", bank=1)])
    assert e.value.kind == "stream" and "refresh_mode = all_bank" in str(e.value) and e.value.instr == 0


def test_refsb_needs_its_bank_precharged_only(pb):
    _run(pb, [make("ACT", mask=1, row=0), make("REFSB", bank=1), make("PRE", mask=1)])  # another bank: fine
    with pytest.raises(SimulationError) as e:
        _run(pb, [make("ACT", mask=2, row=0), make("REFSB", bank=1), make("PRE", mask=2)])
    assert e.value.kind == "bank_state" and e.value.bank == 1 and "REFSB needs its bank precharged" in str(e.value)


def test_the_other_banks_work_while_one_refreshes(pb):
    """ACT of another bank tRREFD - 1 after a REFSB (not tRFCSB), of the same bank tRFCSB after."""
    p = pb.timing.params
    r = _run(pb, [make("REFSB", bank=0, cycle=100), make("ACT", mask=1 << 2, row=0), make("PRE", mask=1 << 2)])
    assert r.times(0).issue[1] == 100 + max(p["tRREFD"] - 1, 1)
    r = _run(pb, [make("REFSB", bank=0, cycle=100), make("ACT", mask=1, row=0), make("PRE", mask=1)])
    assert r.times(0).issue[1] == 100 + p["tRFCSB"]


def test_each_bank_is_due_on_its_own(pb):
    """Bank 3 refreshed by a REFSB, the others not: at (max_postponed + 1) x tREFI the program
    owes more than max_postponed refreshes of bank 0 - the error names it; a round of REFSBs
    (every bank) before then is legal."""
    trefi, maxp = pb.timing.p("tREFI"), pb.timing.max_postponed_refresh
    late = (maxp + 1) * trefi
    with pytest.raises(SimulationError) as e:
        _run(pb, [make("REFSB", bank=3) for _ in range(maxp + 1)] + [make("ACT", mask=1, row=0, cycle=late + 5)])
    assert e.value.kind == "refresh" and e.value.cycle == late and "bank 0" in str(e.value)
    s = []
    for _ in range(maxp + 2):
        s += _round(pb)
    ok = _run(pb, s + [make("ACT", mask=1, row=0, cycle=late + 5), make("PRE", mask=1)])
    assert ok.cycles > late


def test_a_refsb_is_late_at_its_banks_deadline(pb):
    """REFSB #1 of bank 2 is due before (1 + max_postponed) x tREFI: legal one cycle before,
    refused at it, naming bank 2."""
    trefi, maxp = pb.timing.p("tREFI"), pb.timing.max_postponed_refresh
    deadline = (1 + maxp) * trefi
    rest = [make("REFSB", bank=b) for b in range(pb.organization.banks_per_channel) if b != 2]
    with pytest.raises(SimulationError) as e:
        _run(pb, [make("REFSB", bank=2, cycle=deadline)] + rest)
    assert e.value.kind == "refresh" and e.value.bank == 2 and "of bank 2" in str(e.value)
    with pytest.raises(SimulationError) as e:  # legal issue; the other banks are owed at the end
        _run(pb, [make("REFSB", bank=2, cycle=deadline - 1)] + rest)
    assert e.value.instr != 0


def test_pulled_in_credit_per_bank(pb):
    """Bank 1 may be pulled in max_pulled_in refreshes: REFSB #(pull + 1) of bank 1 earns credit
    at tREFI; stamped one cycle earlier it is refused (naming bank 1), unstamped it waits."""
    trefi, pull = pb.timing.p("tREFI"), pb.timing.max_pulled_in_refresh
    ahead = [make("REFSB", bank=1) for _ in range(pull)]
    others = [make("REFSB", bank=b) for b in range(pb.organization.banks_per_channel) if b != 1]
    ok = _run(pb, ahead + [make("REFSB", bank=1, cycle=trefi)] + others)
    assert ok.times(0).issue[pull] == trefi
    with pytest.raises(SimulationError) as e:
        _run(pb, ahead + [make("REFSB", bank=1, cycle=trefi - 1)] + others)
    assert e.value.kind == "refresh" and e.value.bank == 1 and e.value.needed == trefi
    waits = _run(pb, ahead + [make("REFSB", bank=1)] + others)
    assert waits.times(0).issue[pull] == trefi


def test_interval_per_bank(pb):
    """Two refreshes of a bank at most max_refresh_interval x tREFI apart; other banks' REFSBs in
    between do not count for it."""
    trefi, nb = pb.timing.p("tREFI"), pb.organization.banks_per_channel
    gap = pb.timing.max_refresh_interval * trefi
    pull = pb.timing.max_pulled_in_refresh
    ahead = [ins for _ in range(pull) for ins in _round(pb)]  # every bank pulled in 8
    mid = [
        make("REFSB", bank=b, cycle=5 * trefi if i == 0 else None) for i, b in enumerate(b for b in range(nb) if b != 3)
    ]
    base = _run(pb, ahead)
    last = int(base.times(0).issue[(pull - 1) * nb + 3])  # bank 3's 8th refresh
    ok = _run(pb, ahead + mid + [make("REFSB", bank=3, cycle=last + gap)])
    assert ok.times(0).issue[-1] == last + gap
    with pytest.raises(SimulationError) as e:
        _run(pb, ahead + mid + [make("REFSB", bank=3, cycle=last + gap + 1)])
    assert e.value.kind == "refresh" and e.value.bank == 3 and e.value.actual == gap + 1


def test_the_standard_checker_counts_per_bank(pb):
    """sim.stdcheck (rules from Ramulator 2.1 / JESD235, not our table) on a per-bank log: a legal
    program is clean; its own per-bank refresh count finds the bank left unrefreshed."""
    p = pb.timing.params
    s = _round(pb, cycle=100) + [make("ACT", mask=1, row=0), make("PRE", mask=1)]
    r = simulate(pb, streams(pb, s), functional=False, record=True)
    assert check_log(r.log, pb) == []
    log = r.log.copy()
    # move bank 0's REFSB 10 x tREFI later (a hand-edited log the simulator would refuse)
    i = int((log["command"] == 8).nonzero()[0][0])
    log["cycle"][i] = 10 * p["tREFI"]
    bad = check_log(log[log["cycle"].argsort(kind="stable")], pb)
    assert any(v.rule == "REF interval" and v.bank == 0 for v in bad), bad
