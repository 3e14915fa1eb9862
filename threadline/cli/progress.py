"""Progress bars for commands that walk every thread (``prune``, ``check``).

The library functions they call take no callback, so the bar counts the saver calls those
functions make once per thread, by shadowing that method on the saver instance for the
duration (the saver stays what it was: ``isinstance`` checks and everything else unchanged).
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from threadline.checkpoint.base import BaseSaver


@contextmanager
def counting_calls(
    saver: BaseSaver, method: str, total: int, label: str, *, quiet: bool = False
) -> Iterator[None]:
    """A bar of ``total`` steps advanced by each call of ``saver.<method>``.

    ``quiet`` (``--json``, or no terminal on stderr) shows nothing; the bar goes to stderr
    so stdout stays the command's result.
    """
    if quiet or not sys.stderr.isatty():
        yield
        return
    original: Callable[..., Any] = getattr(saver, method)
    with Progress(
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    ) as bar:
        task = bar.add_task(label, total=total)

        @functools.wraps(original)
        def counted(*args: Any, **kwargs: Any) -> Any:
            try:
                return original(*args, **kwargs)
            finally:
                bar.advance(task)

        setattr(saver, method, counted)
        try:
            yield
        finally:
            delattr(saver, method)
