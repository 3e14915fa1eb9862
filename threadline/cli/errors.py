"""Exit codes and the one place errors become a message and a code (never a traceback).

The codes are a contract with scripts, so each means one thing in every command:

====  ==================================================================================
0     done
1     failed: a run raised, a saver could not be reached, or another library error
2     bad usage or input: an unknown option (typer's own code), a value that is not JSON,
      an unknown URL scheme, a config file or graph spec that does not load
3     not found: no such thread, checkpoint, interrupt or API key
4     nothing to do or a conflict: nothing to resume, several interrupts and no choice, the
      thread moved under us
5     ``check`` found threads this graph cannot continue
====  ==================================================================================
"""

from __future__ import annotations

import os
from typing import Any

import typer
from typer.core import TyperGroup

from threadline import errors

OK, FAILED, USAGE, NOT_FOUND, CONFLICT, PROBLEMS = 0, 1, 2, 3, 4, 5

# most specific first: InvalidAnswerError is an InvalidResumeError, ConfigError a ValueError
_CODES: tuple[tuple[type[BaseException], int], ...] = (
    (errors.ThreadNotFoundError, NOT_FOUND),
    (errors.CheckpointNotFoundError, NOT_FOUND),
    (errors.InvalidAnswerError, USAGE),
    (errors.NothingToResumeError, CONFLICT),
    (errors.InvalidResumeError, CONFLICT),
    (errors.ConcurrentUpdateError, CONFLICT),
    (errors.ConfigError, USAGE),
    (errors.InvalidSchemaError, USAGE),
    (errors.GraphValidationError, USAGE),
)


class CliError(Exception):
    """A failure the CLI itself detects, with the exit code it means."""

    def __init__(self, message: str, code: int = FAILED) -> None:
        super().__init__(message)
        self.code = code


def exit_code(exc: BaseException) -> int:
    """The exit code an error means (see the module's table)."""
    if isinstance(exc, CliError):
        return exc.code
    for kind, code in _CODES:
        if isinstance(exc, kind):
            return code
    return FAILED


def fail(exc: BaseException) -> typer.Exit:
    """Print ``exc`` as one line on stderr; the ``Exit`` to raise with its code."""
    message = str(exc) or type(exc).__name__
    if not isinstance(exc, CliError | errors.ThreadlineError):
        message = f"{type(exc).__name__}: {message}"
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(exit_code(exc))


class ErrorsToExitCodes(TyperGroup):
    """The root command group: every subcommand runs inside it, so errors are handled here once.

    Library errors (``ThreadlineError``), the CLI's own (``CliError``) and failures of the
    user's graph code or of a saver's driver are printed as one line with their exit code
    (with ``THREADLINE_DEBUG=1``, with their traceback too). typer's own exceptions (usage
    errors, ``--help``, ``Exit``, ``Abort``) pass through.
    """

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except (typer.TyperException, typer.Exit, typer.Abort):
            raise
        except Exception as exc:  # also the user's graph code or a driver: no traceback
            if os.environ.get("THREADLINE_DEBUG"):
                import traceback

                traceback.print_exc()
            raise fail(exc) from None
