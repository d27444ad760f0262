"""Golden text forms. Regenerate with PIMSAT_UPDATE_GOLDEN=1 pytest tests/ir."""

import os
from pathlib import Path

import pytest

from ir import PRESETS, attention_program, build_decode_step, format_program, gemv_program

GOLDEN = Path(__file__).parent / "golden"

CASES = {
    "tiny_llama_b1_c2_l1": lambda: build_decode_step(PRESETS["tiny-llama"], 1, 2, layers=1),
    "tiny_gpt2_b2_c3_l1": lambda: build_decode_step(PRESETS["tiny-gpt2"], 2, 3, layers=1),
    "gemv_8x16_bias": lambda: gemv_program(8, 16, batch=2, bias=True),
    "attention_h4_kv2_d8_c3": lambda: attention_program(4, 2, 8, 3),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_golden_text(case):
    text = format_program(CASES[case]())
    path = GOLDEN / f"{case}.txt"
    if os.environ.get("PIMSAT_UPDATE_GOLDEN") == "1":
        path.write_text(text)
    assert path.exists(), f"missing golden {path}; run with PIMSAT_UPDATE_GOLDEN=1"
    assert text == path.read_text()


def test_text_is_deterministic():
    a = format_program(CASES["tiny_llama_b1_c2_l1"]())
    b = format_program(CASES["tiny_llama_b1_c2_l1"]())
    assert a == b and a.endswith("\n")
    assert (
        "op layers.0.self_attn.k_append = kv_append(layers.0.self_attn.k_cache, layers.0.self_attn.k_rope.out)"
        " -> layers.0.self_attn.k_cache@2 {layer=0, position=2}" in a
    )
