"""httpx is optional: without it the protocol and the scripted model work, and the HTTP client
says how to install what it needs."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).parents[2]  # the subprocess runs here, to import this checkout


def test_threadline_models_imports_without_httpx() -> None:
    code = """
        import sys
        sys.modules["httpx"] = None  # import now fails
        from threadline.models import ScriptedChatModel
        print(ScriptedChatModel(["still works"]).invoke("hi").content)
        try:
            from threadline.models import OpenAIChatModel
        except ModuleNotFoundError as exc:
            print(exc.name, "|", exc)
        """
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "still works",
        "httpx | OpenAIChatModel needs httpx: pip install 'threadline[openai]'",
    ]
