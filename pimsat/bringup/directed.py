"""Directed bring-up tests (testgen.py describes the container program they run on):

instr-*   one per instruction and mode: single bank and all-bank masks, each field at its
          extremes (first / last row, column, global-buffer burst, accumulator, PIM unit; one
          lane / every lane of the element mask; transfers that run past a tensor's end)
timing-*  one per row of the resolved timing table: `prev` stamped where nothing else binds,
          then `next` on a target in the row's scope (and outside narrower scopes where the
          bank layout allows), issued unstamped, so at exactly the legal gap; the gap the
          simulator measured and whether the row binds are in the manifest's `test`
tfaw      the four-activate window, with tFAW raised above tRC (at the preset's values four
          ACTs open every bank of a channel and the PRE needed before a fifth hides it)
refresh-deadline   REF #1 at the last cycle JEDEC allows ((postponed + 1) x tREFI - 1, at
          most max_refresh_interval x tREFI after the start), then the refreshes it owes
sync-channels      channel 1 waits for a signal of channel 0 (host <-> channel sync: every test)
"""

from __future__ import annotations

from hwmodel.isa import Instruction, make
from hwmodel.model import COMMANDS, Hardware

from .testgen import WHOST, YACC, GeneratedTest, GenKind, K, X, epilogue, prototype

START = 400  # where a timing test's `prev` is stamped: every setup command's rows have expired
ACT, PRE, RD, WR, REF, MAC, WRGB, RDACC, REFSB = range(9)
OPEN_NEEDED = (RD, WR, MAC, PRE)


def _case(name: str, hw: Hardware, ch0: list[Instruction], exercises: dict, ch1=None) -> GeneratedTest:
    nb = hw.organization.banks_per_channel
    streams = [ch0, ch1 or []]
    for ch, s in enumerate(streams):
        if s:
            epilogue(hw, s, _open_rows(s, nb), ch)
    return GeneratedTest(name, GenKind.DIRECTED, hw, streams, 0, exercises)


def _open_rows(stream: list[Instruction], nb: int) -> list[int]:
    rows = [-1] * nb
    for i in stream:
        if i.op in ("ACT", "PRE"):
            for b in range(nb):
                if (i.get("mask") >> b) & 1:
                    rows[b] = i.get("row") if i.op == "ACT" else -1
        elif i.op == "REF":
            rows = [-1] * nb
    return rows


def instruction_cases(hw: Hardware) -> list[GeneratedTest]:
    org = hw.organization
    rows, cols, ngb, nacc, bpp = org.rows, org.columns, hw.gb_bursts, hw.pim.acc_registers, hw.pim.banks_per_pu
    allb, e, size = (1 << org.banks_per_channel) - 1, hw.elements_per_burst, nacc * K
    gb_all = make("WRGB", gb=0, count=ngb, src=X, offset=0)
    act0 = make("ACT", mask=allb, row=0)

    def rd(**f):
        return [act0, make("RD", **{"bank": 0, "col": 0, "count": 1, "dst": WHOST, "offset": 0, **f})]

    def wr(**f):
        return [act0, make("WR", **{"bank": 3, "col": 0, "count": 1, "src": X, "offset": 0, "emask": 0xFFFF, **f})]

    def mac(**f):
        return [gb_all, act0, make("MAC", **{"mask": 1, "col": 0, "count": 1, "gb": 0, "acc": 0, **f})]

    def rdacc(**f):
        return [*mac(mask=0b0101, count=cols, acc=nacc - 1), *mac(mask=0b1010, acc=0)[2:]] + [
            make("RDACC", **{"bank": 0, "acc": 0, "count": 1, "dst": YACC, "offset": 0, "stride": 1, **f})
        ]

    cases = {
        "act-single-row0": [make("ACT", mask=1, row=0)],
        "act-single-lastrow": [make("ACT", mask=1 << (org.banks_per_channel - 1), row=rows - 1)],
        "act-allbank": [make("ACT", mask=allb, row=rows // 2), make("PRE", mask=allb)],
        "pre-single": [act0, make("PRE", mask=0b0100)],
        "rd-first": rd(),
        "rd-full-row": rd(count=cols),
        "rd-last-col": rd(bank=3, col=cols - 1, offset=size - e),
        "rd-past-end": rd(col=cols - 2, count=2, offset=size - 1),
        "wr-full-row": wr(count=cols),
        "wr-lane0": wr(emask=0x0001, offset=K - 1),
        "wr-lane15": wr(emask=1 << (e - 1), col=cols - 1),
        "wr-alternate-lanes": wr(emask=0xAAAA, count=cols, offset=K - 8 * (e // 2)),
        "wr-past-end": wr(count=2, offset=K - 1),
        "mac-single-bank": mac(),
        "mac-allbank-even": mac(mask=0b0101, count=cols),
        "mac-allbank-odd": mac(mask=0b1010, col=cols - 1, gb=ngb - 1, acc=nacc - 1),
        "mac-sweep": mac(mask=0b1001, count=min(cols, ngb), acc=3),
        "wrgb-full": [gb_all],
        "wrgb-last": [make("WRGB", gb=ngb - 1, count=1, src=X, offset=K - e)],
        "wrgb-past-end": [
            make("WRGB", gb=2, count=2, src=X, offset=K - 1),
            act0,
            make("MAC", mask=1, col=0, count=2, gb=2, acc=5),
        ],
        "rdacc-one": rdacc(acc=nacc - 1, offset=nacc - 1),
        "rdacc-all": rdacc(count=nacc),
        "rdacc-sum": rdacc(count=nacc, stride=0, offset=3),
        "rdacc-last-unit": rdacc(bank=(org.banks_per_channel // bpp - 1) * bpp, count=nacc),
        "ref": [make("REF")],
    }
    out = [_case(f"instr-{name}", hw, body, {"instruction": name}) for name, body in cases.items()]
    ch1 = [make("WAIT", id=10), make("ACT", mask=1, row=1), gb_all, make("MAC", mask=1, col=0, count=cols, gb=0, acc=0)]
    out.append(
        _case("sync-channels", hw, [gb_all, act0, make("SIG", id=10)], {"sync": "channel 1 waits for channel 0"}, ch1)
    )
    return out


def _banks(hw: Hardware, p: int, n: int, scope: int) -> tuple[int, int]:
    """(prev bank, next bank): in the row's scope unit, outside the narrower ones where possible;
    RDACC names the first bank of its PIM unit."""
    org, bpp = hw.organization, hw.pim.banks_per_pu
    nb = org.banks_per_channel
    ok = lambda b, c: c != RDACC or b % bpp == 0  # noqa: E731
    group = org.bank_group_of
    ranked = []
    for a in range(nb):
        for b in range(nb):
            if not (ok(a, p) and ok(b, n)):
                continue
            same_bank, same_group = a == b, group(a) == group(b)
            if scope == 0:
                score = 0 if same_bank else 9
            elif scope == 1:
                score = 0 if same_group and not same_bank else 1 if same_bank else 9
            else:
                score = 0 if not same_group else 1 if not same_bank else 2
            ranked.append((score, a, b))
    _, a, b = min(ranked)
    return a, b


def _cmd(hw: Hardware, c: int, bank: int, cycle: int | None = None) -> Instruction:
    name = COMMANDS[c]
    f = {
        "ACT": dict(mask=1 << bank, row=1),
        "PRE": dict(mask=1 << bank),
        "RD": dict(bank=bank, col=0, count=1, dst=WHOST, offset=0),
        "WR": dict(bank=bank, col=1, count=1, src=X, offset=0, emask=0xFFFF),
        "REF": {},
        "MAC": dict(mask=1 << bank, col=0, count=1, gb=0, acc=1),
        "WRGB": dict(gb=1, count=1, src=X, offset=16),
        "RDACC": dict(bank=bank, acc=0, count=1, dst=YACC, offset=0, stride=1),
        "REFSB": dict(bank=bank),
    }[name]
    return make(name, cycle=cycle, **f)


def timing_case(hw: Hardware, k: int, tables) -> GeneratedTest | None:
    p, n, scope = int(tables.prev[k]), int(tables.nxt[k]), int(tables.scope[k])
    if tables.win[k]:
        return None  # window rows: tfaw_case
    if REFSB in (p, n) and hw.timing.refresh_mode != "per_bank":
        return None  # per-bank refresh rows: the prototype (and the RTL model) refresh all banks
    nb = hw.organization.banks_per_channel
    pb, xb = _banks(hw, p, n, scope)
    allb = (1 << nb) - 1
    setup: list[Instruction] = []
    if MAC in (p, n):
        setup.append(make("WRGB", gb=0, count=hw.gb_bursts, src=X, offset=0))
    open_before = 0
    if p in OPEN_NEEDED:
        open_before |= 1 << pb
    if n in OPEN_NEEDED and not (p == ACT and pb == xb):
        open_before |= 1 << xb
    if n == REF:
        open_before = allb if p == PRE else 0
    if open_before:
        setup.append(make("ACT", mask=open_before, row=1))
    prev = _cmd(hw, p, pb, START)
    if p == PRE and n == REF:
        prev = make("PRE", cycle=START, mask=allb)
    body = [*setup, prev]
    if n == ACT and p == ACT and pb == xb:
        body.append(make("PRE", mask=1 << xb))  # the bank must close between its two activates
    if p == ACT and n == REF:
        body.append(make("PRE", mask=1 << pb))  # a REF needs every bank precharged
        # ... and tRAS + tRP = tRC on the prototype: PRE -> REF tRP would bind in the same cycle;
        # a shorter tRAS leaves tRC the one row that binds
        t = hw.timing
        hw = prototype([f"timing.params.tRAS={t.p('tRC') - t.p('tRP') - 3}"])
    body.append(_cmd(hw, n, xb))
    name = tables.names[k]
    slug = name.replace("->", "-").replace(" + ", "+").replace(" - ", "-").replace(" ", "_")
    pair = {"prev_instr": len(setup), "next_instr": len(body) - 1}
    return _case(f"timing-{k:02d}-{slug}", hw, body, {"row": name, "latency": int(tables.lat[k]), **pair})


def tfaw_case() -> GeneratedTest:
    hw = prototype(["timing.params.tFAW=60"])
    body = [make("ACT", mask=1 << b, row=b) for b in range(hw.organization.banks_per_channel)]
    body += [make("PRE", mask=1), make("ACT", mask=1, row=9)]
    pair = {"prev_instr": 0, "next_instr": len(body) - 1}
    return _case("timing-tfaw-window", hw, body, {"row": "ACT->ACT rank tFAW (window 4)", "latency": 60, **pair})


def refresh_case() -> GeneratedTest:
    hw = prototype(["timing.params.tREFI=1000", "timing.params.tRFC=10"])
    t = hw.timing
    deadline = min(t.max_postponed_refresh + 1, t.max_refresh_interval) * t.p("tREFI") - 1
    body = [make("REF", cycle=deadline)] + [make("REF") for _ in range(t.max_postponed_refresh)]
    return _case("refresh-deadline", hw, body, {"refresh": f"REF #1 at cycle {deadline}"}, list(body))


def directed_cases() -> list[GeneratedTest]:
    from sim.timing import compile_tables

    hw = prototype()
    tables = compile_tables(hw)
    timing = [c for k in range(tables.rows) if (c := timing_case(hw, k, tables)) is not None]
    cases = instruction_cases(hw) + timing + [tfaw_case(), refresh_case()]
    for c in cases:
        if "prev_instr" in c.exercises:
            measure_gap(c)
    return cases


def measure_gap(case: GeneratedTest) -> None:
    """The simulator's gap between the timing test's two commands, and whether its row binds."""
    import sim

    c = case.compiled()
    issue = sim.simulate(case.hw, c.streams, program=c.program, functional=False, record=True).times(0).issue
    x = case.exercises
    x["gap"] = int(issue[x["next_instr"]] - issue[x["prev_instr"]])
    x["binds"] = x["gap"] == x["latency"]
