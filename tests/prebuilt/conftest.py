"""Until ``threadline.hitl`` is on main, the review tests run on a stand-in of its contract."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

if importlib.util.find_spec("threadline.hitl") is None:
    sys.path.insert(0, str(Path(__file__).parent))
    import hitl_standin

    sys.modules["threadline.hitl"] = hitl_standin
