"""Command-line option types with the ranges CP-SAT and the pipeline accept, and click's usage
errors as one line (`pimsat: error: --workers: 0 is not in the range 1<=x<=256`).

Ranges: --workers 1..WORKERS_MAX (CP-SAT's num_workers is an int32; more threads than this
only thrash); --seed an int32 (CP-SAT's random_seed); --time-limit finite, > 0 and at most
MAX_SECONDS (the solver's watchdog is a threading.Timer, which refuses huge timeouts);
--deterministic-time finite and >= 0.
"""

from __future__ import annotations

import math

import click

WORKERS_MAX = 256
INT32 = (-(2**31), 2**31 - 1)
MAX_SECONDS = 1e6  # 11.6 days


class FiniteFloat(click.ParamType):
    """A finite float in [lo, hi] (lo excluded when `lo_open`): refuses inf and nan."""

    name = "float"

    def __init__(self, lo: float, hi: float = math.inf, lo_open: bool = False) -> None:
        self.lo, self.hi, self.lo_open = lo, hi, lo_open

    def convert(self, value, param, ctx):
        try:
            v = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number", param, ctx)
        if not math.isfinite(v):
            self.fail(f"{value} is not a finite number", param, ctx)
        if v < self.lo or (self.lo_open and v == self.lo):
            self.fail(f"{value} must be {'>' if self.lo_open else '>='} {self.lo:g}", param, ctx)
        if v > self.hi:
            self.fail(f"{value} must be <= {self.hi:g}", param, ctx)
        return v


TIME_LIMIT = FiniteFloat(0.0, MAX_SECONDS, lo_open=True)
DETERMINISTIC_TIME = FiniteFloat(0.0)
WORKERS = click.IntRange(1, WORKERS_MAX)
SIM_JOBS_HELP = (
    "Threads simulating channel streams at once (0: one per core for programs of 4 M channel "
    "instructions or more, else 1); the result and any error are those of 1 (one after another)."
)
SIM_JOBS = click.IntRange(0, WORKERS_MAX)
LOWER_JOBS_HELP = (
    "Processes timing the distinct PIM op shapes of a large program before lowering (0: one per "
    "core); the lowered problem is that of 1. Small programs are lowered in one."
)


SEED = click.IntRange(*INT32)


def nonempty(ctx, param, value):
    """Callback refusing an empty string (`--out ''` would name the current folder's parent)."""
    if value is not None and not str(value).strip():
        raise click.BadParameter("must not be empty", ctx=ctx, param=param)
    return value


def usage_line(e: click.UsageError) -> str:
    """`OPTION: reason` for click's usage errors, without the usage banner."""
    param = getattr(e, "param", None)
    if isinstance(e, click.NoSuchOption):
        hint = f" (did you mean {', '.join(e.possibilities)}?)" if e.possibilities else ""
        return f"{e.option_name}: no such option{hint}"
    if isinstance(e, click.BadParameter) and param is not None:
        name = (
            param.opts[0]
            if getattr(param, "opts", None) and param.param_type_name == "option"
            else (param.human_readable_name if param else "argument")
        )
        if isinstance(e, click.MissingParameter):
            return f"{name}: missing"
        return f"{name}: {e.message.rstrip('.')}"
    return e.format_message().rstrip(".")


class InterruptedExit(click.ClickException):
    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.exit_code = code

    def show(self, file=None) -> None:
        click.echo(self.message, err=True)


class PimsatGroup(click.Group):
    """A group whose usage errors (bad option values, unknown options) are one line, exit 2.

    Commands load lazily: `lazy` maps a command name to the modules that define it (they
    register on the group when imported), so `pimsat simulate` imports the simulator and not the
    solver, the IR or the bring-up tools. Listing the commands (`--help`) imports them all."""

    lazy: dict[str, tuple[str, ...]] = {}

    def _load(self, modules) -> None:
        import importlib

        for m in modules:
            importlib.import_module(m)

    def get_command(self, ctx, name):
        # a name not in `lazy` (a new command not listed yet, a typo) loads every module first
        self._load(self.lazy[name] if name in self.lazy else dict.fromkeys(m for ms in self.lazy.values() for m in ms))
        return super().get_command(ctx, name)

    def list_commands(self, ctx):
        self._load(dict.fromkeys(m for ms in self.lazy.values() for m in ms))
        return super().list_commands(ctx)

    def _one_line(self, call, *args, **kwargs):
        from . import signals
        from .cli_errors import UserError

        try:
            return call(*args, **kwargs)
        except click.exceptions.NoArgsIsHelpError:
            raise
        except click.UsageError as e:
            raise UserError(usage_line(e)) from None
        except KeyboardInterrupt as e:  # SIGINT / SIGTERM / SIGHUP: pimsat.signals
            raise InterruptedExit(signals.message(e), signals.exit_code(e)) from None

    def make_context(self, *args, **kwargs):
        return self._one_line(super().make_context, *args, **kwargs)

    def invoke(self, ctx):
        return self._one_line(super().invoke, ctx)


#: Default CP-SAT work budget, deterministic seconds. On the 2-core machine CI runs on, the random
#: 835-task problem of `python bench/solver_bench.py --sizes 800 --time-limit 10` used 0.83-1.00
#: deterministic s in 10 s of wall time, so 2.5 ends after about 25-30 s, inside the 60 s
#: wall-clock guard; every repository instance ends by proof much sooner.
DEFAULT_WORK_BUDGET = 2.5
