"""The CLI's exit contract: a user error is one line and exit status 2, a compiler bug 3."""

from __future__ import annotations

import click


class UserError(click.ClickException):
    exit_code = 2

    def show(self, file=None) -> None:  # one line, no traceback
        click.echo(f"pimsat: error: {self.message}", err=True)


class CompilerError(UserError):
    exit_code = 3
