"""Each .pt2 fixture against PyTorch's own outputs: imported without torch, run by the reference
interpreter and compiled + simulated with every method on the archive's weights and the step's
inputs. Prints, per fixture, the largest |difference| from PyTorch of the logits and of the
appended K/V caches, and whether the next token (argmax) is PyTorch's.

    .venv/bin/python tools/pt2_vs_pytorch.py [PT2_OR_DIR...] [--hw hbm2-pim --set organization.channels=8]
        [--methods naive,greedy,cpsat]

Each archive needs its .npz beside it (tools/make_pt2_fixtures.py writes both).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import ir  # noqa: E402
from hwmodel import load_hardware  # noqa: E402
from ir.pt2 import import_pt2  # noqa: E402
from pimsat import pipeline  # noqa: E402, F401  (installs the simulator as the timing oracle)
from pimsat.pipeline import SolveOptions  # noqa: E402
from pimsat.pt2_run import compile_and_simulate  # noqa: E402
from solver.problem import Method  # noqa: E402

FIXTURES = ROOT / "tests" / "frontend" / "fixtures"


def errors(got: list[np.ndarray], want: list[np.ndarray]) -> tuple[float, float | None, bool]:
    d = [float(np.abs(g.astype(np.float32) - w.astype(np.float32)).max()) for g, w in zip(got, want)]
    return d[0], (max(d[1:]) if len(d) > 1 else None), bool(np.array_equal(got[0].argmax(-1), want[0].argmax(-1)))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("paths", nargs="*", default=[str(FIXTURES)])
    ap.add_argument("--methods", default=",".join(m.value for m in Method))
    ap.add_argument("--hw", default="hbm2-pim")
    ap.add_argument("--set", dest="sets", action="append", default=None)
    args = ap.parse_args()
    hw = load_hardware(args.hw, args.sets if args.sets is not None else ["organization.channels=8"])
    print(f"hardware {hw.name} x{hw.organization.channels}; |err| = max |pimsat - PyTorch| (fp16 ulp at 2..4: 0.00195)")
    print(f"{'fixture':24} {'ops':>4} {'import s':>8}  {'run':10} {'logits':>9} {'K/V':>9} {'argmax':>6} {'cycles':>8}")
    # (a folder's archives without a step beside them, the refusal fixtures, are left out)
    paths = [
        q
        for p in map(Path, args.paths)
        for q in (sorted(x for x in p.glob("*.pt2") if x.with_suffix(".npz").exists()) if p.is_dir() else [p])
    ]
    for path in paths:
        step = dict(np.load(path.with_suffix(".npz")))
        t0 = time.perf_counter()
        imp = import_pt2(path, position=int(step["cache_position"][0]) if "cache_position" in step else None)
        dt = time.perf_counter() - t0
        want = [step[f"out_{i}"] for i in range(len(imp.outputs))]
        inputs, state = imp.step(step)
        rows = [("reference", imp.torch_outputs(ir.run(imp.program, inputs, state)), None)]
        for m in map(Method, args.methods.split(",") if args.methods else []):
            run = compile_and_simulate(hw, imp.program, inputs, state, SolveOptions(method=m, deterministic_time=2.0))
            assert run.verdict.outputs_match and run.verdict.bit_exact
            rows.append((m.value, imp.torch_outputs(run.outputs, banks=run.banks), run.cycles))
        for i, (label, got, cycles) in enumerate(rows):
            lg, kv, same = errors(got, want)
            head = f"{path.stem:24} {len(imp.program.ops):>4} {dt:>8.2f}" if i == 0 else " " * 38
            kv_s = f"{kv:>9.5f}" if kv is not None else f"{'-':>9}"
            print(f"{head}  {label:10} {lg:>9.5f} {kv_s} {'yes' if same else 'NO':>6} {cycles or '':>8}")


if __name__ == "__main__":
    main()
