"""The prebuilt tests run twice: here, with langchain-core's message classes, and again in a
subprocess that blocks langchain-core (``test_prebuilt_without_langchain.py``).

Until ``threadline.hitl`` is on main, the review tests run on a stand-in of its contract.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

if os.environ.get("THREADLINE_TEST_BLOCK_LANGCHAIN") == "1":
    sys.modules["langchain_core"] = None  # type: ignore[assignment]  # import now fails

if importlib.util.find_spec("threadline.hitl") is None:
    sys.path.insert(0, str(Path(__file__).parent))
    import hitl_standin

    sys.modules["threadline.hitl"] = hitl_standin
