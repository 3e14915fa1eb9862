"""Where a model's tokens go while a graph runs: stream mode ``messages``.

The models here report their own tokens (they are not langchain-core models, whose tokens
reach the stream through its callbacks). This module is the one place that knows how.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

TokenWriter = Callable[[Any], None]


def token_writer() -> TokenWriter | None:
    """The writer of the running task's ``messages`` stream; None when nothing listens.

    With None, a model need not stream: ``invoke`` then makes one plain request.
    """
    return None
