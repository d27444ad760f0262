"""Constrained-random what-ifs: random programs on every preset under random hardware overrides,
every method, each checked against the verdicts pimsat promises.

    .venv/bin/python bench/whatif_fuzz.py [--seed S] [--count N] [--size small|large|llm] [--time-limit T]

Case `s` is drawn from `random.Random(s)` alone, so a failing case is replayed with
`--seed s --count 1` (the line printed names its program and overrides, to copy into an
instance file). Per case: a program (a gemv, an attention step or a tiny model layer stack), a
preset, a channel count (`--size large`: the presets' channels cut to 1-16, programs up to
4096 x 4096, at most 2^21 weight elements x vectors per
channel, and a context of 1,100; `small`: 2-4 channels and fewer rows, programs a functional
run checks in a second) and up to three overrides of timing, refresh, host, buffer, accumulator,
write path and command bus. `--size llm`: one layer of a real model (Llama-2-7B, Llama-3-8B,
Mistral-7B, OPT-6.7B, GPT-2) at batch 1-4 and a context up to 2,048 on 16-128 channels of an
LLM preset, timing only. Every method compiles it and the simulator runs it; checked:

  sim        simulated cycles = predicted, 0 violations (the simulator raises on one);
  standard   (small and large) the command log checked against the standard's rule list
             (sim.stdcheck: hwmodel/standards/, written from JEDEC and Ramulator 2.1's device
             models, not from our timing table), refresh counts included;
  bound      the hardware bound is not above the program, nor CP-SAT's proven bound (less the
             largest task tail, the report's bound_cycles);
  values     outputs within the reference's tolerance and equal to the bit-true model (where
             the program is small enough to run functionally);
  order      cpsat <= greedy <= naive;
  (note)     a cpsat program that decodes slower than the model's objective: the model lumps
             refresh per round, the decoder places exact REFs (a REF in an idle gap may make the
             next task wait a few cycles); the report gives the difference
             (decode_minus_model_cycles) and the status FEASIBLE, so it is noted, not failed.

An instance the hardware cannot hold (pimsat's InfeasibleError, exit 2 in the CLI) is counted as
such, not as a failure; any other exception is a failure. Exit status 1 if any case failed.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import Counter

from ir.models import PRESETS as MODELS
from pimsat.instance import Instance
from pimsat.pipeline import InfeasibleError, SolveOptions, run
from pimsat.report import proven_bound
from sim.stdcheck import check_log

PRESETS = ("hbm2-pim", "gddr6-aim", "hbm3-pim", "fpga-proto")
SMALL_ORG = {
    "hbm2-pim": ["organization.rows=512"],
    "gddr6-aim": ["organization.rows=256"],
    "hbm3-pim": ["organization.rows=256"],
    "fpga-proto": [],
}
OVERRIDES = (
    "timing.params.tREFI=700",
    "timing.params.tREFI=1950",
    "timing.refresh_mode=per_bank",
    "timing.params.tRP=40",
    "timing.params.tRCDRD=30",
    "timing.params.tRC=120",
    "timing.params.tFAW=60",
    "timing.params.tMACL=2",
    "timing.params.tMAC=8",
    "host.sync_cycles=5",
    "host.sync_cycles=400",
    "host.dispatch_cycles=0",
    "host.dispatch_cycles=1500",
    "host.persistent_kernel=false",
    "host.matrix_macs_per_cycle=16",
    "host.matrix_macs_per_cycle=8192",
    "host.vector_elements_per_cycle=2",
    "host.vector_elements_per_cycle=512",
    "host.link_bytes_per_cycle=2",
    "host.link_bytes_per_cycle=64",
    "pim.global_buffer_bytes=64",
    "pim.global_buffer_bytes=4096",
    "pim.acc_registers=1",
    "pim.acc_registers=64",
    "pim.gb_write_path=dedicated",
    "pim.gb_write_path=data_bus",
    "organization.command_bus=per_channel",
    "organization.command_bus=shared_pair",
)
METHODS = ("naive", "greedy", "cpsat")
LLM_MODELS = ("llama-2-7b", "llama-3-8b", "mistral-7b", "opt-6.7b", "gpt2")
MAX_WORK = 1 << 21  # a large gemv's weight elements x vectors per channel


def draw(seed: int, size: str) -> tuple[dict, str, list[str]]:
    """Case `seed`: its program, preset and overrides."""
    rng = random.Random(seed)
    if size == "llm":
        return draw_llm(rng)
    preset = rng.choice(PRESETS)
    large = size == "large"
    channels = 2 if preset == "fpga-proto" else rng.choice([1, 2, 4, 8, 16] if large else [2, 4])
    sets = [] if preset == "fpga-proto" else [f"organization.channels={channels}"]
    if not large:
        sets += SMALL_ORG[preset]
    sets += rng.sample(OVERRIDES, rng.randint(0, 3))
    r = rng.random()
    if r < 0.3 and preset != "fpga-proto":  # (a tiny model's weights do not fit the fpga board)
        program = {
            "kind": "model",
            "preset": rng.choice(["tiny-llama", "tiny-gpt2"]),
            "batch": rng.choice([1, 2, 4, 8] if large else [1, 2, 4]),
            "context": rng.randint(1, 60 if large else 20),
        }
    elif r < 0.65:
        dims = [1, 7, 256, 1000, 2048, 4096] if large else [1, 16, 64, 100, 256]
        while True:  # at most MAX_WORK weight elements x vectors per channel: seconds, not minutes
            n, k = rng.choice(dims), rng.choice([1, 33, 512, 1024, 4096] if large else [1, 16, 96, 128, 200])
            batch = rng.choice([1, 2, 3, 4, 8, 16] if large else [1, 2, 4, 5])
            if n * k * batch <= MAX_WORK * channels:
                break
        program = {"kind": "gemv", "n": n, "k": k, "batch": batch, "bias": rng.random() < 0.5}
    else:
        kv, group = rng.choice([1, 2, 4, 8] if large else [1, 2]), rng.choice([1, 2, 4])
        program = {
            "kind": "attention",
            "heads": kv * group,
            "kv_heads": kv,
            "head_dim": rng.choice([16, 64, 128] if large else [16, 32, 64]),
            "context": rng.randint(0, 1100 if large else 200),
            "batch": rng.choice([1, 2, 4]),
        }
    return program, preset, sets


def draw_llm(rng: random.Random) -> tuple[dict, str, list[str]]:
    """One layer of a real model on an LLM preset (what the suite's llm tier holds, under overrides)."""
    preset = rng.choice(PRESETS[:3])
    sets = [f"organization.channels={rng.choice([16, 32, 64, 128])}"]
    sets += rng.sample(OVERRIDES, rng.randint(0, 3))
    model = rng.choice(LLM_MODELS)
    program = {
        "kind": "model",
        "preset": model,
        "batch": rng.choice([1, 1, 2, 4]),
        # (GPT-2's learned positions end at 1,024)
        "context": min(
            rng.choice([1, rng.randint(2, 300), rng.randint(300, 2048)]), MODELS[model].max_position_embeddings - 1
        ),
        "layers": 1,
        "embed": rng.random() < 0.5,
        "lm_head": False,
    }
    return program, preset, sets


def check(
    inst: Instance, time_limit: float, functional: bool | None = None, standard: bool = True
) -> tuple[dict[str, int], list[str], list[str]]:
    """Every method's cycles, what failed and what to note. `standard`: record the command log
    and check it against the standard's rule list (sim.stdcheck)."""
    cycles, failed, notes = {}, [], []
    for method in METHODS:
        opts = SolveOptions(
            method=method, time_limit=time_limit, groups=2, functional=functional, record=True if standard else None
        )
        r = run(inst, opts)
        predicted, simulated = r.compiled.predicted_cycles, int(r.sim.cycles)
        if simulated != predicted:
            failed.append(f"sim: {method} simulated {simulated}, predicted {predicted}")
        if standard:
            broken = check_log(r.sim.log, r.hardware)
            if broken:
                v = broken[0]
                failed.append(
                    f"standard: {method} {len(broken)} violations, the first at cycle {v.cycle} channel {v.channel} "
                    f"bank {v.bank} {v.command}: {v.text} ({v.source}), needed {v.needed}, actual {v.actual}"
                )
        if r.bounds.cycles > simulated:
            failed.append(f"bound: {method} bound {r.bounds.cycles} above the program's {simulated}")
        proven = proven_bound(r)  # CP-SAT's, less the largest task tail: the report's bound_cycles
        if proven is not None and proven > simulated:
            failed.append(f"bound: {method} proven bound {proven} above the program's {simulated}")
        if r.outputs_match is False or r.bit_exact is False:
            failed.append(f"values: {method} outputs_match {r.outputs_match}, bit_exact {r.bit_exact}")
        if method == "cpsat" and r.solution.objective is not None and predicted > r.solution.objective:
            # the model lumps refresh per round; the decoder's exact REFs may cost more, which the
            # report gives as decode_minus_model_cycles and a FEASIBLE status: a note, not a failure
            model = int(r.solution.objective)
            notes.append(f"model: decoded {predicted} = model objective {model} + {predicted - model}")
        cycles[method] = simulated
    if not cycles["cpsat"] <= cycles["greedy"] <= cycles["naive"]:
        failed.append(f"order: {cycles}")
    return cycles, failed, notes


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0, help="first case")
    ap.add_argument("--count", type=int, default=50, help="cases")
    ap.add_argument("--size", choices=("small", "large", "llm"), default="small")
    ap.add_argument("--time-limit", type=float, default=20.0, help="CP-SAT wall-clock guard (s)")
    args = ap.parse_args(argv)
    tally: Counter[str] = Counter()
    t0 = time.perf_counter()
    for seed in range(args.seed, args.seed + args.count):
        program, preset, sets = draw(seed, args.size)
        inst = Instance(name=f"whatif-{seed}", program=program, hardware={"preset": preset, "set": sets})
        what = f"program: {json.dumps(program)} on {preset}, set: {json.dumps(sets)}"
        try:
            llm = args.size == "llm"  # (timing only, and no command log: a layer issues millions)
            cycles, failed, notes = check(inst, args.time_limit, False if llm else None, standard=not llm)
        except InfeasibleError as e:
            tally["does not fit"] += 1
            print(f"{seed}: does not fit: {str(e).splitlines()[0][:160]}", flush=True)
            continue
        except Exception as e:  # noqa: BLE001 - every other exception is a finding
            cycles, notes, failed = (
                {},
                [],
                [f"exception: {type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"],
            )
        tally["failed" if failed else "passed"] += 1
        tally["noted"] += bool(notes)
        status = "FAILED " + "; ".join(failed) if failed else "ok " + " ".join(f"{m} {c}" for m, c in cycles.items())
        status += "".join(f" (note: {n})" for n in notes)
        print(f"{seed}: {status} | {what}", flush=True)
    print(
        f"{args.count} cases ({args.size}, seeds {args.seed}..{args.seed + args.count - 1}): "
        f"{tally['passed']} passed ({tally['noted']} with a note), {tally['failed']} failed, "
        f"{tally['does not fit']} do not fit "
        f"({time.perf_counter() - t0:.0f} s)"
    )
    return 1 if tally["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
