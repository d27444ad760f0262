"""Generate the benchmark instances under instances/<tier>/ (run: python instances/generate.py).

Instances name the model and settings; they never carry weights. For the `llm` tier the channel
count of each hardware preset is the smallest power of two whose capacity holds the weights plus
the KV cache with 15 % headroom for row-alignment padding.
"""
from __future__ import annotations

import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT.parent))

import ir  # noqa: E402
from hwmodel import load_hardware  # noqa: E402


def _write(tier: str, name: str, description: str, program: dict, preset: str, sets: list[str]) -> None:
    folder = ROOT / tier
    folder.mkdir(exist_ok=True)
    data = {"name": name, "tier": tier, "description": description, "program": program,
            "hardware": {"preset": preset, "set": sets}, "seed": 0}
    (folder / f"{name}.yaml").write_text(yaml.safe_dump(data, sort_keys=False))


def _channels_for(preset: str, program: ir.Program) -> int:
    hw = load_hardware(preset)
    need = (program.weight_bytes() + program.kv_bytes()) * 1.15
    ch = 1
    while ch * hw.organization.channel_bytes < need:
        ch *= 2
    return max(ch, 8)


def fpga() -> None:
    for n, k in ((64, 128), (128, 256), (256, 64)):
        _write("fpga", f"gemv-{n}x{k}-fpga", f"GEMV {n}x{k} fp16 on the FPGA prototype",
               {"kind": "gemv", "n": n, "k": k, "batch": 1}, "fpga-proto", [])
    _write("fpga", "gemv-64x128-b2-fpga", "GEMV 64x128, batch 2", {"kind": "gemv", "n": 64, "k": 128, "batch": 2},
           "fpga-proto", [])
    _write("fpga", "attention-h2-d16-c31-fpga", "one attention step, 2 heads x 16, 31 cached tokens",
           {"kind": "attention", "heads": 2, "kv_heads": 2, "head_dim": 16, "context": 31}, "fpga-proto", [])
    _write("fpga", "attention-gqa-h4-kv2-d16-c15-fpga", "GQA attention step, 4 heads on 2 kv heads",
           {"kind": "attention", "heads": 4, "kv_heads": 2, "head_dim": 16, "context": 15}, "fpga-proto", [])


def micro() -> None:
    _write("micro", "gemv-4096-hbm2-64ch", "GEMV 4096x4096 fp16 on 64 HBM2-PIM pseudo-channels (PIMSimulator anchor)",
           {"kind": "gemv", "n": 4096, "k": 4096, "batch": 1}, "hbm2-pim", ["organization.channels=64"])
    _write("micro", "gemv-4096-gddr6-32ch", "GEMV 4096x4096 bf16 on 32 AiM channels",
           {"kind": "gemv", "n": 4096, "k": 4096, "batch": 1, "dtype": "bf16"}, "gddr6-aim",
           ["organization.channels=32"])
    _write("micro", "gemv-4096-hbm3-32pch", "GEMV 4096x4096 fp16 on one HBM3-PIM stack",
           {"kind": "gemv", "n": 4096, "k": 4096, "batch": 1}, "hbm3-pim", [])
    _write("micro", "gemv-4096-b4-hbm2-64ch", "GEMV 4096x4096, batch 4",
           {"kind": "gemv", "n": 4096, "k": 4096, "batch": 4}, "hbm2-pim", ["organization.channels=64"])
    _write("micro", "gemv-4096-b16-hbm2-64ch", "GEMV 4096x4096, batch 16 (rows split between the units and the host)",
           {"kind": "gemv", "n": 4096, "k": 4096, "batch": 16}, "hbm2-pim", ["organization.channels=64"])
    _write("micro", "attention-llama2-c2048-hbm2-64ch",
           "one Llama-2-7B attention step (32 heads x 128) over a 2048-token KV cache",
           {"kind": "attention", "heads": 32, "kv_heads": 32, "head_dim": 128, "context": 2048},
           "hbm2-pim", ["organization.channels=64"])
    _write("micro", "attention-gqa-llama3-c2048-hbm2-64ch",
           "one Llama-3-8B attention step (GQA 32/8 x 128) over a 2048-token KV cache",
           {"kind": "attention", "heads": 32, "kv_heads": 8, "head_dim": 128, "context": 2048},
           "hbm2-pim", ["organization.channels=64"])


def small() -> None:
    _write("small", "tiny-llama-2l-hbm2-8ch", "tiny Llama-style model, 2 layers + LM head",
           {"kind": "model", "preset": "tiny-llama", "batch": 1, "context": 15}, "hbm2-pim",
           ["organization.channels=8"])
    _write("small", "tiny-gpt2-2l-hbm2-8ch", "tiny GPT-2-style model, 2 layers + LM head",
           {"kind": "model", "preset": "tiny-gpt2", "batch": 1, "context": 15}, "hbm2-pim",
           ["organization.channels=8"])
    _write("small", "gpt2-1l-c128-hbm2-16ch", "GPT-2 small, one layer, context 128",
           {"kind": "model", "preset": "gpt2", "batch": 1, "context": 128, "layers": 1, "lm_head": False},
           "hbm2-pim", ["organization.channels=16"])
    _write("small", "gpt2-c128-hbm2-64ch", "GPT-2 small, 12 layers + LM head, context 128",
           {"kind": "model", "preset": "gpt2", "batch": 1, "context": 128}, "hbm2-pim",
           ["organization.channels=64"])


def llm() -> None:
    for model in ("llama-2-7b", "llama-3-8b", "mistral-7b", "opt-6.7b"):
        cfg = ir.PRESETS[model]
        for batch in (1, 4, 16):
            for ctx in (128, 2048):
                if cfg.max_position_embeddings and ctx >= cfg.max_position_embeddings:
                    ctx = cfg.max_position_embeddings - 1  # OPT: learned positions end at 2048 tokens
                full = ir.build_decode_step(cfg, batch=batch, context=ctx)
                for preset, short in (("hbm2-pim", "hbm2"), ("gddr6-aim", "gddr6")):
                    ch = _channels_for(preset, full)
                    sets = [f"organization.channels={ch}"]
                    base = {"kind": "model", "preset": model, "batch": batch, "context": ctx}
                    _write("llm", f"{model}-1l-b{batch}-c{ctx}-{short}-{ch}ch",
                           f"{model}: one layer, batch {batch}, context {ctx}",
                           {**base, "layers": 1, "embed": True, "lm_head": False}, preset, sets)
                    _write("llm", f"{model}-full-b{batch}-c{ctx}-{short}-{ch}ch",
                           f"{model}: full decode step ({cfg.num_hidden_layers} layers + LM head), batch {batch}, "
                           f"context {ctx}", base, preset, sets)
    # the brief's worked example: Llama-2-7B on one HBM3-PIM stack (AttAcc's organisation)
    base = {"kind": "model", "preset": "llama-2-7b", "batch": 1, "context": 2048}
    _write("llm", "llama-2-7b-1l-b1-c2048-hbm3-32pch", "llama-2-7b: one layer on one HBM3-PIM stack",
           {**base, "layers": 1, "lm_head": False}, "hbm3-pim", [])
    _write("llm", "llama-2-7b-full-b1-c2048-hbm3-32pch",
           "llama-2-7b: full decode step on one HBM3-PIM stack (bandwidth floor 1.34 ms)", base, "hbm3-pim", [])


TIERS = {
    "fpga": "fits `fpga-proto` (2 channels x 4 banks); small enough to prove optimal in seconds",
    "micro": "single kernels at real size, among them the GEMV 4096x4096 fp16 anchor on 64 HBM2-PIM "
             "pseudo-channels and one attention step over a 2048-token KV cache",
    "small": "GPT-2 small and tiny Llama/GPT-2-style models",
    "llm": "one real-size layer and the full model of Llama-2-7B, Llama-3-8B, Mistral-7B and OPT-6.7B at batch "
           "1, 4, 16 and context 128, 2048 (OPT: 2047, its learned positions end there), on `hbm2-pim` and "
           "`gddr6-aim` with the smallest power-of-two channel count that holds weights + KV cache",
}


def write_readme() -> None:
    lines = ["# Benchmark instances", "",
             "Generated by `python instances/generate.py` (do not edit by hand). An instance names a program",
             "(model preset or kernel, batch, context) and a hardware preset with overrides; weights for",
             "functional runs come from the seeded generator. `pimsat show instances/<tier>` lists sizes and fit.",
             ""]
    for tier, what in TIERS.items():
        files = sorted((ROOT / tier).glob("*.yaml"))
        lines += [f"## `{tier}/` — {len(files)} instances", "", what + ".", ""]
        lines += ["| instance | description |", "|---|---|"]
        for f in files:
            data = yaml.safe_load(f.read_text())
            lines.append(f"| `{f.stem}` | {data.get('description', '')} |")
        lines.append("")
    (ROOT / "README.md").write_text("\n".join(lines))


if __name__ == "__main__":
    fpga()
    micro()
    small()
    llm()
    write_readme()
    print("instances written under", ROOT)
