"""The shared encoding's walk over stored rows (``threadline.checkpoint.layout``)."""

from __future__ import annotations

import enum

from threadline import serde
from threadline.checkpoint import layout
from threadline.checkpoint.layout import BlobRow, assemble_values


def test_a_chain_longer_than_a_hundred_thousand_deltas_loads() -> None:
    """PostgreSQL writes a full copy only after 1 MiB of deltas: a list growing by a small
    item a step makes chains of hundreds of thousands of rows, which are not a loop."""
    n = 120_000
    pool = {("k", "0"): BlobRow("k", "0", "0", None, 0, 3, serde.DEFAULT.dumps([]), 0)}
    for i in range(1, n + 1):
        data = serde.DEFAULT.dumps([i])
        pool[("k", str(i))] = BlobRow("k", str(i), "0", str(i - 1), 4 * i, 3, data, i)
    values = assemble_values({"k": str(n)}, pool)
    assert len(values["k"]) == n and values["k"][-1] == n


def test_only_small_plain_scalars_are_inlined() -> None:
    """Exact types only (an enum is an int subclass: its class must survive, so it goes to a
    blob), and strings or bytes of at most 64 characters."""

    class Level(enum.IntEnum):
        LOW = 1

    values = {
        "int": 7,
        "float": 0.5,
        "bool": True,
        "none": None,
        "short": "s" * 64,
        "raw": b"r" * 64,
        "long": "s" * 65,
        "enum": Level.LOW,
        "tuple": (1,),
        "list": [1],
    }
    assert layout.inlined(values) == {
        k: values[k] for k in ("int", "float", "bool", "none", "short", "raw")
    }
