"""Compile-time checks: every mistake found here is one that never reaches a run."""

from __future__ import annotations

from threadline.constants import END, START
from threadline.errors import GraphValidationError
from threadline.graph.spec import GraphSpec


def validate_graph(spec: GraphSpec) -> None:
    _check_edge_ends(spec)
    if START not in spec.edges and START not in spec.branches:
        raise GraphValidationError(
            "the graph has no entry point: add_edge(START, 'first_node') or "
            "set_conditional_entry_point(...)"
        )
    _check_reachable(spec)
    _check_ways_out(spec)


def _known(spec: GraphSpec, name: str, *, allow: tuple[str, ...]) -> bool:
    return name in spec.nodes or name in allow


def _check_edge_ends(spec: GraphSpec) -> None:
    for source, targets in spec.edges.items():
        if not _known(spec, source, allow=(START,)):
            raise GraphValidationError(f"edge starts at unknown node {source!r}")
        for target in targets:
            if not _known(spec, target, allow=(END,)):
                raise GraphValidationError(f"edge {source!r} -> {target!r} ends at unknown node")
    for source, branches in spec.branches.items():
        if not _known(spec, source, allow=(START,)):
            raise GraphValidationError(f"conditional edge starts at unknown node {source!r}")
        for branch in branches:
            for target in branch.possible_targets() or ():
                if not _known(spec, target, allow=(END,)):
                    raise GraphValidationError(
                        f"conditional edge from {source!r} may go to unknown node {target!r}"
                    )
    for join in spec.joins:
        for name in (*sorted(join.sources), join.target):
            if not _known(spec, name, allow=(END,) if name == join.target else ()):
                raise GraphValidationError(
                    f"edge {sorted(join.sources)} -> {join.target!r} names unknown node {name!r}"
                )
    for node in spec.nodes.values():
        for target in node.destinations or ():
            if not _known(spec, target, allow=(END,)):
                raise GraphValidationError(
                    f"node {node.name!r} declares destination {target!r}, which is not a node"
                )


def _successors(spec: GraphSpec, name: str) -> set[str] | None:
    """Where ``name`` can lead; ``None`` when a branch or Command could go anywhere."""
    found = set(spec.edges.get(name, ()))
    for branch in spec.branches.get(name, ()):
        targets = branch.possible_targets()
        if targets is None:
            return None
        found.update(targets)
    for join in spec.joins_by_source.get(name, ()):
        found.add(join.target)
    node = spec.nodes.get(name)
    if node is not None and node.destinations:
        found.update(node.destinations)
    return found


def _check_reachable(spec: GraphSpec) -> None:
    seen = {START}
    todo = [START]
    while todo:
        successors = _successors(spec, todo.pop())
        if successors is None:
            return  # an open-ended branch may reach any node
        for name in successors - seen:
            seen.add(name)
            todo.append(name)
    for name in spec.nodes:
        if name not in seen:
            raise GraphValidationError(
                f"node {name!r} is not reachable from START; add an edge to it, declare it as a "
                "Command destination (-> Command[Literal[...]] or destinations=[...]) of the "
                "node that goes there, or remove it"
            )


def _check_ways_out(spec: GraphSpec) -> None:
    for name, node in spec.nodes.items():
        if name in spec.edges or name in spec.branches or name in spec.joins_by_source:
            continue
        if node.destinations is not None or node.subgraph is not None:
            continue
        raise GraphValidationError(
            f"node {name!r} has no outgoing edge; add_edge({name!r}, END) to finish there, or "
            "declare where its Command goes (-> Command[Literal[...]] or destinations=[...])"
        )
