"""Commands that read inputs and print them: show, hw, schema."""

from __future__ import annotations

import json

import click
from rich.table import Table

from hwmodel import load_hardware, preset_names

from .cli_base import DEFAULT_INSTANCE, UserError, console, guard, main
from .instance import instance_files, load_instance
from .sizes import format_bytes, resident_bytes


@main.command()
@click.argument("instances", nargs=-1, type=click.Path())
@click.option("--hw", "preset", default=None, help="Hardware preset or YAML file (default: the instance's).")
@click.option("--set", "sets", multiple=True, help="Hardware override KEY=VALUE, e.g. pim.lanes=32.")
@guard
def show(instances, preset, sets) -> None:
    """Show instances: ops, weight and KV bytes, and whether they fit the hardware."""
    paths = [p for arg in (instances or [str(DEFAULT_INSTANCE)]) for p in instance_files(arg)]
    if not paths:
        raise UserError("no instance files found")
    t = Table(title="instances")
    for col in ("instance", "tier", "hardware", "ops", "weights", "KV cache", "capacity", "fits"):
        t.add_column(col, justify="right" if col in ("ops", "weights", "KV cache", "capacity") else "left")
    for path in paths:
        inst = load_instance(path)
        prog = inst.build_program()
        hw = inst.build_hardware(sets, preset)
        need = resident_bytes(prog)
        cap = hw.organization.capacity_bytes
        fits = (
            f"yes ({(cap - need) / cap * 100:.0f} % free)" if need <= cap else f"NO (short {format_bytes(need - cap)})"
        )
        t.add_row(
            inst.name,
            inst.tier,
            f"{hw.name} ×{hw.organization.channels}",
            str(len(prog.ops)),
            format_bytes(prog.weight_bytes()),
            format_bytes(prog.kv_bytes()),
            format_bytes(cap),
            fits,
        )
    console.print(t)


@main.command()
@click.argument("preset", default="hbm2-pim")
@click.option("--set", "sets", multiple=True, help="Override KEY=VALUE, e.g. organization.channels=8.")
@click.option(
    "--rows", is_flag=True, help="List the timing table with row indices (--set timing.constraints[I].latency=...)."
)
@guard
def hw(preset, sets, rows) -> None:
    """Show a hardware preset's derived figures (presets: see `pimsat hw --help`)."""
    from hwmodel.derived import figures

    h = load_hardware(preset, list(sets))
    if rows:
        r = Table(title=f"{h.name}: timing table (timing.refresh_mode = {h.timing.refresh_mode})")
        for col in ("index", "prev", "next", "scope", "latency", "cycles", "window"):
            r.add_column(col, justify="right" if col in ("index", "cycles", "window") else "left")
        for i, c in enumerate(h.timing.constraints):
            r.add_row(str(i), c.prev, c.next, c.scope, str(c.latency), str(h.timing.latency_of(c)), str(c.window or ""))
        console.print(r)
        return
    t = Table(title=f"{h.name} (ISA {h.isa_version})")
    t.add_column("figure")
    t.add_column("value", justify="right")
    t.add_column("unit")
    for f in figures(h):
        v = f"{f.value:,.0f}" if float(f.value).is_integer() else f"{f.value:,.3f}"
        t.add_row(f.name, v, f.unit)
    console.print(t)
    console.print(f"presets: {', '.join(preset_names())}")


@main.command()
@click.argument("what", type=click.Choice(["instance", "hardware"]), default="instance")
def schema(what) -> None:
    """Print the JSON Schema of instance or hardware files."""
    from hwmodel import Hardware

    from .instance import Instance

    model = Instance if what == "instance" else Hardware
    click.echo(json.dumps(model.model_json_schema(), indent=2))
