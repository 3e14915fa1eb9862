"""The prebuilt tests run twice: here, with langchain-core's message classes, and again in a
subprocess that blocks langchain-core (``test_prebuilt_without_langchain.py``).
"""

from __future__ import annotations

import os
import sys

if os.environ.get("THREADLINE_TEST_BLOCK_LANGCHAIN") == "1":
    sys.modules["langchain_core"] = None  # type: ignore[assignment]  # import now fails
