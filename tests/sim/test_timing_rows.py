"""Every row of the timing table on every preset: legal exactly at the stated gap, rejected one
cycle earlier with an error naming that row.

Scenario per row (prev, next, scope, latency L): `prev` is stamped at T0 and `next` at T0 + L
(then T0 + L - 1). Banks: same bank for bank rows, another bank of the same group for
bank_group rows, another group of the same rank for rank rows, another rank (else group) for
channel rows. Set-up issued unstamped at the start, long before T0: ACT of the banks that must be
open, a WRGB if a MAC needs the global buffer; afterwards PRE of every open bank.

Rows another row dominates on a preset get a documented parameter override so the tested row
binds: ACT->ACT bank and ACT->REF rank tRC need tRAS + tRP <= tRC (hbm3-pim: 45 + 19 > 63, so
tRAS := tRC - tRP; the row is closed between the two);
the tFAW window needs the fifth ACT to be otherwise legal at tFAW (hbm2-pim: 4 x tRRD_S = 16 > 15;
fpga-proto has only 4 banks, so the fifth ACT re-opens a bank after tRC): tFAW := that gap + 3;
the link rows (latency tLINK, 2 cycles on every preset) are dominated by the turnaround and tCCD
rows of the same pair, so the link is narrowed until tLINK = the largest of those + 3
(host.link_bytes_per_cycle := burst_bytes / that). The read-to-read rows of MAC (MAC and RDACC
are column reads) are dominated by the device's own MAC rows: MAC->RDACC by tMACL (so tMACL := 1),
MAC->MAC in the rank by tMAC (tMAC := 1), ACT->MAC tRCDRD by a longer tRCDMAC (gddr6-aim: tRCDMAC
:= tRCDRD). gddr6-aim's own row WR->RDACC channel-wide tWTR_L (timing.device_rows) dominates the
family's tWTR_S rows of the pair there (tWTR_L := tWTR_S).
"""

from __future__ import annotations

import pytest
from simgen import PRESETS, streams

from hwmodel import load_hardware
from hwmodel.isa import make
from hwmodel.loader import family_timing_table
from sim import SimulationError, simulate
from sim.timing import constraint_name

T0 = 1500
ROWS = family_timing_table()
COLUMN = ("RD", "WR", "MAC")


def _banks(hw, scope, unit_named=False):
    """unit_named: a command that names a PIM unit by its first bank (RDACC) is involved, so the
    other bank of a bank_group row is the next unit's first bank if the group has one, else the
    same bank (a unit spans the group)."""
    org = hw.organization
    bp = 0
    if scope == "bank":
        return bp, bp
    if scope == "bank_group":
        if unit_named:
            bpp = hw.pim.banks_per_pu
            return bp, bpp if bpp < org.banks_per_group else bp
        return bp, 1
    if scope == "rank" or org.ranks == 1:
        return bp, org.banks_per_group  # first bank of the next group
    return bp, org.banks_per_rank  # first bank of the next rank


def _cmd(hw, name, bank, cycle=None):
    if name == "ACT":
        return make("ACT", cycle=cycle, mask=1 << bank, row=1)
    if name == "PRE":
        return make("PRE", cycle=cycle, mask=1 << bank)
    if name == "RD":
        return make("RD", cycle=cycle, bank=bank, col=0, count=1, dst=0, offset=0)
    if name == "WR":
        return make("WR", cycle=cycle, bank=bank, col=0, count=1, src=0, offset=0, emask=0xFFFF)
    if name == "MAC":
        return make("MAC", cycle=cycle, mask=1 << bank, col=0, count=1, gb=0, acc=0)
    if name == "WRGB":
        return make("WRGB", cycle=cycle, gb=0, count=1, src=0, offset=0)
    if name == "RDACC":
        return make("RDACC", cycle=cycle, bank=bank, acc=0, count=1, dst=0, offset=0, stride=1)
    if name == "REFSB":
        return make("REFSB", cycle=cycle, bank=bank)
    return make("REF", cycle=cycle)


def _scenario(hw, row, gap):
    prev, nxt, scope = row["prev"], row["next"], row["scope"]
    bp, bn = _banks(hw, scope, "RDACC" in (prev, nxt))
    setup, middle = [], []
    opened = set()
    if prev in COLUMN + ("PRE",):
        opened.add(bp)
    if nxt in COLUMN + ("PRE",) and not (bn == bp and prev == "ACT"):
        opened.add(bn)
    setup += [make("ACT", mask=1 << b, row=1) for b in sorted(opened)]
    if "MAC" in (prev, nxt):
        setup.append(make("WRGB", gb=0, count=1, src=0, offset=0))
    prev_i = _cmd(hw, prev, bp, T0)
    if row.get("window"):
        return _window_scenario(hw, gap)
    if prev == "ACT" and (nxt == "ACT" and scope == "bank" or nxt == "REF"):  # its row closed first
        middle.append(make("PRE", mask=1 << bp))
    next_i = _cmd(hw, nxt, bn, T0 + gap)
    state = set(opened)
    for name, b in ((prev, bp), (nxt, bn)):
        if name == "ACT":
            state.add(b)
        if name == "PRE":
            state.discard(b)
    if prev == "ACT" and nxt == "ACT" and scope == "bank":
        state = {bp}
    if prev == "ACT" and nxt == "REF":
        state = set()
    cleanup = [make("PRE", mask=1 << b) for b in sorted(state)]
    return setup + [prev_i] + middle + [next_i] + cleanup


def _window_order(hw):
    """Five ACTs of one rank, groups round robin; the fifth re-opens bank 0 if there are only four."""
    org = hw.organization
    banks = [g * org.banks_per_group + i for i in range(org.banks_per_group) for g in range(org.bank_groups)]
    return banks[:5] if len(banks) >= 5 else banks[:4] + [banks[0]]


def _window_scenario(hw, gap):
    order = _window_order(hw)
    d = _spacing(hw)
    acts = [make("ACT", cycle=T0 + i * d, mask=1 << b, row=1) for i, b in enumerate(order[:4])]
    mid = []
    if order[4] == order[0]:
        mid.append(make("PRE", mask=1 << order[0]))
    fifth = make("ACT", cycle=T0 + gap, mask=1 << order[4], row=2)
    cleanup = [make("PRE", mask=1 << b) for b in sorted(set(order))]
    return acts[:1] + acts[1:] + mid + [fifth] + cleanup


def _overrides(hw, row) -> list[str]:
    """Besides the documented ones above: rows naming REFSB run on the device with per-bank
    refresh; ACT->REFSB on the channel's row bus gets tRRD out of its way (ACT->REFSB rank is
    tRRD_S + 1), REFSB->ACT in the bank group gets tRREFD out of its way."""
    p = hw.timing.params
    if "REFSB" in (row["prev"], row["next"]):
        out = ["timing.refresh_mode=per_bank"]
        if (row["prev"], row["next"], row["scope"]) == ("ACT", "REFSB", "channel"):
            out += ["timing.params.tRRD_S=0", "timing.params.tRRD_L=1"]
        if (row["prev"], row["next"], row["scope"]) == ("REFSB", "ACT", "bank_group"):
            out += ["timing.params.tRREFD=1"]
        return out
    if row["latency"] == "tLINK":
        others = [
            hw.timing.latency_of(c)
            for c in hw.timing.constraints
            if (c.prev, c.next) == (row["prev"], row["next"]) and c.latency != "tLINK"
        ]
        need = max(others, default=0) + 3
        return [f"host.link_bytes_per_cycle={hw.organization.burst_bytes / need!r}"]
    pair = (row["prev"], row["next"], row["latency"])
    own = [(r["prev"], r["next"], r["latency"]) for r in _device_rows(hw.name)]
    if pair[:2] == ("WR", "RDACC") and "tWTR_S" in pair[2] and ("WR", "RDACC", "CWL + BL2 + tWTR_L") in own:
        return ["timing.params.tWTR_L=" + str(p["tWTR_S"])]  # gddr6-aim's own row, channel-wide
    if pair in (("MAC", "RDACC", "tCCD_L"), ("MAC", "RDACC", "tCCD_S")):
        return ["timing.params.tMACL=1"]
    if pair == ("MAC", "MAC", "tCCD_S"):
        return ["timing.params.tMAC=1"]
    if pair == ("ACT", "MAC", "tRCDRD") and p["tRCDMAC"] > p["tRCDRD"]:
        return [f"timing.params.tRCDMAC={p['tRCDRD']}"]
    if row["prev"] == row["next"] == "ACT" and row["scope"] == "channel":  # the row bus: tRRD out of its way
        return ["timing.params.tRRD_S=1", "timing.params.tRRD_L=1"]
    if (row["prev"], row["next"], row["scope"]) in (("ACT", "ACT", "bank"), ("ACT", "REF", "rank")) and p["tRAS"] + p[
        "tRP"
    ] > p["tRC"]:
        return [f"timing.params.tRAS={p['tRC'] - p['tRP']}"]
    if row.get("window"):
        other = _fifth_without_window(hw)
        if p["tFAW"] < other:
            return [f"timing.params.tFAW={other + 3}"]
    return []


def _spacing(hw):
    """ACT spacing of the window scenario: groups alternate, so tRRD_S (tRRD_L with one group)."""
    p = hw.timing.params
    return p["tRRD_S"] if hw.organization.bank_groups > 1 else max(p["tRRD_L"], p["tRRD_S"])


def _fifth_without_window(hw):
    """Earliest gap (from the first ACT) of the fifth ACT by every row but the window:
    tRRD_S after the fourth, tRRD_L after an earlier ACT of its bank group, and - when it re-opens
    the first bank - tRC after that ACT and tRP after the PRE issued at tRAS."""
    p, org = hw.timing.params, hw.organization
    order, d = _window_order(hw), _spacing(hw)
    g = [org.bank_group_of(b) for b in order]
    need = 3 * d + p["tRRD_S"]
    need = max([need] + [i * d + p["tRRD_L"] for i in range(4) if g[i] == g[4]])
    if order[4] == order[0]:
        need = max(need, p["tRC"], p["tRAS"] + p["tRP"])
    return need


def _symbols(hw):
    return ["t"]


def _device_rows(preset: str) -> list[dict]:
    """A preset's own rows (timing.device_rows), after the family's."""
    import yaml

    from hwmodel.loader import resolve_source

    return (yaml.safe_load(resolve_source(preset).read_text()).get("timing") or {}).get("device_rows") or []


CASES = [(preset, ROWS[k]) for preset in PRESETS for k in range(len(ROWS))]
CASES += [(preset, row) for preset in PRESETS for row in _device_rows(preset)]


def _id(case):
    preset, r = case
    return f"{preset}-{r['prev']}->{r['next']}-{r['scope']}" + ("-window" if r.get("window") else "")


@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_row_exact_gap(case):
    preset, row = case
    base = load_hardware(preset, ["organization.channels=1"])
    hw = load_hardware(preset, ["organization.channels=1"] + _overrides(base, row))
    same = [
        c
        for c in hw.timing.constraints
        if (c.prev, c.next, c.scope, c.latency, c.window, c.when)
        == (row["prev"], row["next"], row["scope"], row["latency"], row.get("window"), row.get("when"))
    ]
    if row.get("when") not in (None, hw.pim.gb_write_path):
        assert not same, f"a row for pim.gb_write_path={row['when']} on a {hw.pim.gb_write_path} device"
        return
    cons = same[0]
    gap = hw.timing.latency_of(cons)
    if gap == 0:  # gddr6-aim's RDACC->WR (nCLREG + nBL + 3 - nCWL + nWPRE = 0): one command per cycle rules
        assert (row["prev"], row["next"], preset) == ("RDACC", "WR", "gddr6-aim")
        return
    name = constraint_name(cons)
    ok = simulate(hw, streams(hw, _scenario(hw, row, gap), symbols=_symbols(hw)), functional=False)
    assert ok.cycles > T0
    with pytest.raises(SimulationError) as e:
        simulate(hw, streams(hw, _scenario(hw, row, gap - 1), symbols=_symbols(hw)), functional=False)
    err = e.value
    if gap <= 1:  # one command per cycle on the bus binds first (gddr6-aim's single-cycle ACT)
        assert err.kind == "bus", str(err)
        return
    assert err.kind == "timing", str(err)
    assert name in err.violated, str(err)
    assert err.cycle == T0 + gap - 1
    assert err.stream == 0
    assert err.needed == gap and err.actual == gap - 1 if err.constraint == name else True
    assert err.constraint in str(err)
