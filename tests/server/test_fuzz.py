"""The API fuzzed from its own OpenAPI document (schemathesis): no request makes a 5xx.

Endpoints that wait for a run to end (``/wait``, ``/join``, streams) are left out: a generated
``after_seconds`` would make them wait that long; their bad bodies are refused by the same
models as ``POST /threads/{id}/runs``, which is fuzzed.
"""

from __future__ import annotations

import hypothesis
import schemathesis
from harness import RunningServer

SETTINGS = hypothesis.settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=list(hypothesis.HealthCheck),
    derandomize=True,
    database=None,
)


def test_no_request_makes_a_server_error(served: RunningServer) -> None:
    schema = schemathesis.openapi.from_url(f"{served.url}/openapi.json")
    schema = schema.exclude(path_regex=r".*/(wait|join|stream)$")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) > 30  # the whole API, not an empty document

    for operation in operations:

        @SETTINGS
        @hypothesis.given(case=operation.as_strategy())
        def no_server_error(case: schemathesis.Case) -> None:
            response = case.call(timeout=20)
            where = (case.method, case.formatted_path, response.status_code)
            assert response.status_code < 500, (*where, response.text)
            assert "Traceback" not in response.text, where

        no_server_error()
