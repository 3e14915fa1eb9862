"""``threadline``: the command line (typer + rich, the ``cli`` extra). See docs/cli.md."""

from __future__ import annotations


def main() -> None:
    """The console script's entry point."""
    from threadline.cli.app import app

    app(prog_name="threadline")


__all__ = ["main"]
