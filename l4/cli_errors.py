"""How every l4 command reports an expected failure: one line on stderr and an exit code."""

from __future__ import annotations

import typer


def fail(msg: str, code: int = 2) -> None:
    """Print ``error: msg`` on stderr and exit with ``code`` (2: bad input, 1: refused)."""
    typer.echo(f"error: {msg}", err=True)
    raise typer.Exit(code)
