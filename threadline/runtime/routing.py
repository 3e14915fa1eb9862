"""Where a graph goes after a node wrote: its ``goto`` targets, its edges, what its branches pick.

Used for every task a run finishes, for the input (START's edges and branches) and for
``update_state(as_node=...)``, which routes as if that node had written, outside any run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from threadline.constants import END
from threadline.errors import InvalidUpdateError
from threadline.graph.spec import Branch, GraphSpec
from threadline.runtime.writes import Update, applied
from threadline.types import Send

if TYPE_CHECKING:
    from threadline.runtime.context import TaskContext

Routes = tuple[str | Send, ...]


def routes_after(
    spec: GraphSpec,
    name: str,
    values: Mapping[str, Any],
    updates: Update,
    gotos: Routes,
    ctx: TaskContext | None,
) -> Routes:
    """Where the graph goes after ``name`` wrote ``updates`` over ``values``; its branches run
    here, so they must be sync. ``ctx``: the task's context, ``None`` outside a run."""
    if not gotos:
        plain = spec.edge_routes.get(name)
        if plain is not None:  # the common case: plain edges only
            return plain
    routes = [*gotos, *spec.edges.get(name, ())]
    for branch in spec.branches.get(name, ()):
        if branch.is_async:
            raise InvalidUpdateError(
                f"the branch from {name!r} is async; run the graph with ainvoke/astream"
            )
        chosen = call_branch(branch, branch_state(spec, name, values, updates), ctx)
        routes.extend(branch.resolve(chosen))
    return drop_end(routes)


def branch_state(spec: GraphSpec, name: str, values: Mapping[str, Any], updates: Update) -> Any:
    """A branch sees the state as its node left it: the step's start plus this node's writes."""
    local = applied(spec.schema, values, [(name, updates)])
    node = spec.nodes.get(name)
    reader = node.reader if node is not None else None
    return (reader or spec.schema).node_input(local)


def call_branch(branch: Branch, state: Any, ctx: TaskContext | None) -> Any:
    """Call a branch's path; like a node, it may take ``config``, ``store``, ``runtime``..."""
    if branch.style.plain:
        return branch.path(state)
    return branch.path(state, **branch.style.kwargs(ctx))


def drop_end(routes: Sequence[str | Send]) -> Routes:
    if END not in routes:
        return tuple(routes)
    return tuple(r for r in routes if r != END)
