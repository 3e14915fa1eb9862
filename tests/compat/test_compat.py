"""LangGraph's documented programs, run under threadline, print exactly what LangGraph prints.

Each program in ``programs/`` runs in its own interpreter through ``shim.py`` (which only renames
``langgraph.*`` imports to threadline's modules); its stdout must equal ``expected/<name>.txt``,
recorded from LangGraph 1.2.22 by ``record.py``. Programs listed in ``known_failures.txt`` are
expected to fail (strict: one that starts passing fails the run, so the list is kept current).
"""

from __future__ import annotations

import difflib
import importlib.util
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from services import require_postgres

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
PROGRAMS = HERE / "programs"
EXPECTED = HERE / "expected"
SHIM = HERE / "shim.py"
TIMEOUT = 60  # seconds per program
POSTGRES_ENV = "THREADLINE_TEST_POSTGRES_URL"
COMPAT_DATABASE = "threadline_compat"


def known_failures() -> dict[str, str]:
    """``known_failures.txt``: one ``name  reason`` per line; ``#`` starts a comment."""
    failures = {}
    for line in (HERE / "known_failures.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, reason = line.partition(" ")
            failures[name] = reason.strip() or "known failure"
    return failures


def program_params() -> list[pytest.param]:
    failing = known_failures()
    unknown = set(failing) - {p.stem for p in PROGRAMS.glob("*.py")}
    if unknown:
        raise ValueError(f"known_failures.txt names programs that do not exist: {sorted(unknown)}")
    params = []
    for program in sorted(PROGRAMS.glob("*.py")):
        marks = []
        if program.stem in failing:
            marks.append(pytest.mark.xfail(reason=failing[program.stem], strict=True))
        params.append(pytest.param(program, id=program.stem, marks=marks))
    return params


def run_under_threadline(program: Path, env_extra: dict[str, str]) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONHASHSEED="0", PYTHONPATH=str(ROOT), **env_extra)
    return subprocess.run(
        [sys.executable, str(SHIM), str(program)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=env,
        cwd=HERE,
    )


@pytest.fixture(scope="session")
def compat_postgres_url() -> Iterator[str]:
    """A fresh database for the programs: they use the default schema, as LangGraph's docs do,
    so tables an earlier run (or another version of threadline) left there must not be seen."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    url = require_postgres()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {COMPAT_DATABASE} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {COMPAT_DATABASE}")
    yield make_conninfo(**{**conninfo_to_dict(url), "dbname": COMPAT_DATABASE})
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {COMPAT_DATABASE} WITH (FORCE)")


@pytest.mark.parametrize("program", program_params())
def test_program_prints_what_langgraph_prints(
    program: Path, request: pytest.FixtureRequest
) -> None:
    expected_file = EXPECTED / f"{program.stem}.txt"
    assert expected_file.exists(), f"no recorded output: run tests/compat/record.py {program.stem}"
    source = program.read_text()
    if "langchain_core" in source and importlib.util.find_spec("langchain_core") is None:
        pytest.skip("needs langchain-core")
    env_extra = {}
    if POSTGRES_ENV in source:
        env_extra[POSTGRES_ENV] = request.getfixturevalue("compat_postgres_url")

    result = run_under_threadline(program, env_extra)

    expected = expected_file.read_text()
    problems = []
    if result.stdout != expected:
        diff = difflib.unified_diff(
            expected.splitlines(keepends=True),
            result.stdout.splitlines(keepends=True),
            fromfile="langgraph",
            tofile="threadline",
        )
        problems.append("stdout differs:\n" + "".join(diff))
    if result.returncode != 0:
        problems.append(f"exit status {result.returncode}; stderr:\n{result.stderr[-3000:]}")
    if problems:
        pytest.fail(f"{program.name}: " + "\n".join(problems), pytrace=False)
