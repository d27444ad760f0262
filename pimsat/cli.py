"""pimsat command line. Every user error is one line on stderr and exit status 2."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from hwmodel import HardwareError, load_hardware, preset_names

from .instance import InstanceError, instance_files, load_instance
from .options import PimsatGroup
from .sizes import format_bytes, resident_bytes

# Wide tables stay readable when the output is a file or a CI log (no terminal to measure).
console = Console(width=None if sys.stdout.isatty() else 160)

DEFAULT_INSTANCE = Path(__file__).resolve().parent.parent / "instances" / "micro" / "gemv-4096-hbm2-64ch.yaml"


class UserError(click.ClickException):
    exit_code = 2

    def show(self, file=None) -> None:  # one line, no traceback
        click.echo(f"pimsat: error: {self.message}", err=True)


def _guard(fn):
    """Turn the domain errors every command may raise into one-line exits with status 2."""
    import functools

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        from hwmodel.atomic import OutputLocked
        from hwmodel.streams_io import StreamsError
        from ir import IRError

        from .output import OutputError

        try:
            return fn(*args, **kwargs)
        except OutputLocked as e:
            raise UserError(f"{e.filename}: {e.strerror}") from None
        except (InstanceError, HardwareError, IRError, StreamsError, OutputError) as e:
            raise UserError(str(e)) from None
        except OSError as e:  # every OS error names its path (write_dir_atomically attaches it)
            where = e.filename if e.filename not in (None, "") else None
            raise UserError(f"{where}: {e.strerror or e}" if where else str(e)) from None
        except _infeasible_types() as e:
            raise UserError(f"infeasible: {e}") from None
        except _verification_types() as e:
            raise CompilerError(str(e)) from None
        except _simulation_error() as e:
            # the simulator rejected a program pimsat emitted: a compiler bug, reported precisely
            raise CompilerError(f"the simulator rejected the emitted program: {e}") from None

    return wrapper


class CompilerError(UserError):
    exit_code = 3


def _simulation_error():
    from sim import SimulationError

    return SimulationError


def _infeasible_types():
    from .pipeline import InfeasibleError

    return (InfeasibleError,)


def _verification_types():
    from .pipeline import VerificationError

    return (VerificationError,)


@click.group(cls=PimsatGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="pimsat")
@click.pass_context
def main(ctx: click.Context) -> None:
    """pimsat — compile LLM decode steps for processing-in-memory DRAM with CP-SAT,
    emit per-channel instruction streams, and verify them in a cycle-accurate simulator."""
    from . import signals

    ctx.call_on_close(signals.install())  # Ctrl-C, SIGTERM: clean up, one line, 130 / 143


# ---------------------------------------------------------------------------------------------
@main.command()
@click.argument("instances", nargs=-1, type=click.Path())
@click.option("--hw", "preset", default=None, help="Hardware preset or YAML file (default: the instance's).")
@click.option("--set", "sets", multiple=True, help="Hardware override KEY=VALUE, e.g. pim.lanes=32.")
@_guard
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
        fits = f"yes ({(cap - need) / cap * 100:.0f} % free)" if need <= cap else f"NO (short {format_bytes(need - cap)})"
        t.add_row(inst.name, inst.tier, f"{hw.name} ×{hw.organization.channels}", str(len(prog.ops)),
                  format_bytes(prog.weight_bytes()), format_bytes(prog.kv_bytes()), format_bytes(cap), fits)
    console.print(t)


@main.command()
@click.argument("preset", default="hbm2-pim")
@click.option("--set", "sets", multiple=True, help="Override KEY=VALUE, e.g. organization.channels=8.")
@_guard
def hw(preset, sets) -> None:
    """Show a hardware preset's derived figures (presets: see `pimsat hw --help`)."""
    from hwmodel.derived import figures

    h = load_hardware(preset, list(sets))
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


from . import cli_run  # noqa: E402,F401  (solve, compare, simulate, demo, bench)

if __name__ == "__main__":
    # `python -m pimsat.cli` runs this file as __main__; the commands registered themselves on
    # the `main` of the imported module pimsat.cli, so run that one.
    from pimsat.cli import main as _registered_main

    sys.exit(_registered_main(prog_name="pimsat"))
