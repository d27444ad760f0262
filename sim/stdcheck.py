"""A second, independent timing checker of simulator command logs, written from public DRAM
standards (as encoded in Ramulator 2.1's device models) rather than the project's timing table.

The rules are data: hwmodel/standards/<standard>.yaml (hbm2, gddr6, gddr6_aim, aim_model). This module
never reads hwmodel/presets/_timing_table.yaml nor `hw.timing.constraints`; from the hardware
it takes only the organization, the name (to pick a standard) and, by default, the preset's
parameter VALUES mapped to the standard's names (presets such as fpga-proto are scaled, so the
standard's own cycle counts would not apply); `CheckOptions(values="standard")` uses the
standard's preset values instead (to catch a preset whose values differ from the standard).

Semantics of a rule {prev, next, scope, latency, window}: a command matching `next` that
shares a scope unit (bank / bank group / rank / channel) with an earlier command matching
`prev` must issue at least `latency` cycles after it; with window = N, after the N-th most
recent such `prev`. "Earlier" is log order within a channel (the log lists a channel's
commands in issue order), so two commands in one cycle are a pair with gap 0. A multi-bank
command (all-bank MAC, masked ACT/PRE) touches every bank of its mask; WRGB touches no bank
but every rank of its channel.

Refresh (JEDEC): per channel and bank, refreshes due every tREFI from cycle 0 (a REF refreshes
every bank of its rank, a per-bank REFSB its own bank; without REFSBs this is the per-rank count
of REFs); at most 8 owed, at most 8 pulled in, at most 9 x tREFI between two refreshes (and from
cycle 0 to the first), and no command but the allowed ones to the rank during tRFC after a REF.

Usage: check_log(result.log, hw) -> list[Violation];  python -m sim.stdcheck INSTANCE.yaml
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import numpy as np
import yaml

from hwmodel.model import COMMANDS

STANDARDS_DIR = Path(__file__).resolve().parents[1] / "hwmodel" / "standards"
_CMD = {name: i for i, name in enumerate(COMMANDS)}
_TOKEN = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*|\d+|[+-])")


@dataclass(frozen=True)
class Violation:
    cycle: int  # cycle of the offending (later) command
    channel: int
    bank: int  # the bank (bank-scope rules) or the log row's bank field (-1: multi-bank)
    command: str  # the offending command (ours)
    rule: str  # rule name, e.g. "nCCDL RD->RD"
    text: str  # the rule in full: "RD,RDA -> RD,RDA same bank_group >= nCCDL"
    source: str
    needed: int  # cycles the rule needs
    actual: int  # cycles there were (-1 where not a gap, e.g. a count)
    prev_cycle: int = -1  # the earlier command's cycle, where there is one


@dataclass
class CheckOptions:
    values: str = "preset"  # "preset": hw.timing.params mapped; "standard": the standard's values
    dedicated_gb_path: bool | None = None  # AiM option: WRGB is no WR (None: hw.pim.gb_write_path or the standard's)
    refresh: bool = True
    params: dict[str, int] = field(default_factory=dict)  # overrides, by the standard's names
    # our commands that never touch the DRAM array (only the data bus): they take part only in
    # rules between column commands (RD/WR). The standard lists WRGB; add "RDACC" to treat the
    # accumulator read the same way (then no RD->PRE / RD->PREA tRTP after RDACC).
    array_free: tuple[str, ...] = ()
    # pseudo-channel mode: channels 2k and 2k+1 share the command buses (the standard's
    # pseudo_channel_pairs rules); None: as the hardware says (organization.command_bus)
    pseudo_channel_pairs: bool | None = None


# --- standards -------------------------------------------------------------------------------
@cache
def load_standard(name: str) -> dict:
    data = yaml.safe_load((STANDARDS_DIR / f"{name}.yaml").read_text())
    if "base" in data:
        base = dict(load_standard(data["base"]))
        base["options"] = {**base.get("options", {}), **data.get("options", {})}
        base["standard"] = data["standard"]
        base["source"] = data.get("source", base["source"])
        return base
    return data


def standard_for(hw) -> str:
    """hbm2-pim, fpga-proto -> hbm2; gddr6-aim -> aim_model (the AiM simulator's own rules; the
    JEDEC GDDR6 rules with the AiM option are `gddr6_aim`); hbm3-pim -> hbm2 (HBM2's rule
    structure with the preset's own values: an approximation, HBM3 is not in these files)."""
    name = hw.name.lower()
    if name.startswith("gddr6"):
        return "aim_model" if "aim" in name else "gddr6"
    if name.startswith(("hbm2", "hbm3", "fpga")):
        return "hbm2"
    raise ValueError(f"no standard known for hardware {hw.name!r}: pass standard='hbm2' or 'gddr6'")


def evaluate(expr: str | int, values: dict[str, int]) -> int:
    if isinstance(expr, int):
        return expr
    total, sign, pos, expect_term = 0, 1, 0, True
    text = str(expr)
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            raise ValueError(f"cannot parse latency {expr!r}")
        tok, pos = m.group(1), m.end()
        if tok in "+-":
            sign = -1 if tok == "-" else 1
            expect_term = True
            continue
        if not expect_term:
            raise ValueError(f"cannot parse latency {expr!r}")
        if tok.isdigit():
            v = int(tok)
        elif tok in values:
            v = int(values[tok])
        else:
            raise KeyError(f"latency {expr!r}: no value for parameter {tok!r}")
        total += sign * v
        sign, expect_term = 1, False
        if pos < len(text) and not text[pos:].strip():
            break
    return total


def parameter_values(hw, std: dict, opts: CheckOptions) -> dict[str, int]:
    values = dict(std.get("standard_values", {}))
    if opts.values == "preset":
        params = hw.timing.params
        for ours_name, theirs in std.get("param_map", {}).items():
            if theirs in params:
                values[ours_name] = int(params[theirs])
    elif opts.values != "standard":
        raise ValueError(f"values must be 'preset' or 'standard', not {opts.values!r}")
    values.update(opts.params)
    return values


# --- the log ---------------------------------------------------------------------------------
class _Channel:
    """One channel's commands in log order, with the scope units each row touches."""

    def __init__(self, rows: np.ndarray, org):
        self.rows = rows
        self.cycle = rows["cycle"].astype(np.int64)
        self.cmd = rows["command"].astype(np.int64)
        bank = rows["bank"].astype(np.int64)
        mask = rows["mask"].astype(np.uint64)
        single = (mask == 0) & (bank >= 0)
        mask = np.where(single, np.left_shift(np.uint64(1), np.maximum(bank, 0).astype(np.uint64)), mask)
        self.mask = mask
        nb, bpg, bpr = org.banks_per_channel, org.banks_per_group, org.banks_per_rank
        self.n_banks = nb
        self.bank_touch = [(mask >> np.uint64(b)) & np.uint64(1) == 1 for b in range(nb)]
        self.group_touch = []
        for g in range(nb // bpg):
            gm = np.uint64(((1 << bpg) - 1) << (g * bpg))
            self.group_touch.append((mask & gm) != 0)
        no_bank = mask == 0  # WRGB: channel-wide, every rank
        self.rank_masks = [np.uint64(((1 << bpr) - 1) << (r * bpr)) for r in range(org.ranks)]
        self.rank_touch = [((mask & rm) != 0) | no_bank for rm in self.rank_masks]
        # PREA: a PRE covering every bank of every rank it touches
        full = np.ones(len(rows), dtype=bool)
        for rm, touch in zip(self.rank_masks, self.rank_touch):
            full &= ~touch | ((mask & rm) == rm)
        self.all_banks = full & ~no_bank
        self.units = {
            "bank": self.bank_touch,
            "bank_group": self.group_touch,
            "rank": self.rank_touch,
            "channel": [np.ones(len(rows), dtype=bool)],
        }


_COLUMN = ("RD", "RDA", "WR", "WRA")


def _selector(names: list[str], other: list[str], std: dict, wrgb_is_wr: bool, array_free: set[str]):
    """Ramulator command names -> (our command indices, needs-all-banks) list. Array-free
    commands count only where the rule's other side is column commands alone."""
    column_pair = all(n in _COLUMN for n in other)
    out = []
    for n in names:
        spec = std["commands"].get(n)
        if spec is None:
            raise KeyError(f"rule names unknown command {n!r}")
        # WRGB counts as a WR only where the standard maps it into WR (a standard may name it itself)
        keep_wrgb = wrgb_is_wr or n == "WRGB"
        ours = [c for c in spec["our"] if (keep_wrgb or c != "WRGB") and (column_pair or c not in array_free)]
        if ours:
            out.append((tuple(_CMD[c] for c in ours), spec.get("mask") == "all"))
    return out


def _select(ch: _Channel, sel) -> np.ndarray:
    ok = np.zeros(len(ch.cmd), dtype=bool)
    for cmds, need_all in sel:
        m = np.isin(ch.cmd, cmds)
        if need_all:
            m &= ch.all_banks
        ok |= m
    return ok


def _pairs(ch: _Channel, prev_ok, next_ok, scope: str, latency: int, window: int):
    """(next row, prev row, unit) triples violating `latency`: per unit, each next row against
    the window-th most recent earlier prev row touching that unit."""
    found = []
    for u, touch in enumerate(ch.units[scope]):
        p = np.flatnonzero(prev_ok & touch)
        if len(p) < window:
            continue
        n = np.flatnonzero(next_ok & touch)
        if not len(n):
            continue
        k = np.searchsorted(p, n, side="left") - window
        good = k >= 0
        n, k = n[good], k[good]
        pi = p[k]
        gap = ch.cycle[n] - ch.cycle[pi]
        bad = gap < latency
        if bad.any():
            found.append((n[bad], pi[bad], np.full(int(bad.sum()), u)))
    if not found:
        return None
    return tuple(np.concatenate(x) for x in zip(*found))


def _emit(out: list, ch: _Channel, channel: int, hit, scope: str, name: str, text: str, source: str, latency: int):
    n, pi, unit = hit
    order = np.lexsort((ch.cycle[n] - ch.cycle[pi], n))  # per row, smallest gap first
    n, pi, unit = n[order], pi[order], unit[order]
    first = np.ones(len(n), dtype=bool)
    first[1:] = n[1:] != n[:-1]
    for j, i, u in zip(n[first], pi[first], unit[first]):
        bank = int(u) if scope == "bank" else int(ch.rows["bank"][j])
        out.append(
            Violation(
                int(ch.cycle[j]),
                channel,
                bank,
                COMMANDS[int(ch.cmd[j])],
                name,
                text,
                source,
                latency,
                int(ch.cycle[j] - ch.cycle[i]),
                int(ch.cycle[i]),
            )
        )


def _refresh(out: list, ch: _Channel, channel: int, ref: dict, values: dict, allowed: list[str], end: int):
    src = ref["source"]
    trefi, trfc = evaluate(ref["tREFI"], values), evaluate(ref["tRFC"], values)
    max_owed, max_pulled, max_int = ref["max_postponed"], ref["max_pulled_in"], ref["max_interval_trefi"]
    is_ref = ch.cmd == _CMD["REF"]
    # nothing but the allowed commands to a rank during tRFC after a REF
    others = ~np.isin(ch.cmd, [_CMD[c] for c in allowed])
    hit = _pairs(ch, is_ref, others, "rank", trfc, 1)
    if hit is not None:
        _emit(
            out,
            ch,
            channel,
            hit,
            "rank",
            "command during tRFC",
            f"REF -> any command but {allowed or 'none'} same rank >= tRFC",
            src,
            trfc,
        )
    is_refsb = ch.cmd == _CMD["REFSB"]
    bpr = ch.n_banks // len(ch.rank_touch)
    per_bank = bool(is_refsb.any())
    # without REFSBs every bank of a rank has its rank's REFs: one pass per rank suffices
    units = range(ch.n_banks) if per_bank else range(0, ch.n_banks, bpr)
    for b in units:
        refs = ch.cycle[(is_ref & ch.rank_touch[b // bpr]) | (is_refsb & ch.bank_touch[b])]
        bank = b if per_bank else -1
        # interval: from cycle 0 to the first REF and between two REFs
        starts = np.concatenate(([0], refs))
        if len(refs) == 0:
            gaps, at, prevs = np.array([end]), np.array([end]), np.array([0])
        else:
            gaps, at, prevs = np.diff(starts), refs, starts[:-1]
        for g, t, p in zip(gaps, at, prevs):
            if g > max_int * trefi:
                out.append(
                    Violation(
                        int(t),
                        channel,
                        bank,
                        "REF",
                        "REF interval",
                        f"at most {max_int} x tREFI between two REFs (and from the start)",
                        src,
                        max_int * trefi,
                        int(g),
                        int(p),
                    )
                )
        # owed (postponed) and pulled in, with pulled-in credit capped
        issued = 0
        for t in refs:
            due = (int(t) - 1) // trefi if t > 0 else 0  # REFs due strictly before t
            if due - issued > max_owed:
                out.append(
                    Violation(
                        int(t),
                        channel,
                        bank,
                        "REF",
                        "REF postponed",
                        f"at most {max_owed} REFs owed",
                        src,
                        max_owed,
                        due - issued,
                    )
                )
            issued += 1
            due = int(t) // trefi  # REFs due up to t
            if issued - due > max_pulled:
                out.append(
                    Violation(
                        int(t),
                        channel,
                        bank,
                        "REF",
                        "REF pulled in",
                        f"at most {max_pulled} REFs pulled in",
                        src,
                        max_pulled,
                        issued - due,
                    )
                )
                issued = due + max_pulled
        due = (int(end) - 1) // trefi if end > 0 else 0
        if due - issued > max_owed:
            out.append(
                Violation(
                    int(end),
                    channel,
                    bank,
                    "-",
                    "REF postponed",
                    f"at most {max_owed} REFs owed (at the end of the log)",
                    src,
                    max_owed,
                    due - issued,
                )
            )


@dataclass(frozen=True)
class Rule:
    """One rule of a standard on a device: our commands on each side (indices into COMMANDS, and
    whether the command must name every bank: a PREA), its scope, its latency in cycles."""

    name: str
    prev: tuple[tuple[tuple[int, ...], bool], ...]
    next: tuple[tuple[tuple[int, ...], bool], ...]
    scope: str
    latency: int
    window: int
    text: str
    source: str


def resolved_rules(hw, standard: str | None = None, options: CheckOptions | None = None) -> list[Rule]:
    """The standard's timing rules as check_log applies them to `hw`'s logs: mapped to our
    commands (rules whose commands we never issue left out), latencies evaluated with the
    preset's values (or the standard's)."""
    return _setup(hw, standard, options)[0]


def _setup(hw, standard: str | None, options: CheckOptions | None):
    opts = options or CheckOptions()
    std = load_standard(standard or standard_for(hw))
    values = parameter_values(hw, std, opts)
    # the write path is a documented hardware option (pim.gb_write_path), not a timing-table row
    # the hardware's own option (pim.gb_write_path), or a standard that is defined with it (gddr6_aim)
    gb_path = (
        (
            getattr(getattr(hw, "pim", None), "gb_write_path", None) == "dedicated"
            or bool(std.get("options", {}).get("dedicated_gb_path", False))
        )
        if opts.dedicated_gb_path is None
        else opts.dedicated_gb_path
    )
    array_free = set(std.get("array_free", [])) | set(opts.array_free)
    rules = []
    for r in std["rules"]:
        if r.get("disabled"):
            continue
        prev = _selector(r["prev"], r["next"], std, not gb_path, array_free)
        nxt = _selector(r["next"], r["prev"], std, not gb_path, array_free)
        if not prev or not nxt:
            continue  # RDA / WRA / REFsb: no counterpart
        text = f"{','.join(r['prev'])} -> {','.join(r['next'])} same {r['scope']} >= {r['latency']}" + (
            f" (window {r['window']})" if r.get("window") else ""
        )
        rules.append(
            Rule(
                r["name"],
                tuple(prev),
                tuple(nxt),
                r["scope"],
                evaluate(r["latency"], values),
                int(r.get("window") or 1),
                text,
                r["source"],
            )
        )
    ref = std.get("refresh")
    allowed = list(ref.get("allowed_during_rfc", [])) if ref else []
    if ref and gb_path:
        allowed += ref.get("allowed_during_rfc_with_dedicated_gb_path", [])
    return rules, std, values, opts, ref, allowed


def check_log(log: np.ndarray, hw, standard: str | None = None, options: CheckOptions | None = None) -> list[Violation]:
    """Every violation of the standard's rules in a command log (sim.result.LOG_DTYPE)."""
    rules, std, values, opts, ref, allowed = _setup(hw, standard, options)
    out: list[Violation] = []
    if len(log) == 0:
        return out
    order = np.lexsort((np.arange(len(log)), log["channel"]))  # stable: channel, then log order
    log = log[order]
    end = int(log["cycle"].max())
    bounds = np.flatnonzero(np.diff(log["channel"])) + 1
    for rows in np.split(log, bounds):
        channel = int(rows["channel"][0])
        if np.any(np.diff(rows["cycle"]) < 0):
            rows = rows[np.argsort(rows["cycle"], kind="stable")]
        ch = _Channel(rows, hw.organization)
        cache: dict = {}
        for r in rules:
            kp, kn = repr(r.prev), repr(r.next)
            if kp not in cache:
                cache[kp] = _select(ch, r.prev)
            if kn not in cache:
                cache[kn] = _select(ch, r.next)
            hit = _pairs(ch, cache[kp], cache[kn], r.scope, r.latency, r.window)
            if hit is not None:
                _emit(out, ch, channel, hit, r.scope, r.name, r.text, r.source, r.latency)
        if ref and opts.refresh:
            _refresh(out, ch, channel, ref, values, allowed, end)
    pcs = std.get("pseudo_channel_pairs")
    paired = (
        opts.pseudo_channel_pairs
        if opts.pseudo_channel_pairs is not None
        else getattr(getattr(hw, "organization", None), "command_bus", None) == "shared_pair"
    )
    if pcs and paired:
        _pair_rules(out, log, pcs, values)
    out.sort(key=lambda v: (v.cycle, v.channel, v.rule))
    return out


def _pair_rules(out: list, log: np.ndarray, pcs: dict, values: dict) -> None:
    """The standard's rules between the two pseudo-channels of a channel (our channels 2k and
    2k+1), both directions: a `next` command on one issues at least `latency` after the other's
    most recent `prev` command at or before its cycle."""
    src = pcs["source"]
    groups = {k: [_CMD[c] for c in v] for k, v in pcs["bus_commands"].items()}
    chans = np.unique(log["channel"])
    present = set(int(c) for c in chans)
    by = {int(c): log[log["channel"] == c] for c in chans}
    for a in sorted(present):
        if a % 2 or a + 1 not in present:
            continue
        for x, y in ((a, a + 1), (a + 1, a)):
            rx, ry = by[x], by[y]
            for r in pcs["rules"]:
                prev = groups[r["prev"]] if isinstance(r["prev"], str) else [_CMD[c] for c in r["prev"]]
                nxt = groups[r["next"]] if isinstance(r["next"], str) else [_CMD[c] for c in r["next"]]
                lat = evaluate(r["latency"], values)
                p_cyc = np.sort(ry["cycle"][np.isin(ry["command"], prev)].astype(np.int64))
                n_rows = rx[np.isin(rx["command"], nxt)]
                if not len(p_cyc) or not len(n_rows):
                    continue
                n_cyc = n_rows["cycle"].astype(np.int64)
                k = np.searchsorted(p_cyc, n_cyc, side="right") - 1
                ok = k >= 0
                gap = np.where(ok, n_cyc - p_cyc[np.maximum(k, 0)], lat)
                for j in np.flatnonzero(gap < lat):
                    pv = r["prev"] if isinstance(r["prev"], str) else ",".join(r["prev"])
                    nx = r["next"] if isinstance(r["next"], str) else ",".join(r["next"])
                    out.append(
                        Violation(
                            int(n_cyc[j]),
                            x,
                            int(n_rows["bank"][j]),
                            COMMANDS[int(n_rows["command"][j])],
                            r["name"],
                            f"{pv} -> {nx} other pseudo-channel >= {r['latency']} (channels {a}, {a + 1})",
                            r.get("source", src),
                            lat,
                            int(gap[j]),
                            int(p_cyc[k[j]]),
                        )
                    )


def summarize(violations: list[Violation]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for v in violations:
        counts[v.rule] = counts.get(v.rule, 0) + 1
    return dict(sorted(counts.items()))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m sim.stdcheck", description="check simulated command logs against the DRAM standard's rules"
    )
    ap.add_argument("instances", nargs="+", help="instance YAML files")
    ap.add_argument("--method", action="append", choices=["naive", "greedy", "cpsat"])
    ap.add_argument("--standard", default=None)
    ap.add_argument("--values", default="preset", choices=["preset", "standard"])
    ap.add_argument("--dedicated-gb-path", action="store_true", default=None)
    ap.add_argument("--time-limit", type=float, default=10.0)
    ap.add_argument("-v", "--verbose", action="store_true", help="list every violation")
    args = ap.parse_args(argv)
    from pimsat.instance import load_instance
    from pimsat.pipeline import SolveOptions, run

    bad = 0
    for path in args.instances:
        inst = load_instance(Path(path))
        for m in args.method or ["naive", "greedy", "cpsat"]:
            res = run(inst, SolveOptions(method=m, time_limit=args.time_limit, functional=False, record=True))
            vs = check_log(
                res.sim.log,
                res.hardware,
                args.standard,
                CheckOptions(values=args.values, dedicated_gb_path=args.dedicated_gb_path),
            )
            bad += bool(vs)
            print(f"{inst.name} {m}: {len(res.sim.log)} commands, {len(vs)} violations {summarize(vs)}")
            if args.verbose:
                for v in vs:
                    print("   ", v)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
