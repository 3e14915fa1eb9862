"""Record what real LangGraph prints for each compat program (``expected/<name>.txt``).

Run it with LangGraph's own interpreter, not threadline's (see README.md in this folder)::

    python tests/compat/record.py --python .venv-lg/bin/python [NAME ...]

Each program runs twice; one whose two outputs differ is not recorded (its output is not
deterministic, so it cannot be compared). A program that fails under LangGraph is not recorded
either. The exit status is non-zero if any program was left unrecorded.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROGRAMS = HERE / "programs"
EXPECTED = HERE / "expected"
TIMEOUT = 120  # seconds per run


def program_env() -> dict[str, str]:
    """The environment every program runs in, here and under threadline: fixed hash seed."""
    env = dict(os.environ)
    env["PYTHONHASHSEED"] = "0"
    env.pop("PYTHONPATH", None)
    return env


def run_once(python: str, program: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [python, str(program)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=program_env(),
        cwd=HERE,
    )


def record(python: str, program: Path) -> str | None:
    """Write the expected output of ``program``; return why it was not written, if it was not."""
    first = run_once(python, program)
    if first.returncode != 0:
        last = (first.stderr.strip().splitlines() or ["(no stderr)"])[-1]
        return f"exit {first.returncode}: {last}"
    second = run_once(python, program)
    if second.stdout != first.stdout:
        return "output differs between two runs"
    (EXPECTED / f"{program.stem}.txt").write_text(first.stdout)
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", required=True, help="interpreter with LangGraph installed")
    parser.add_argument("names", nargs="*", help="program names (default: all)")
    args = parser.parse_args()
    if os.sep in args.python:
        args.python = os.path.abspath(args.python)
    check = subprocess.run(
        [
            args.python,
            "-c",
            "import langgraph, importlib.metadata as m; print(m.version('langgraph'))",
        ],
        capture_output=True,
        text=True,
    )
    if check.returncode != 0:
        print(f"{args.python} cannot import langgraph:\n{check.stderr}", file=sys.stderr)
        return 2
    print(f"recording with langgraph {check.stdout.strip()}")
    EXPECTED.mkdir(exist_ok=True)
    programs = sorted(PROGRAMS.glob("*.py"))
    if args.names:
        programs = [p for p in programs if p.stem in set(args.names)]
    failed = 0
    for program in programs:
        problem = record(args.python, program)
        failed += problem is not None
        print(
            f"{'FAIL' if problem else 'ok  '} {program.stem}" + (f": {problem}" if problem else "")
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
