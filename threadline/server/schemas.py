"""A graph's JSON Schemas and drawing, as ``/assistants/{id}/schemas`` and ``/graph`` give them."""

from __future__ import annotations

from typing import Any

from threadline.graph.compiled import CompiledStateGraph


def json_schema(cls: Any) -> dict[str, Any] | None:
    """``cls`` (a TypedDict, dataclass or pydantic model) as JSON Schema; None when unknown.

    Reducers in ``Annotated`` metadata are not part of the shape and are left out.
    """
    if cls is None:
        return None
    try:
        from pydantic import TypeAdapter

        schema: dict[str, Any] = TypeAdapter(cls).json_schema()
        return schema
    except Exception:  # a type pydantic cannot describe: give its keys at least
        keys = getattr(cls, "__annotations__", {})
        name = getattr(cls, "__name__", "State")
        return {"title": name, "type": "object", "properties": {k: {} for k in keys}}


def graph_schemas(graph_id: str, graph: CompiledStateGraph) -> dict[str, Any]:
    builder = graph.builder
    state = getattr(builder, "state_schema", None) or graph.spec.schema.cls
    return {
        "graph_id": graph_id,
        "state_schema": json_schema(state),
        "input_schema": json_schema(getattr(builder, "input_schema", None) or state),
        "output_schema": json_schema(getattr(builder, "output_schema", None) or state),
        "context_schema": json_schema(graph.context_schema),
        "config_schema": None,
    }


def graph_drawing(graph: CompiledStateGraph) -> dict[str, Any]:
    """Nodes and edges as LangGraph's ``/graph`` JSON (``{nodes: [{id, type, data}], edges}``)."""
    drawing = graph.get_graph()
    nodes = [
        {"id": name, "type": "schema" if name.startswith("__") else "runnable", "data": name}
        for name in drawing.nodes
    ]
    edges = []
    for edge in drawing.edges:
        item: dict[str, Any] = {"source": edge.source, "target": edge.target}
        if edge.conditional:
            item["conditional"] = True
        if edge.label is not None:
            item["data"] = edge.label
        edges.append(item)
    return {"nodes": nodes, "edges": edges, "mermaid": drawing.draw_mermaid()}


def subgraphs_of(graph: CompiledStateGraph) -> dict[str, Any]:
    """Each node that runs a compiled graph, by its namespace, with that graph's schemas."""
    found: dict[str, Any] = {}
    for name, node in graph.spec.nodes.items():
        inner = getattr(node, "subgraph", None)
        if isinstance(inner, CompiledStateGraph):
            found[name] = graph_schemas(name, inner)
    return found
