"""Without langchain-core: the prebuilt tests again, in a subprocess that cannot import it,
where messages are threadline's light classes and tools plain functions."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from threadline.messages import USES_LANGCHAIN

pytestmark = pytest.mark.skipif(
    not USES_LANGCHAIN, reason="this run already has no langchain-core (or is the subprocess)"
)
HERE = Path(__file__).parent
ROOT = HERE.parents[1]  # the subprocess runs here, so that it imports this checkout's threadline


def test_the_prebuilt_tests_pass_with_the_light_classes() -> None:
    others = sorted(
        str(p.relative_to(ROOT)) for p in HERE.glob("test_*.py") if p.name != Path(__file__).name
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "-x", *others],
        cwd=ROOT,
        env={**os.environ, "THREADLINE_TEST_BLOCK_LANGCHAIN": "1"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert " passed" in done.stdout and " failed" not in done.stdout
    skips = [line for line in done.stdout.splitlines() if line.startswith("SKIPPED")]
    assert all("needs langchain-core" in line for line in skips), skips
