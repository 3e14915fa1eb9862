"""Checks of a graph's shape.

``validate_graph`` runs at every compile and refuses only what cannot run: edges naming unknown
nodes, no entry point. ``find_problems`` reports what LangGraph accepts but is often a mistake
(a node nothing reaches, a node whose branch just ends); ``compile(strict=True)`` refuses those.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from threadline.constants import END, START
from threadline.errors import GraphValidationError
from threadline.graph.spec import GraphSpec

FindingKind = Literal["unreachable", "no_way_out"]


@dataclass(frozen=True, slots=True)
class Finding:
    """One thing ``StateGraph.lint()`` found: what, which node, and how to settle it."""

    kind: FindingKind
    node: str
    message: str

    def __str__(self) -> str:
        return self.message


def validate_graph(spec: GraphSpec) -> None:
    _check_edge_ends(spec)
    if START not in spec.edges and START not in spec.branches:
        raise GraphValidationError(
            "the graph has no entry point: add_edge(START, 'first_node') or "
            "set_conditional_entry_point(...)"
        )


def find_problems(spec: GraphSpec) -> list[Finding]:
    """Unreachable nodes, then nodes with no way out, in the order they were added."""
    return [*_unreachable(spec), *_without_way_out(spec)]


def raise_findings(spec: GraphSpec) -> None:
    """``compile(strict=True)``: refuse the graph if ``find_problems`` finds anything."""
    findings = find_problems(spec)
    if findings:
        listed = "\n".join(f"- {f.message}" for f in findings)
        count = f"{len(findings)} problem{'s' if len(findings) > 1 else ''}"
        raise GraphValidationError(f"compile(strict=True) refused the graph, {count}:\n{listed}")


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
    """Where ``name`` can lead; ``None`` when a branch could go anywhere."""
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


def _unreachable(spec: GraphSpec) -> list[Finding]:
    seen = {START}
    todo = [START]
    while todo:
        successors = _successors(spec, todo.pop())
        if successors is None:
            return []  # an open-ended branch may reach any node
        for name in successors - seen:
            seen.add(name)
            todo.append(name)
    return [
        Finding(
            "unreachable",
            name,
            f"node {name!r} is not reachable from START; add an edge to it, declare it as a "
            "Command destination (-> Command[Literal[...]] or destinations=[...]) of the node "
            "that goes there, or remove it",
        )
        for name in spec.nodes
        if name not in seen
    ]


def _without_way_out(spec: GraphSpec) -> list[Finding]:
    leaving = spec.edges.keys() | spec.branches.keys() | spec.joins_by_source.keys()
    return [
        Finding(
            "no_way_out",
            name,
            f"node {name!r} has no outgoing edge, so its branch ends there; add_edge({name!r}, "
            "END) to say so, or declare where its Command goes (-> Command[Literal[...]] or "
            "destinations=[...])",
        )
        for name, node in spec.nodes.items()
        if name not in leaving and node.destinations is None and node.subgraph is None
    ]
