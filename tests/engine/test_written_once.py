"""A large value set once in a run is stored once, however many checkpoints follow it.

The saver-level tests give savers hand-made records; this runs a real graph, so the engine's
versions and storage hints are what keep an unchanged value from being written again.
"""

from __future__ import annotations

import operator
import os
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path
from typing import Annotated, TypedDict

import pytest
from factories import SAVER_FACTORIES
from storage import stored_sizes

from threadline import END, START, StateGraph
from threadline.checkpoint import BaseSaver

MB = 1024 * 1024
BUMPS = 9


class State(TypedDict, total=False):
    payload: bytes
    count: Annotated[int, operator.add]


@pytest.fixture(params=["files", "postgres", "redis", "sqlite"])
def durable_saver(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BaseSaver]:
    with SAVER_FACTORIES[request.param](tmp_path) as instance:
        yield instance


def set_once_then_bump(saver: BaseSaver, payload: bytes):
    """START -> load (sets ``payload``) -> bump_1 ... bump_9 (each adds 1 to ``count``) -> END."""
    g = StateGraph(State)
    g.add_node("load", lambda s: {"payload": payload})
    names = ["load", *(f"bump_{i}" for i in range(1, BUMPS + 1))]
    for name in names[1:]:
        g.add_node(name, lambda s: {"count": 1})
    g.add_edge(START, names[0])
    for a, b in pairwise(names):
        g.add_edge(a, b)
    g.add_edge(names[-1], END)
    return g.compile(checkpointer=saver)


def test_a_value_set_once_is_stored_once(durable_saver: BaseSaver) -> None:
    """Random bytes do not compress, so a second copy anywhere would show as a second item of
    1 MB or more, or push the total past 1.5 MB."""
    payload = os.urandom(MB)
    graph = set_once_then_bump(durable_saver, payload)
    config = {"configurable": {"thread_id": "big"}}
    assert graph.invoke({"count": 0}, config) == {"payload": payload, "count": BUMPS}
    assert len(list(graph.get_state_history(config))) == BUMPS + 3  # input, START, load, bumps

    sizes = stored_sizes(durable_saver)
    assert sum(1 for size in sizes if size >= MB) == 1
    assert sum(sizes) < 1.5 * MB
