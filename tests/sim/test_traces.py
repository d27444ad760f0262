"""Trace exporters: command log CSV, Chrome/Perfetto JSON, VCD, summary -- on synthetic logs."""

from __future__ import annotations

import csv
import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = str(Path(__file__).resolve().parents[2])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from simgen import LOCKSTEP  # noqa: E402

import hwmodel  # noqa: E402
from hwmodel.model import COMMANDS  # noqa: E402
from sim import trace_chrome, trace_csv  # noqa: E402
from sim import traces as T  # noqa: E402

FULL = (1 << 16) - 1
EVEN = sum(1 << b for b in range(0, 16, 2))  # one bank per PIM unit (banks_per_pu = 2)


@pytest.fixture(scope="module")
def hw():
    return hwmodel.load_hardware("hbm2-pim", ["organization.channels=2", LOCKSTEP])


@pytest.fixture(scope="module")
def hw3():
    # 2 ranks x 4 bank groups x 4 banks, 1 bank per unit
    return hwmodel.load_hardware("hbm3-pim", ["organization.channels=3"])


def synthetic_log() -> np.ndarray:
    """ACT (all banks), WRGB, a 3-MAC sweep, a lone MAC, RDACC, PRE (all), REF on channel 0;
    ACT / RD / PRE on one bank of channel 1. Deliberately not in cycle order."""
    return T.command_log(
        [
            # cycle, channel, command, bank, mask, row, col, instr
            (1, 1, "ACT", 3, 0, 7, -1, 0),
            (15, 1, "RD", 3, 0, 7, 2, 1),
            (40, 1, "PRE", 3, 0, -1, -1, 2),
            (0, 0, "ACT", -1, FULL, 5, -1, 0),
            (5, 0, "WRGB", -1, 0, -1, 0, 1),
            (20, 0, "MAC", -1, EVEN, 5, 0, 2),
            (24, 0, "MAC", -1, EVEN, 5, 1, 2),
            (28, 0, "MAC", -1, EVEN, 5, 2, 2),
            (32, 0, "MAC", -1, EVEN, 5, 3, 3),
            (50, 0, "RDACC", 4, 0, -1, -1, 4),
            (60, 0, "PRE", -1, FULL, -1, -1, 5),
            (80, 0, "REF", -1, 0, -1, -1, 6),
        ]
    )


def reference_lines(log: np.ndarray, hw, ref_per_bank: bool = False) -> list[tuple[int, ...]]:
    """Plain-Python expansion of a log into CSV records (the specification of write_command_log)."""
    org = hw.organization
    bpr, bpg = org.banks_per_rank, org.banks_per_group
    out = []
    order = sorted(range(log.size), key=lambda i: (int(log["cycle"][i]), int(log["channel"][i])))
    for i in order:
        r = log[i]
        cyc, ch, cmd = int(r["cycle"]), int(r["channel"]), COMMANDS[int(r["command"])]
        bank, mask, row, col = int(r["bank"]), int(r["mask"]), int(r["row"]), int(r["col"])
        if bank >= 0:
            units = [(bank // bpr, (bank % bpr) // bpg, bank % bpg)]
        elif cmd == "REF" and not ref_per_bank:
            ranks = range(org.ranks) if mask == 0 else sorted({b // bpr for b in range(64) if mask >> b & 1})
            units = [(k, -1, -1) for k in ranks]
        else:
            if cmd == "REF" and mask == 0:
                mask = (1 << org.banks_per_channel) - 1
            banks = [b for b in range(64) if mask >> b & 1]
            units = [(b // bpr, (b % bpr) // bpg, b % bpg) for b in banks] or [(-1, -1, -1)]
        out += [(cyc, cmd, ch, *u, row, col) for u in units]
    return out


def read_csv(path) -> list[tuple]:
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0] == "cycle,command,channel,rank,bankgroup,bank,row,column".split(",")
    return [(int(a), b, *map(int, rest)) for a, b, *rest in rows[1:]]


def random_log(hw, n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    org = hw.organization
    log = np.zeros(n, dtype=T.COMMAND_LOG_DTYPE)
    log["cycle"] = np.sort(rng.integers(0, 10**9, n))
    log["channel"] = rng.integers(0, org.channels, n)
    log["command"] = rng.integers(0, len(COMMANDS), n)
    multi = rng.random(n) < 0.4
    log["bank"] = np.where(multi, -1, rng.integers(0, org.banks_per_channel, n))
    log["mask"] = np.where(multi, rng.integers(0, 1 << org.banks_per_channel, n), 0).astype(np.uint64)
    log["row"] = rng.integers(-1, org.rows, n)
    log["col"] = rng.integers(-1, org.columns, n)
    log["instr"] = np.arange(n)
    return log


# ----------------------------------------------------------------------------------------------
def test_dtypes():
    assert T.COMMAND_LOG_DTYPE.names == ("cycle", "channel", "command", "bank", "mask", "row", "col", "instr")
    assert [T.COMMAND_LOG_DTYPE[f] for f in T.COMMAND_LOG_DTYPE.names] == [
        np.dtype(t) for t in ("int64", "int32", "uint8", "int32", "uint64", "int32", "int32", "int32")
    ]
    assert T.HOST_EVENT_DTYPE.names == ("start", "end", "op", "kind")
    assert T.HOST_EVENT_DTYPE["kind"] == np.dtype("U8")


def test_summarise(hw):
    s = T.summarise(synthetic_log(), hw)
    assert s["commands"] == 12
    assert s["by_command"] == {
        "ACT": 2,
        "PRE": 2,
        "RD": 1,
        "WR": 0,
        "REF": 1,
        "MAC": 4,
        "WRGB": 1,
        "RDACC": 1,
        "REFSB": 0,
    }
    assert len(s["by_channel"]) == 2
    assert s["by_channel"][1] == {
        "ACT": 1,
        "PRE": 1,
        "RD": 1,
        "WR": 0,
        "REF": 0,
        "MAC": 0,
        "WRGB": 0,
        "RDACC": 0,
        "REFSB": 0,
    }
    assert sum(s["by_channel"][0].values()) == 9
    assert s["bank_operations"]["MAC"] == 4 * 8 and s["bank_operations"]["ACT"] == 17
    assert s["bank_operations"]["REF"] == 16  # whole-channel refresh
    assert (s["first_cycle"], s["last_cycle"]) == (0, 80)
    json.dumps(s)
    empty = T.summarise(T.command_log(), hw)
    assert empty["commands"] == 0 and empty["last_cycle"] is None


# ----------------------------------------------------------------------------------------------
def test_command_log_csv(hw, tmp_path):
    path = tmp_path / "commands.csv"
    n = T.write_command_log(path, synthetic_log(), hw)
    lines = read_csv(path)
    # ACT 16 + WRGB 1 + 4 MAC x 8 + RDACC 1 + PRE 16 + REF 1 (rank level) + channel 1: 3
    assert n == len(lines) == 16 + 1 + 32 + 1 + 16 + 1 + 3
    assert lines == reference_lines(synthetic_log(), hw)
    assert lines[0] == (0, "ACT", 0, 0, 0, 0, 5, -1)
    assert (0, "ACT", 0, 0, 1, 1, 5, -1) in lines  # bank 5 = group 1, bank 1
    assert lines[16] == (1, "ACT", 1, 0, 0, 3, 7, -1)
    assert (5, "WRGB", 0, -1, -1, -1, -1, 0) in lines
    assert (80, "REF", 0, 0, -1, -1, -1, -1) in lines
    mac20 = [r for r in lines if r[0] == 20]
    assert {(r[4], r[5]) for r in mac20} == {(g, b) for g in range(4) for b in (0, 2)}
    assert all(r[1] == "MAC" and r[6] == 5 and r[7] == 0 for r in mac20)
    keys = [(r[0], r[2]) for r in lines]
    assert keys == sorted(keys)
    # per-bank refresh on request
    n2 = T.write_command_log(path, synthetic_log(), hw, ref_per_bank=True)
    assert n2 == n + 15
    assert read_csv(path) == reference_lines(synthetic_log(), hw, ref_per_bank=True)


def test_command_log_chunks_and_ranks(hw3, tmp_path, monkeypatch):
    """Random logs on a 2-rank device, formatted in many small chunks, match the reference."""
    monkeypatch.setattr(trace_csv, "_CHUNK", 37)
    log = random_log(hw3, 400, seed=1)
    log = log[np.random.default_rng(2).permutation(log.size)]  # unsorted input
    path = tmp_path / "c.csv"
    n = T.write_command_log(path, log, hw3)
    assert read_csv(path) == reference_lines(log, hw3)
    assert n == len(reference_lines(log, hw3))
    assert {r[3] for r in read_csv(path)} >= {0, 1}


def test_command_log_large_is_fast(hw, tmp_path):
    import time

    log = random_log(hw, 200_000, seed=3)
    t = time.perf_counter()
    n = T.write_command_log(tmp_path / "big.csv", log, hw)
    assert time.perf_counter() - t < 5
    assert n == T.summarise(log, hw)["commands"] + int(
        (T._line_counts(log["command"], log["bank"], log["mask"], hw, True) - 1).sum()
    )
    with open(tmp_path / "big.csv", "rb") as f:
        assert sum(1 for _ in f) == n + 1


def test_empty_log(hw, tmp_path):
    assert T.write_command_log(tmp_path / "e.csv", T.command_log(), hw) == 0
    assert (tmp_path / "e.csv").read_text() == T.CSV_HEADER + "\n"
    r = T.write_chrome_trace(tmp_path / "e.json", T.command_log(), None, hw)
    assert r["events"] == 0
    json.loads((tmp_path / "e.json").read_text())
    T.write_vcd(tmp_path / "e.vcd", T.command_log(), hw)
    assert "$enddefinitions" in (tmp_path / "e.vcd").read_text()


# ----------------------------------------------------------------------------------------------
def _load_trace(path):
    d = json.loads(Path(path).read_text())
    ev = d["traceEvents"]
    procs = {e["pid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"}
    threads = {e["tid"]: (e["pid"], e["args"]["name"]) for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
    slices = [e for e in ev if e["ph"] == "X"]
    return d, procs, threads, slices


def test_chrome_trace(hw, tmp_path):
    path = tmp_path / "trace.json"
    host = T.host_events([(100, 300, 0, "HOP"), (300, 350, 1, "EPI"), (350, 360, 7, "HOP")])
    r = T.write_chrome_trace(path, synthetic_log(), host, hw, op_names=["rmsnorm", "qkv"])
    d, procs, threads, slices = _load_trace(path)
    assert d["displayTimeUnit"] == "ns"
    assert "1 us in the viewer = 1 memory-clock cycle" in d["otherData"]["time_unit"]
    assert d["otherData"]["truncated"] is False
    assert sorted(procs.values()) == ["channel 0", "channel 1", "host"]
    pid = {name: p for p, name in procs.items()}
    names = {(procs[p], n) for p, n in threads.values()}
    assert ("host", "host unit") in names
    for c in (0, 1):
        assert (f"channel {c}", "command bus") in names
        for u in range(8):
            assert (f"channel {c}", f"PU {u} (banks {2 * u}-{2 * u + 1})") in names
    assert r["tracks"] == 1 + 2 * (1 + 8)
    assert len(set(threads)) == len(threads)  # globally unique tids

    def track(e):
        return procs[e["pid"]], threads[e["tid"]][1]

    bus0 = sorted((e for e in slices if track(e) == ("channel 0", "command bus")), key=lambda e: e["ts"])
    assert [(e["name"], e["ts"], e["dur"]) for e in bus0] == [
        ("ACT", 0, 1),
        ("WRGB", 5, 2),
        ("MAC", 20, 12),
        ("MAC", 32, 4),
        ("RDACC", 50, 2),
        ("PRE", 60, 1),
        ("REF", 80, 1),
    ]
    sweep = bus0[2]["args"]
    assert sweep["instr"] == 2 and sweep["count"] == 3 and sweep["mask"] == hex(EVEN) and sweep["col"] == 0
    assert bus0[3]["args"]["instr"] == 3 and bus0[3]["args"]["count"] == 1
    assert bus0[4]["args"] == {"instr": 4, "bank": 4, "row": -1, "col": -1}
    bus1 = sorted((e for e in slices if track(e) == ("channel 1", "command bus")), key=lambda e: e["ts"])
    assert [(e["name"], e["ts"], e["dur"], e["args"]["bank"]) for e in bus1] == [
        ("ACT", 1, 1, 3),
        ("RD", 15, 2, 3),
        ("PRE", 40, 1, 3),
    ]
    # every unit of channel 0 (one bank of each in the mask) shows both MAC runs
    for u in range(8):
        pu = sorted(
            (e for e in slices if track(e) == ("channel 0", f"PU {u} (banks {2 * u}-{2 * u + 1})")),
            key=lambda e: e["ts"],
        )
        assert [(e["ts"], e["dur"], e["args"]["count"], e["args"]["instr"]) for e in pu] == [
            (20, 12, 3, 2),
            (32, 4, 1, 3),
        ]
    assert not [e for e in slices if e["pid"] == pid["channel 1"] and e["cat"] == "pim"]
    hs = sorted((e for e in slices if e["pid"] == pid["host"]), key=lambda e: e["ts"])
    assert [(e["name"], e["ts"], e["dur"]) for e in hs] == [
        ("HOP rmsnorm", 100, 200),
        ("EPI qkv", 300, 50),
        ("HOP op 7", 350, 10),
    ]
    assert all(isinstance(e["ts"], int) and isinstance(e["dur"], int) for e in slices)
    assert r["events"] == len(slices) == 7 + 3 + 8 * 2 + 3


def test_chrome_trace_names_the_simulators_host_events(hw, tmp_path):
    """SimResult.host_events carry the kind as an index into HOST_KINDS; the trace names it."""
    from sim.result import HOST_EVENT_DTYPE

    sim_events = np.array([(0, 10, 0, 0, 0), (10, 20, 1, 2, 1), (20, 30, 1, 1, 2)], dtype=HOST_EVENT_DTYPE)
    T.write_chrome_trace(tmp_path / "t.json", synthetic_log(), sim_events, hw, op_names=["norm", "qkv"])
    _d, procs, _threads, slices = _load_trace(tmp_path / "t.json")
    host = sorted((e for e in slices if procs[e["pid"]] == "host"), key=lambda e: e["ts"])
    assert [e["name"] for e in host] == ["HOP norm", "HMV qkv", "EPI qkv"]


def test_chrome_trace_exact_and_non_overlapping(hw, tmp_path):
    """Large cycle numbers stay exact integers; slices of one track never overlap."""
    big = 10**13 + 7
    log = T.command_log(
        [
            (big, 0, "ACT", -1, FULL, 1, -1, 0),
            (big + 1, 0, "MAC", -1, EVEN, 1, 0, 1),  # next command closer than tMAC: clipped
            (big + 2, 0, "MAC", -1, EVEN, 1, 1, 2),
            (big + 3, 0, "RD", 2, 0, 1, 4, 3),
            (big + 4, 0, "RD", 2, 0, 1, 5, 3),
        ]
    )
    path = tmp_path / "t.json"
    T.write_chrome_trace(path, log, None, hw)
    _, _, _, slices = _load_trace(path)
    assert sorted(e["ts"] for e in slices if e["cat"] == "dram") == [big, big + 1, big + 2, big + 3, big + 4]
    tracks: dict[tuple[int, int], list] = {}
    for e in slices:
        tracks.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["dur"]))
    for spans in tracks.values():
        spans.sort()
        for (t0, d0), (t1, _) in zip(spans, spans[1:]):
            assert t0 + d0 <= t1


def test_chrome_trace_max_events(hw, tmp_path):
    path = tmp_path / "t.json"
    r = T.write_chrome_trace(path, synthetic_log(), T.host_events([(100, 300, 0, "HOP")]), hw, max_events=5)
    d, _, _, slices = _load_trace(path)
    assert r == {"events": 5, "dropped": 7 + 3 + 16 + 1 - 5, "tracks": 19}
    assert sorted(e["ts"] for e in slices) == [0, 1, 5, 15, 20]
    assert d["otherData"]["truncated"] is True and d["otherData"]["dropped_events"] == r["dropped"]


# ----------------------------------------------------------------------------------------------
def parse_vcd(text: str):
    """Minimal VCD reader: (timescale, {name: id}, [(time, name, value)])."""
    header, body = text.split("$enddefinitions $end", 1)
    timescale = header.split("$timescale", 1)[1].split("$end", 1)[0].strip()
    names, scope = {}, []
    for tok in header.replace("\n", " ").split("$end"):
        words = tok.split()
        if not words:
            continue
        if words[0] == "$scope":
            scope.append(words[2])
        elif words[0] == "$upscope":
            scope.pop()
        elif words[0] == "$var":
            names[words[3]] = ".".join(scope + [words[4]])
    changes, t = [], 0
    for line in body.splitlines():
        line = line.strip()
        if not line or line.startswith("$"):
            continue
        if line.startswith("#"):
            t = int(line[1:])
        elif line[0] == "b":
            bits, ident = line[1:].split()
            v = int(bits, 2)
            changes.append((t, names[ident], v - (1 << 32) if v >= 1 << 31 else v))
        elif line[0] == "s":
            value, ident = line[1:].split()
            changes.append((t, names[ident], value))
    return timescale, names, changes, t


def state_at(changes, name, time):
    value = None
    for t, n, v in changes:
        if n == name and t <= time:
            value = v
    return value


def test_vcd(hw, tmp_path):
    path = tmp_path / "w.vcd"
    n = T.write_vcd(path, synthetic_log(), hw)
    assert n > 0
    text = path.read_text()
    timescale, names, changes, end = parse_vcd(text)
    assert timescale == "1 ns"
    assert "1 cycle = 1 timescale unit" in text
    assert "$var string 1" in text and "$var integer 32" in text
    vars_ = set(names.values())
    for c in (0, 1):
        assert {f"ch{c}.cmd", f"ch{c}.instr"} <= vars_
        assert {f"ch{c}.bank{b}" for b in range(16)} <= vars_
    assert state_at(changes, "ch0.cmd", 0) == "ACT"
    assert state_at(changes, "ch0.cmd", 1) == "-"
    assert state_at(changes, "ch0.cmd", 20) == "MAC" and state_at(changes, "ch0.instr", 20) == 2
    assert state_at(changes, "ch0.cmd", 50) == "RDACC"
    for b in range(16):
        assert state_at(changes, f"ch0.bank{b}", 0) == 5
        assert state_at(changes, f"ch0.bank{b}", 59) == 5
        assert state_at(changes, f"ch0.bank{b}", 60) == -1
    assert state_at(changes, "ch1.bank3", 0) == -1
    assert state_at(changes, "ch1.bank3", 1) == 7
    assert state_at(changes, "ch1.bank3", 40) == -1
    assert state_at(changes, "ch1.bank2", 40) == -1
    assert state_at(changes, "ch1.cmd", 15) == "RD"
    # pyvcd's own tokenizer (the GTKWave grammar) reads it back
    from vcd.reader import TokenKind, tokenize

    with open(path, "rb") as f:
        kinds = [tok.kind for tok in tokenize(f)]
    assert kinds.count(TokenKind.VAR) == 2 * (2 + 16)
    assert kinds.count(TokenKind.CHANGE_STRING) > 0 and kinds.count(TokenKind.CHANGE_VECTOR) > 0
    times = [t for t, _, _ in changes]
    assert times == sorted(times) and end == 82  # one cycle past the last change


def test_vcd_window(hw, tmp_path):
    path = tmp_path / "w.vcd"
    T.write_vcd(path, synthetic_log(), hw, channels=[1], max_cycles=30)
    _, names, changes, end = parse_vcd(path.read_text())
    assert all(n.startswith("ch1.") for n in names.values())
    assert max(t for t, _, _ in changes) < 30 and end == 30
    assert state_at(changes, "ch1.bank3", 29) == 7
    with pytest.raises(ValueError, match="channel 5"):
        T.write_vcd(path, synthetic_log(), hw, channels=[5])


def test_vcd_timescale():
    assert T.vcd_timescale(hwmodel.load_hardware("hbm2-pim")) == ("1 ns", True)
    assert T.vcd_timescale(hwmodel.load_hardware("fpga-proto")) == ("10 ns", True)
    assert T.vcd_timescale(hwmodel.load_hardware("gddr6-aim")) == ("1 ns", False)


# ----------------------------------------------------------------------------------------------
def _writers(hw):
    log = synthetic_log()
    return {
        "csv": lambda p: T.write_command_log(p, log, hw),
        "json": lambda p: T.write_chrome_trace(p, log, T.host_events([(1, 2, 0, "HOP")]), hw),
        "vcd": lambda p: T.write_vcd(p, log, hw),
    }


@pytest.mark.parametrize("kind", ["csv", "json", "vcd"])
def test_atomic_write_leaves_nothing_on_error(hw, tmp_path, monkeypatch, kind):
    import vcd

    def boom(*a, **k):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(trace_csv, "_format_rows", boom)
    monkeypatch.setattr(trace_chrome, "_format_rows", boom)
    monkeypatch.setattr(vcd.VCDWriter, "change", boom)
    target = tmp_path / f"out.{kind}"
    target.write_text("previous")
    with pytest.raises(RuntimeError, match="disk on fire"):
        _writers(hw)[kind](target)
    assert target.read_text() == "previous"
    assert sorted(os.listdir(tmp_path)) == [target.name]
    fresh = tmp_path / f"new.{kind}"
    with pytest.raises(RuntimeError):
        _writers(hw)[kind](fresh)
    assert sorted(os.listdir(tmp_path)) == [target.name]


@pytest.mark.parametrize("kind", ["csv", "json", "vcd"])
def test_atomic_write_replaces(hw, tmp_path, kind):
    target = tmp_path / f"out.{kind}"
    target.write_text("previous")
    _writers(hw)[kind](target)
    assert target.read_text() != "previous"
    assert sorted(os.listdir(tmp_path)) == [target.name]
    umask = os.umask(0)
    os.umask(umask)
    assert target.stat().st_mode & 0o777 == 0o666 & ~umask


def test_invalid_logs_rejected(hw, tmp_path):
    bad_channel = synthetic_log()
    bad_channel["channel"][0] = 2
    with pytest.raises(ValueError, match="channel out of range"):
        T.write_command_log(tmp_path / "x.csv", bad_channel, hw)
    bad_mask = synthetic_log()
    bad_mask["mask"][3] = 1 << 20
    with pytest.raises(ValueError, match="mask names a bank"):
        T.write_chrome_trace(tmp_path / "x.json", bad_mask, None, hw)
    with pytest.raises(TypeError):
        T.summarise(np.zeros(3), hw)
    with pytest.raises(ValueError, match="host event 0"):
        T.write_chrome_trace(tmp_path / "x.json", synthetic_log(), T.host_events([(5, 4, 0, "HOP")]), hw)
    assert os.listdir(tmp_path) == []


def test_format_rows():
    parts = [
        T._Dec(np.array([-1, 123, 0])),
        b",",
        T._Hex(np.array([0, 255, 16])),
        b",",
        T._Lut(["A", "RDACC"], np.array([1, 0, 1])),
        b",",
        T._Dec(np.array([2**40, 7, 0], dtype=np.uint64)),
        b"\n",
    ]
    assert T._format_rows(3, parts) == b"-1,0,RDACC,1099511627776\n123,ff,A,7\n0,10,RDACC,0\n"
