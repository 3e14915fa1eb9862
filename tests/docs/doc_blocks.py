"""The python code blocks of a Markdown page, in order, as a reader would run them.

A block right after a ``<!-- fragment: why -->`` comment is a deliberate fragment (it shows a
piece of a larger program, or needs something a test machine lacks) and is not run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

_FENCE = re.compile(
    r"(?P<marker><!--\s*fragment:(?P<why>[^>]*)-->\s*\n)?```python\n(?P<code>.*?)^```",
    re.DOTALL | re.MULTILINE,
)


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # where the code starts, 1-based
    code: str
    fragment: str | None  # why it is not run, for a marked fragment


def blocks(page: Path) -> list[Block]:
    text = page.read_text()
    found = []
    for match in _FENCE.finditer(text):
        line = text.count("\n", 0, match.start("code")) + 1
        why = match.group("why")
        found.append(Block(page, line, match.group("code"), why.strip() if why else None))
    return found


def script(page: Path) -> str:
    """The page's runnable blocks as one program; each block starts at its own line of the page,
    so a traceback points into the page."""
    lines: list[str] = []
    for block in blocks(page):
        if block.fragment is not None:
            continue
        lines += [""] * (block.line - 1 - len(lines))
        lines += block.code.splitlines()
    return "\n".join(lines) + "\n"
