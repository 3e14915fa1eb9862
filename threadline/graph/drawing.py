"""A drawing of the graph's structure as a Mermaid flowchart."""

from __future__ import annotations

from dataclasses import dataclass

from threadline.constants import END, START
from threadline.graph.spec import GraphSpec


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    conditional: bool = False
    label: str | None = None


@dataclass(frozen=True)
class DrawableGraph:
    """Nodes and edges of a graph; conditional edges whose targets are unknown are omitted."""

    nodes: tuple[str, ...]
    edges: tuple[Edge, ...]
    deferred: frozenset[str] = frozenset()  # nodes added with defer=True, marked as LangGraph does

    @classmethod
    def of(cls, spec: GraphSpec) -> DrawableGraph:
        edges = [Edge(s, t) for s, targets in spec.edges.items() for t in targets]
        edges += [Edge(s, j.target) for j in spec.joins for s in sorted(j.sources)]
        for source, branches in spec.branches.items():
            for branch in branches:
                if branch.path_map is not None:
                    edges += [
                        Edge(source, target, True, None if str(key) == target else str(key))
                        for key, target in branch.path_map.items()
                    ]
                else:
                    edges += [Edge(source, t, True) for t in branch.possible_targets() or ()]
        for node in spec.nodes.values():
            edges += [Edge(node.name, t, True) for t in node.destinations or ()]
        unique = tuple(dict.fromkeys(edges))
        ends = {e.target for e in unique} | {e.source for e in unique}
        nodes = (START, *spec.nodes, *((END,) if END in ends else ()))
        return cls(nodes, unique, spec.deferred)

    def draw_mermaid(self) -> str:
        lines = ["graph TD;"]
        for name in self.nodes:
            if name in (START, END):
                style = "first" if name == START else "last"
                lines.append(f"\t{_id(name)}([<p>{name}</p>]):::{style}")
            elif name in self.deferred:
                lines.append(f"\t{_id(name)}({name}<hr/><small><em>defer = True</em></small>)")
            else:
                lines.append(f"\t{_id(name)}({name})")
        for edge in self.edges:
            arrow = "-.->" if edge.conditional else "-->"
            label = f"|{edge.label}|" if edge.label else ""
            lines.append(f"\t{_id(edge.source)} {arrow}{label} {_id(edge.target)};")
        lines += [
            "\tclassDef default fill:#f2f0ff,line-height:1.2",
            "\tclassDef first fill-opacity:0",
            "\tclassDef last fill:#bfb6fc",
        ]
        return "\n".join(lines) + "\n"


def _id(name: str) -> str:
    """Mermaid ids may not contain spaces or punctuation; keep names readable otherwise."""
    return "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in name)
