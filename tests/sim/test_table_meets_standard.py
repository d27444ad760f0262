"""Our timing table against the standard's rule list, rule by rule, without a program: every
timing rule of the standard a preset is checked against (sim.stdcheck's rule lists, written from
Ramulator 2.1 and the AiM simulator, never from our table) is implied by a row of our table on
that preset, also under each single override the what-if fuzz draws: a row for the same two
commands, no window, a scope that holds the rule's and a latency at least the rule's. A rule our
table does not imply is a program our simulator would accept and the standard refuse; the fuzz
found three such holes by their programs (docs/results.md, "Random what-ifs against the
standard's rule list"), this finds them by the rows. Not rows and not checked here: the refresh
counts (owed, pulled in, interval) and the pseudo-channel pair rules, which the simulator and the
checker each count on their own (tests/sim/test_per_bank_refresh.py, test_shared_bus.py)."""

from __future__ import annotations

import sys
from dataclasses import replace
from itertools import product
from pathlib import Path

import pytest

from hwmodel import load_hardware
from hwmodel.model import COMMANDS
from sim.stdcheck import resolved_rules

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from whatif_fuzz import OVERRIDES, PRESETS  # noqa: E402

WIDTH = {"bank": 0, "bank_group": 1, "rank": 2, "channel": 3}
# every override the fuzz draws that moves a latency: timing parameters, the link (tLINK) and the
# write path (which rows hold). The HBM-PIM presets keep their MAC/RDACC column-read rows under a
# dedicated buffer write path as device rows (the family ties them to the data-bus path).
TIMING = [o for o in OVERRIDES if o.startswith(("timing.params.", "host.link_bytes_per_cycle=", "pim.gb_write_path="))]


def _width(hw, scope: str) -> int:
    """A rank is the whole channel on a one-rank device."""
    w = WIDTH[scope]
    return WIDTH["channel"] if w == WIDTH["rank"] and hw.organization.ranks == 1 else w


def _row_width(hw, c) -> int:
    """How much of the channel a row of ours covers: its scope, but a WRGB touches every bank
    group and rank (sim/timing.py), so a row naming it holds channel-wide from the bank group up."""
    w = _width(hw, c.scope)
    return WIDTH["channel"] if "WRGB" in (c.prev, c.next) and w >= WIDTH["bank_group"] else w


def unmet(hw) -> list[str]:
    """The standard's rules no row of our table implies on `hw`. A rule whose command on either
    side names every bank (PREA, ACT16, MAC16) meets every bank of the other's, so a row of ours
    in the bank implies it."""
    rows = [(c.prev, c.next, _row_width(hw, c), hw.timing.latency_of(c), c.window or 1) for c in hw.timing.constraints]
    out = []
    for r in resolved_rules(hw):
        if r.latency <= 1:
            continue  # one command per cycle: the bus rule
        if r.name == "ACT 2-cycle row command" and r.scope == "channel":
            # ... to a REF as well: our REF needs every bank of the channel precharged, so an ACT
            # is followed by its PRE (tRAS) and tRP before any REF, far beyond the 2 cycles
            r = replace(r, next=tuple(s for s in r.next if COMMANDS.index("REF") not in s[0]))
        for (prev_cmds, prev_all), (next_cmds, next_all) in product(r.prev, r.next):
            need = WIDTH["bank"] if prev_all or next_all else _width(hw, r.scope)
            for a, b in product((COMMANDS[p] for p in prev_cmds), [COMMANDS[n] for n in next_cmds]):
                if "WRGB" in (a, b) and need <= WIDTH["bank_group"]:
                    continue  # the checker's WRGB names no bank: such a rule never holds for it
                if not any(
                    (q[0], q[1]) == (a, b) and q[2] >= need and q[3] >= r.latency and q[4] == r.window for q in rows
                ):
                    out.append(f"{a} -> {b} {r.scope} >= {r.latency} ({r.name}: {r.text})")
    return sorted(set(out))


@pytest.mark.parametrize("override", [None, *TIMING])
@pytest.mark.parametrize("preset", PRESETS)
def test_every_rule_of_the_standard_is_a_row_of_the_table(preset, override):
    """(gddr6-aim meets the AiM model's own rules through its device rows: read-to-precharge in
    the bank group, WR -> RD_MAC nWTRL channel-wide.)"""
    hw = load_hardware(preset, [override] if override else [])
    assert unmet(hw) == []


@pytest.mark.parametrize(
    "preset, override, rows, found",
    [
        ("gddr6-aim", None, [("ACT", "REF", "rank")], "ACT -> REF channel >= 89"),
        ("gddr6-aim", None, [("MAC", "PRE", "bank_group")], "MAC -> PRE bank_group >= 12"),
        ("hbm2-pim", "timing.params.tMACL=2", [("MAC", "RDACC", "bank_group")], "MAC -> RDACC bank_group >= 4"),
        ("hbm2-pim", "timing.params.tRCDRD=30", [("ACT", "MAC", "bank")], "ACT -> MAC bank >= 30"),
        ("hbm3-pim", None, [("RD", "WR", "channel")], "RD -> WR channel >= 17"),
    ],
)
def test_a_missing_row_is_found(preset, override, rows, found):
    """The test is not blind: with a row the fuzz or this test found missing left out again (the
    device's own row of that pair kept), the standard's rule is reported unmet."""
    hw = load_hardware(preset, [override] if override else [])
    keep = [
        c for c in hw.timing.constraints if (c.prev, c.next, c.scope) not in rows or c.latency in ("tRCDMAC", "tMACL")
    ]
    cut = hw.model_copy(update={"timing": hw.timing.model_copy(update={"constraints": keep})})
    assert any(u.startswith(found) for u in unmet(cut)), unmet(cut)
