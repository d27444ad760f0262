"""The command group, the console and the error guard every command uses (commands: cli_info.py,
cli_run.py; cli.py puts them together)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from hwmodel import HardwareError

from .cli_errors import CompilerError, UserError
from .options import PimsatGroup


def __getattr__(name: str):
    """`console`, made on first use (importing rich costs start-up that `--json` output and a
    module that never prints a table do not need); then an ordinary module attribute."""
    if name != "console":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from rich.console import Console

    # Wide tables stay readable when the output is a file or a CI log (no terminal to measure).
    globals()["console"] = c = Console(width=None if sys.stdout.isatty() else 160)
    return c


DEFAULT_INSTANCE = Path(__file__).resolve().parent.parent / "instances" / "micro" / "gemv-4096-hbm2-64ch.yaml"


def cell(v, col) -> str:
    """A table cell: — for None, percentages for gaps and utilisation, thousands separators."""
    if v is None:
        return "—"
    if col in ("gap", "model_gap", "hardware_gap"):
        return f"{v * 100:.2f} %"
    if col == "utilization":
        return f"{v * 100:.1f} %"
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v:,}"
    if isinstance(v, float):
        return f"{v:.2f}"
    return str(v)


def _loaded(*names: str) -> tuple[type, ...]:
    """The exception classes `module:Class` among modules already imported: an error of a class
    whose module was never imported cannot have been raised, so the guard imports nothing."""
    out = []
    for name in names:
        module, _, cls = name.partition(":")
        t = getattr(sys.modules.get(module), cls, None)
        if isinstance(t, type):
            out.append(t)
    return tuple(out)


_USER_ERRORS = (
    "pimsat.instance:InstanceError",
    "ir:IRError",
    "hwmodel.streams_io:StreamsError",
    "pimsat.output:OutputError",
)


def guard(fn):
    """Turn the domain errors every command may raise into one-line exits with status 2."""
    import functools

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except Exception as e:
            if isinstance(e, _loaded("hwmodel.atomic:OutputLocked")):
                raise UserError(f"{e.filename}: {e.strerror}") from None
            if isinstance(e, (HardwareError, *_loaded(*_USER_ERRORS))):
                raise UserError(str(e)) from None
            if isinstance(e, OSError):  # every OS error names its path (write_dir_atomically attaches it)
                where = e.filename if e.filename not in (None, "") else None
                raise UserError(f"{where}: {e.strerror or e}" if where else str(e)) from None
            if isinstance(e, _loaded("pimsat.pipeline:InfeasibleError")):
                raise UserError(f"infeasible: {e}") from None
            if isinstance(e, _loaded("pimsat.pipeline:VerificationError")):
                raise CompilerError(str(e)) from None
            if isinstance(e, _loaded("solver.assemble:DecodeError")):
                # the decoder could not turn a solution into a legal program: a compiler bug
                raise CompilerError(f"decode: {e}") from None
            if isinstance(e, _loaded("sim:SimulationError", "sim.errors:SimulationError")):
                # the simulator rejected a program pimsat emitted: a compiler bug, reported precisely
                raise CompilerError(f"the simulator rejected the emitted program: {e}") from None
            raise

    return wrapper


@click.group(cls=PimsatGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="pimsat")
@click.pass_context
def main(ctx: click.Context) -> None:
    """pimsat — compile LLM decode steps for processing-in-memory DRAM with CP-SAT,
    emit per-channel instruction streams, and verify them in a cycle-accurate simulator."""
    from . import signals

    ctx.call_on_close(signals.install())  # Ctrl-C, SIGTERM: clean up, one line, 130 / 143


__all__ = ["CompilerError", "DEFAULT_INSTANCE", "UserError", "console", "guard", "main"]  # noqa: F822  (console: __getattr__)
