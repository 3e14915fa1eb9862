"""Every python block of docs/*.md and README.md runs as written (blocks marked
``<!-- fragment: why -->`` excepted), one page at a time, each page's blocks in order in one
fresh interpreter and an empty directory, as a reader pasting them would."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from doc_blocks import blocks, script

ROOT = Path(__file__).resolve().parents[2]
PAGES = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]
RUNNABLE = [p for p in PAGES if any(b.fragment is None for b in blocks(p))]


@pytest.mark.parametrize("page", RUNNABLE, ids=[p.name for p in RUNNABLE])
def test_the_page_runs_as_written(page: Path, tmp_path: Path) -> None:
    program = tmp_path / f"{page.stem}.py"
    program.write_text(script(page))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, str(program)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    # line numbers in the traceback are the page's own
    assert done.returncode == 0, f"{page.name} failed:\n{done.stderr}"


def test_fragments_say_why_and_keep_their_lines(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "intro\n```python\nx = 1\n```\n<!-- fragment: needs a server -->\n```python\n"
        "boom()\n```\n```python\nassert x == 1\n```\n"
    )
    found = blocks(page)
    assert [b.fragment for b in found] == [None, "needs a server", None]
    assert [b.line for b in found] == [3, 7, 10]
    lines = script(page).splitlines()
    assert lines[2] == "x = 1" and lines[9] == "assert x == 1" and "boom()" not in lines


def test_every_fragment_gives_a_reason() -> None:
    for page in PAGES:
        for block in blocks(page):
            assert block.fragment != "", f"{page.name}:{block.line}: say why it is a fragment"
