"""`pimsat import`: a torch.export archive (.pt2) or a Hugging Face config.json to program JSON.

Both frontends meet at one ir.Program: an exported decode step is imported with its own weights
(written beside the program with --weights), a config.json is built by ir.build_decode_step.
"""

from __future__ import annotations

import json
from pathlib import Path

import click
import numpy as np

import ir
from hwmodel.atomic import atomic_open

from .cli_base import UserError, console, guard, main
from .sizes import format_bytes


def load_program(source: str, position: int | None, batch: int, layers: int | None) -> tuple[ir.Program, dict]:
    """The program a .pt2 archive or a config.json describes, and its weights (empty for a config)."""
    path = Path(source)
    if not path.is_file():
        raise UserError(f"{source}: no such file")
    if path.suffix == ".pt2":
        from ir.pt2 import import_pt2

        imp = import_pt2(path, position=position)
        return imp.program, imp.weights
    if path.suffix != ".json":
        raise UserError(f"{source}: expected a torch.export archive (.pt2) or a Hugging Face config (.json)")
    try:
        cfg = json.loads(path.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise UserError(f"{source}: not JSON ({e})") from None
    if not isinstance(cfg, dict):
        raise UserError(f"{source}: (top level): must be a mapping")
    if position is None:
        raise UserError(f"{source}: --position is required for a config.json (the tokens already cached)")
    try:
        model = ir.from_hf_config(
            cfg, name=path.parent.name if path.name == "config.json" else path.stem.removesuffix(".config")
        )
    except ir.IRError as e:
        raise UserError(f"{source}: {e}") from None
    except ValueError as e:  # the model's own checks (pydantic)
        raise UserError(f"{source}: {str(e).splitlines()[-1].strip()}") from None
    return ir.build_decode_step(model, batch=batch, context=position, layers=layers), {}


@main.command("import")
@click.argument("source", type=click.Path())
@click.option("--position", type=int, default=None, help="Position of the step's token (.pt2: the cache's length).")
@click.option("--batch", type=int, default=1, show_default=True, help="Sequences per step (config.json only).")
@click.option("--layers", type=int, default=None, help="First N decoder layers only (config.json only).")
@click.option("--out", required=True, type=click.Path(), help="Program JSON to write.")
@click.option("--weights", "weights_path", type=click.Path(), default=None, help="Also write the weights (.npz).")
@guard
def import_(source, position, batch, layers, out, weights_path) -> None:
    """Import SOURCE (an exported decode step .pt2, or a config.json) as a pimsat program."""
    if position is not None and position < 0:
        raise UserError(f"--position: must be >= 0, got {position}")
    program, weights = load_program(source, position, batch, layers)
    with atomic_open(out, binary=False) as f:
        f.write(program.to_json(indent=1))
    if weights_path:
        if not weights:
            raise UserError(f"{source}: --weights: a config.json has no weights")
        with atomic_open(weights_path, binary=True) as f:
            np.savez(f, **weights)
    for note in program.meta.get("pt2_notes", []):
        console.print(f"note: {note}")
    kinds = sorted({op.kind.value for op in program.ops})
    console.print(
        f"{program.name}: {len(program.ops)} ops ({', '.join(kinds)}), weights {format_bytes(program.weight_bytes())}, "
        f"KV cache {format_bytes(program.kv_bytes())}, position {program.meta.get('position')}; wrote {out}"
    )
