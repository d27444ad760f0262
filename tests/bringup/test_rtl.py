"""The RTL model (rtl/) under Icarus Verilog: every fpga-tier bundle bit-identical to its golden
files; a mutated golden file or instruction image detected; the arithmetic bit-exact to numpy's
fp32 on random and edge-case operands; the decoder's field table current."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest

from hwmodel.isa import make
from hwmodel.isa_codec import decode_word, encode_word
from pimsat.bringup.bundle import check_bundle
from pimsat.bringup.isa_vh import isa_fields_vh
from pimsat.bringup.rtl import RTL_DIR, run_bundle, tools

from .conftest import copy_bundle, require_iverilog

require_iverilog()


def test_every_fpga_bundle_runs_bit_identical_in_the_rtl(bundle, tmp_path):
    m = check_bundle(bundle)
    runs = run_bundle(bundle, m, tmp_path)
    assert len(runs) == len(m.channels) == 2
    for r in runs:
        assert r.ok, r.first_difference
        assert "0 violations" in r.log and "RTL VIOLATION" not in r.log
        assert len(r.compared) == 4 + m.rtl_parameters["NB"]


def _word_lines(b: Path, stem: str) -> tuple[Path, list[str]]:
    p = b / "program" / f"{stem}.words.hex"
    return p, p.read_text().split()


def _mutate_first(b: Path, op: str, change) -> None:
    """Rewrite the first `op` instruction of channel 0 (its word and/or its issue cycle)."""
    p, words = _word_lines(b, "ch00")
    cp = b / "program" / "ch00.cycles.hex"
    cycles = cp.read_text().split()
    k = next(i for i, w in enumerate(words) if decode_word(int(w, 16)).op == op)
    ins = decode_word(int(words[k], 16), int(cycles[k], 16))
    new = change(ins)
    words[k] = f"{encode_word(new):032x}"
    cycles[k] = f"{new.cycle:016x}"
    p.write_text("\n".join(words) + "\n")
    cp.write_text("\n".join(cycles) + "\n")


def _moved(ins, **fields):
    f = ins.fields()
    f.update({k: v(f[k]) if callable(v) else v for k, v in fields.items()})
    return make(ins.op, cycle=ins.cycle, **f)


@pytest.mark.parametrize(
    "mutation",
    [
        ("MAC", lambda i: _moved(i, col=lambda c: c ^ 1)),  # another burst of the row: other values
        ("MAC", lambda i: _moved(i, acc=lambda a: a ^ 1)),  # another accumulator
        ("WRGB", lambda i: _moved(i, offset=lambda o: o + 1)),  # the input vector shifted
        ("MAC", lambda i: i.at(i.cycle - 1)),  # one cycle early: a timing violation
        ("ACT", lambda i: _moved(i, row=lambda r: r + 1)),  # another row opened
    ],
    ids=["mac-col", "mac-acc", "wrgb-offset", "mac-early", "act-row"],
)
def test_a_mutated_instruction_image_is_detected(gemv_bundle, tmp_path, mutation):
    b = copy_bundle(gemv_bundle, tmp_path / "b")
    m = check_bundle(b)
    _mutate_first(b, *mutation)
    runs = run_bundle(b, m, tmp_path / "out")
    assert not runs[0].ok, "the RTL did not notice the mutation"
    assert runs[1].ok


def test_a_mutated_golden_file_is_detected(gemv_bundle, tmp_path):
    b = copy_bundle(gemv_bundle, tmp_path / "b")
    m = check_bundle(b)
    g = b / "golden" / "ch01.rdacc.hex"
    lines = g.read_text().split()
    lines[5] = f"{int(lines[5], 16) ^ 1:08x}"  # one bit of one read-out
    g.write_text("\n".join(lines) + "\n")
    runs = run_bundle(b, m, tmp_path / "out")
    assert runs[0].ok and not runs[1].ok
    assert "ch01.rdacc.hex line 6" in runs[1].first_difference


def _run_fp(cases: list[tuple[int, int, int]], tmp: Path) -> np.ndarray:
    iverilog, vvp = tools()
    (tmp / "in.hex").write_text("".join(f"{op:02x}{a:08x}{b:08x}\n" for op, a, b in cases))
    subprocess.run(
        [iverilog, "-g2012", "-I", str(RTL_DIR), "-o", str(tmp / "fp.vvp"), str(RTL_DIR / "tb_fp.v")], check=True
    )
    p = subprocess.run(
        [vvp, "-n", str(tmp / "fp.vvp"), f"+in={tmp / 'in.hex'}", f"+out={tmp / 'out.hex'}"],
        capture_output=True,
        text=True,
    )
    assert "FINISHED" in p.stdout, p.stdout + p.stderr
    lines = [ln for ln in (tmp / "out.hex").read_text().splitlines() if ln and not ln.startswith("//")]
    return np.array([int(x, 16) for x in lines], dtype=np.uint32)


def test_fp16_products_and_fp32_sums_are_bit_exact(tmp_path):
    """Random fp16 operand pairs (every finite pattern class: subnormal, normal, signed zero) and
    fp32 pairs over the whole exponent range, near-cancellations and sums that overflow."""
    rng = np.random.default_rng(17)
    a16 = rng.integers(0, 1 << 16, 12000, dtype=np.uint32)
    b16 = rng.integers(0, 1 << 16, 12000, dtype=np.uint32)
    keep = ((a16 >> 10) & 31 != 31) & ((b16 >> 10) & 31 != 31)
    a16, b16 = a16[keep], b16[keep]
    f16 = lambda v: v.astype(np.uint16).view(np.float16).astype(np.float32)  # noqa: E731
    mul = (f16(a16) * f16(b16)).view(np.uint32)
    n = 12000
    exp = np.concatenate([rng.integers(0, 255, n // 2), rng.integers(0, 3, n // 4), rng.integers(250, 255, n // 4)])
    x = ((rng.integers(0, 2, n) << 31) | (exp << 23) | rng.integers(0, 1 << 23, n)).astype(np.uint32)
    y = ((rng.integers(0, 2, n) << 31) | (rng.permutation(exp) << 23) | rng.integers(0, 1 << 23, n)).astype(np.uint32)
    near = rng.integers(0, n, n // 3)
    y[near] = (x[near] ^ np.uint32(1 << 31)) + rng.integers(0, 4, near.size).astype(np.uint32)
    y[near] = np.where((y[near] >> 23) & 255 == 255, x[near], y[near])
    with np.errstate(over="ignore"):
        add = (x.view(np.float32) + y.view(np.float32)).view(np.uint32)
    cases = [(0, int(p), int(q)) for p, q in zip(a16, b16)] + [(1, int(p), int(q)) for p, q in zip(x, y)]
    got = _run_fp(cases, tmp_path)
    want = np.concatenate([mul, add])
    assert got.size == want.size
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, [(int(i), hex(got[i]), hex(want[i])) for i in bad[:5]]


def test_the_decoder_field_table_is_generated_from_the_isa():
    assert (RTL_DIR / "isa_fields.vh").read_text() == isa_fields_vh(), (
        "rtl/isa_fields.vh is stale: python -m pimsat.bringup.isa_vh > rtl/isa_fields.vh"
    )
