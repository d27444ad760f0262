"""pimsat command line. Every user error is one line on stderr and exit status 2, a compiler bug
(a program the simulator rejects or that disagrees with the compiler) exit status 3.

The group and the error guard live in cli_base.py; the commands in cli_info.py (show, hw, schema)
and cli_run.py (solve, compare, simulate, demo, bench), which register on the group when imported.
"""

from __future__ import annotations

import sys

from . import cli_bringup, cli_import, cli_info, cli_run  # noqa: F401  (register their commands)
from .cli_base import DEFAULT_INSTANCE, CompilerError, UserError, console, guard, main  # noqa: F401

if __name__ == "__main__":
    sys.exit(main(prog_name="pimsat"))
