"""pimsat command line. Every user error is one line on stderr and exit status 2, a compiler bug
(a program the simulator rejects or that disagrees with the compiler) exit status 3.

The group and the error guard live in cli_base.py; the commands in cli_info.py (show, hw, schema),
cli_run.py (solve, compare, demo, bench), cli_simulate.py (simulate), cli_bringup.py (export-fpga,
check-bundle, testgen, rtl-run, schema bundle), cli_import.py (import) and cli_sweep.py (sweep),
which register on the group when imported; COMMANDS below says which to import for a command.
"""

from __future__ import annotations

import sys

from .cli_base import DEFAULT_INSTANCE, CompilerError, UserError, guard, main  # noqa: F401

#: command -> the modules that define it, imported when the command runs (start-up: a command
#: loads only what it needs; tests/pimsat/test_cli.py checks every command is listed)
COMMANDS: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(("show", "hw"), ("pimsat.cli_info",)),
    "schema": ("pimsat.cli_info", "pimsat.cli_bringup"),  # bring-up adds `schema bundle`
    **dict.fromkeys(("solve", "compare", "demo", "bench"), ("pimsat.cli_run",)),
    "simulate": ("pimsat.cli_simulate",),
    **dict.fromkeys(("export-fpga", "check-bundle", "testgen", "rtl-run"), ("pimsat.cli_bringup",)),
    "import": ("pimsat.cli_import",),
    "sweep": ("pimsat.cli_sweep",),
}
main.lazy = COMMANDS


def __getattr__(name: str):
    if name == "console":  # made on first use (cli_base)
        from . import cli_base

        return cli_base.console
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if __name__ == "__main__":
    sys.exit(main(prog_name="pimsat"))
