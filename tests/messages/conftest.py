"""The message tests run twice: here, with langchain-core's classes (it is in the ``dev``
extra), and again in a subprocess that blocks langchain-core (``test_without_langchain.py``),
where ``threadline.messages`` falls back to its light classes.

``THREADLINE_TEST_BLOCK_LANGCHAIN=1`` blocks it: set before anything imports
``threadline.messages``, so the whole run uses the light classes.
"""

from __future__ import annotations

import os
import sys

BLOCK_LANGCHAIN = os.environ.get("THREADLINE_TEST_BLOCK_LANGCHAIN") == "1"

if BLOCK_LANGCHAIN:
    sys.modules["langchain_core"] = None  # type: ignore[assignment]  # import now fails
