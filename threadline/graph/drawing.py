"""A drawing of the graph's structure as a Mermaid flowchart."""

from __future__ import annotations

import string
from collections.abc import Mapping
from dataclasses import dataclass, field
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
    # What LangGraph writes under a node's name: its add_node metadata, then ``defer = True``
    metadata: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

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
            edges += [Edge(node.name, t, True, node.labels.get(t)) for t in node.destinations or ()]
        edges.sort(key=lambda e: (e.source, e.target, e.conditional, e.label or ""))
        sources = {e.source for e in edges}
        ending = {s for s, targets in spec.edges.items() if END in targets}
        ending |= {e.target for e in edges if e.target != END and e.target not in sources}
        edges += [Edge(name, END) for name in sorted(ending)]
        unique = tuple(dict.fromkeys(edges))
        ends = {e.target for e in unique} | {e.source for e in unique}
        nodes = (START, *spec.nodes, *((END,) if END in ends else ()))
        metadata = {
            node.name: {**node.metadata, **({"defer": True} if node.defer else {})}
            for node in spec.nodes.values()
            if node.metadata or node.defer
        }
        return cls(nodes, unique, metadata)

    def draw_mermaid(
        self,
        *,
        with_styles: bool = True,
        curve_style: Any = "linear",
        node_colors: Any = None,
        wrap_label_n_words: int = 9,
        frontmatter_config: Mapping[str, Any] | None = None,
    ) -> str:
        """The graph as Mermaid flowchart text, exactly as LangGraph writes it.

        ``with_styles=False`` leaves out the front matter, node lines and classes;
        ``node_colors`` (langchain-core's ``NodeStyles``, or anything with ``default``,
        ``first`` and ``last``) replaces the classes' styles; ``frontmatter_config`` adds to the
        front matter's ``config``."""
        edges = [
            f"\t{_id(e.source)}{_arrow(e, wrap_label_n_words)}{_id(e.target)};" for e in self.edges
        ]
        if not with_styles:
            return "\n".join(["graph TD;", *edges]) + "\n"
        lines = [*_front_matter(curve_style, frontmatter_config), "graph TD;"]
        lines += [_node_line(name, self.metadata.get(name)) for name in self.nodes]
        lines += edges
        lines += [f"\tclassDef {name} {style}" for name, style in _styles(node_colors)]
        return "\n".join(lines) + "\n"


def _front_matter(curve_style: Any, extra: Mapping[str, Any] | None) -> list[str]:
    """``---``-fenced YAML: the flowchart's curve, then ``frontmatter_config``'s settings."""
    curve = getattr(curve_style, "value", curve_style)  # langchain-core's CurveStyle too
    config = dict((extra or {}).get("config") or {})
    flowchart = {"curve": curve, **dict(config.pop("flowchart", None) or {})}
    lines = ["---", "config:", "  flowchart:"]
    lines += [f"    {key}: {value}" for key, value in flowchart.items()]
    lines += [f"  {key}: {value}" for key, value in config.items()]
    return [*lines, "---"]


def _styles(node_colors: Any) -> list[tuple[str, str]]:
    defaults = {
        "default": "fill:#f2f0ff,line-height:1.2",
        "first": "fill-opacity:0",
        "last": "fill:#bfb6fc",
    }
    return [(name, getattr(node_colors, name, style)) for name, style in defaults.items()]


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


def _node_line(name: str, metadata: Mapping[str, Any] | None) -> str:
    """A node as LangGraph writes it: START and END rounded, names such as ``_x_`` (which
    Markdown would read) in a paragraph, its metadata (``defer = True`` too) under a rule."""
    label = f"<p>{name}</p>" if name[:1] in _MARKDOWN and name[-1:] in _MARKDOWN else name
    if metadata:
        shown = "\n".join(f"{key} = {value}" for key, value in metadata.items())
        label += f"<hr/><small><em>{shown}</em></small>"
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
