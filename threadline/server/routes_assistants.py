"""``/assistants``: a graph with its own config and context. Each served graph has one (its
graph id works as its assistant id); clients may add more. Versions are not kept yet."""

from __future__ import annotations

import uuid
from typing import Any

from fastapi import APIRouter, HTTPException, Response

from threadline.graph.compiled import CompiledStateGraph
from threadline.server import records
from threadline.server.bodies import AssistantCreate, AssistantPatch, AssistantSearch
from threadline.server.deps import Owner, ServerState, State, not_found
from threadline.server.schemas import graph_drawing, graph_schemas, subgraphs_of
from threadline.server.services import graph_assistant_id

router = APIRouter(prefix="/assistants", tags=["assistants"])


async def find_assistant(state: ServerState, owner: str, ident: str) -> dict[str, Any]:
    """An assistant by id, or a served graph's assistant by the graph's id."""
    if ident in state.services.graphs:
        ident = graph_assistant_id(ident)
    found = await state.services.db.call(lambda tx: records.get_assistant(tx, owner, ident))
    if found is None:
        raise not_found("assistant", ident)
    return found


def _graph(state: ServerState, assistant: dict[str, Any]) -> CompiledStateGraph:
    graph = state.services.graphs.get(assistant["graph_id"])
    if graph is None:
        raise HTTPException(404, f"graph {assistant['graph_id']} is not served here")
    return graph


@router.post("")
async def create(body: AssistantCreate, state: State, owner: Owner) -> dict[str, Any]:
    if body.graph_id not in state.services.graphs:
        raise HTTPException(
            422, f"graph_id {body.graph_id!r} is not one of {sorted(state.services.graphs)}"
        )
    ident = body.assistant_id or str(uuid.uuid4())
    taken = await state.services.db.call(
        lambda tx: tx.row("SELECT owner FROM tl_assistants WHERE assistant_id = ?", ident)
    )
    if taken is not None:
        if body.if_exists == "do_nothing" and taken["owner"] == owner:
            return await find_assistant(state, owner, ident)
        raise HTTPException(409, f"assistant {ident} already exists")
    fields = body.model_dump(exclude={"if_exists"})
    fields.update(assistant_id=ident, name=body.name or "Untitled")
    return await state.services.db.call(lambda tx: records.put_assistant(tx, owner, fields))


@router.post("/search")
async def search(body: AssistantSearch, state: State, owner: Owner) -> list[dict[str, Any]]:
    q = body.model_dump()
    found = await state.services.db.call(lambda tx: records.search_assistants(tx, owner, q))
    if body.select:
        found = [{k: a[k] for k in body.select if k in a} for a in found]
    return found


@router.post("/count")
async def count(body: AssistantSearch, state: State, owner: Owner) -> int:
    q = {**body.model_dump(), "limit": 1 << 62, "offset": 0}
    return len(await state.services.db.call(lambda tx: records.search_assistants(tx, owner, q)))


@router.get("/{assistant_id}")
async def get(assistant_id: str, state: State, owner: Owner) -> dict[str, Any]:
    return await find_assistant(state, owner, assistant_id)


@router.patch("/{assistant_id}")
async def patch(
    assistant_id: str, body: AssistantPatch, state: State, owner: Owner
) -> dict[str, Any]:
    found = await find_assistant(state, owner, assistant_id)
    if not await state.services.db.call(
        lambda tx: records.assistant_owned(tx, owner, found["assistant_id"])
    ):
        raise HTTPException(403, "a served graph's own assistant cannot be changed; create one")
    changes = body.model_dump(exclude_none=True)
    if "graph_id" in changes and changes["graph_id"] not in state.services.graphs:
        raise HTTPException(422, f"graph_id {changes['graph_id']!r} is not served here")
    if "metadata" in changes:
        changes["metadata"] = {**found["metadata"], **changes["metadata"]}
    updated = {**found, **changes, "version": found["version"] + 1}
    return await state.services.db.call(lambda tx: records.put_assistant(tx, owner, updated))


@router.delete("/{assistant_id}", status_code=204)
async def delete(assistant_id: str, state: State, owner: Owner) -> Response:
    if not await state.services.db.call(
        lambda tx: records.delete_assistant(tx, owner, assistant_id)
    ):
        raise not_found("assistant", assistant_id)
    return Response(status_code=204)


@router.get("/{assistant_id}/graph")
async def graph(assistant_id: str, state: State, owner: Owner) -> dict[str, Any]:
    return graph_drawing(_graph(state, await find_assistant(state, owner, assistant_id)))


@router.get("/{assistant_id}/schemas")
async def schemas(assistant_id: str, state: State, owner: Owner) -> dict[str, Any]:
    assistant = await find_assistant(state, owner, assistant_id)
    return graph_schemas(assistant["graph_id"], _graph(state, assistant))


@router.get("/{assistant_id}/subgraphs")
async def subgraphs(assistant_id: str, state: State, owner: Owner) -> dict[str, Any]:
    return subgraphs_of(_graph(state, await find_assistant(state, owner, assistant_id)))


@router.get("/{assistant_id}/subgraphs/{namespace}")
async def subgraph(assistant_id: str, namespace: str, state: State, owner: Owner) -> dict[str, Any]:
    found = subgraphs_of(_graph(state, await find_assistant(state, owner, assistant_id)))
    return {k: v for k, v in found.items() if k == namespace}
