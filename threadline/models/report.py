"""Where a model's tokens go while a graph runs: stream mode ``messages``.

The models here report their own tokens (they are not langchain-core models, whose tokens
reach the stream through its callbacks), through the engine's ``get_message_writer``. This
module is the one place that knows how.
"""

from __future__ import annotations

import contextvars
import functools
from collections.abc import Callable
from typing import Any

from threadline.runtime.tokens import get_message_writer

TokenWriter = Callable[[Any], None]


def token_writer() -> TokenWriter | None:
    """The writer of the running task's ``messages`` stream; None when nothing listens.

    With None, a model need not stream: ``invoke`` then makes one plain request.
    """
    write = get_message_writer()
    return None if write is _idle_writer() else write


@functools.cache
def _idle_writer() -> TokenWriter:
    """What ``get_message_writer`` gives where no run streams messages: its answer in an
    empty context, outside any task."""
    return contextvars.Context().run(get_message_writer)
