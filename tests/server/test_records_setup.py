"""Several processes opening the server's records at once on PostgreSQL all succeed."""

from __future__ import annotations

import subprocess
import sys
import uuid

import psycopg
from services import require_postgres

OPEN = (
    "import sys; from threadline.server.db import Database; "
    "Database(sys.argv[1], schema=sys.argv[2]).close()"
)


def test_processes_starting_together_create_the_tables_once() -> None:
    url = require_postgres()
    schema = f"tl_setup_{uuid.uuid4().hex[:8]}"
    try:
        for _ in range(2):  # a race may need a second try to show
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
            procs = [
                subprocess.Popen([sys.executable, "-c", OPEN, url, schema], stderr=subprocess.PIPE)
                for _ in range(4)
            ]
            errors = [p.communicate(timeout=60)[1].decode() for p in procs]
            assert [p.returncode for p in procs] == [0, 0, 0, 0], errors
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
