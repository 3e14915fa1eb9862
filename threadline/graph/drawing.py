"""A drawing of the graph's structure as a Mermaid flowchart."""

from __future__ import annotations

import string
from dataclasses import dataclass
from typing import Any

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
        """LangGraph's order: edges sorted by (source, target), then the edges to END of the
        nodes that end a branch (a plain edge to END, or no edge out), sorted by source."""
        edges = [Edge(s, t) for s, targets in spec.edges.items() for t in targets if t != END]
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
        edges.sort(key=lambda e: (e.source, e.target, e.conditional, e.label or ""))
        sources = {e.source for e in edges}
        ending = {s for s, targets in spec.edges.items() if END in targets}
        ending |= {e.target for e in edges if e.target != END and e.target not in sources}
        edges += [Edge(name, END) for name in sorted(ending)]
        unique = tuple(dict.fromkeys(edges))
        ends = {e.target for e in unique} | {e.source for e in unique}
        nodes = (START, *spec.nodes, *((END,) if END in ends else ()))
        return cls(nodes, unique, spec.deferred)

    def draw_mermaid(self, *, curve_style: Any = "linear", wrap_label_n_words: int = 9) -> str:
        """The graph as Mermaid flowchart text, exactly as LangGraph writes it."""
        curve = getattr(curve_style, "value", curve_style)  # langchain-core's CurveStyle too
        lines = ["---", "config:", "  flowchart:", f"    curve: {curve}", "---", "graph TD;"]
        lines += [_node_line(name, name in self.deferred) for name in self.nodes]
        for edge in self.edges:
            lines.append(
                f"\t{_id(edge.source)}{_arrow(edge, wrap_label_n_words)}{_id(edge.target)};"
            )
        lines += [
            "\tclassDef default fill:#f2f0ff,line-height:1.2",
            "\tclassDef first fill-opacity:0",
            "\tclassDef last fill:#bfb6fc",
        ]
        return "\n".join(lines) + "\n"


def _arrow(edge: Edge, wrap_words: int) -> str:
    """`` --> `` or `` -.-> `` (conditional); with a label, LangGraph's labelled arrows."""
    if edge.label is None:
        return " -.-> " if edge.conditional else " --> "
    words = edge.label.split()
    label = edge.label
    if len(words) > wrap_words:
        chunks = [" ".join(words[i : i + wrap_words]) for i in range(0, len(words), wrap_words)]
        label = "&nbsp<br>&nbsp".join(chunks)
    return f" -. &nbsp;{label}&nbsp; .-> " if edge.conditional else f" -- &nbsp;{label}&nbsp; --> "


def _node_line(name: str, deferred: bool) -> str:
    """A node as LangGraph writes it: START and END rounded, names such as ``_x_`` (which
    Markdown would read) in a paragraph, a deferred node marked."""
    label = f"<p>{name}</p>" if name[:1] in _MARKDOWN and name[-1:] in _MARKDOWN else name
    if deferred:
        label += "<hr/><small><em>defer = True</em></small>"
    if name == START:
        return f"\t{_id(name)}([{label}]):::first"
    if name == END:
        return f"\t{_id(name)}([{label}]):::last"
    return f"\t{_id(name)}({label})"


_MARKDOWN = ("*", "_", "`")
_ID_CHARS = frozenset(string.ascii_letters + string.digits + "_-")


def _id(name: str) -> str:
    """A Mermaid node id: letters, digits, ``_`` and ``-`` kept, any other character written
    as a backslash and its hex code point (LangGraph's ids, unique for any name)."""
    return "".join(ch if ch in _ID_CHARS else f"\\{ord(ch):x}" for ch in name)
