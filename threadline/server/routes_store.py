"""``/store``: the long-term memory graphs share (``threadline.store``), over HTTP.

Callers with an API key work inside their scope: their namespaces are stored under
``("scope", <scope>, ...)`` and they never see another scope's items. Local callers (loopback
without a key) see the store as the graphs do.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response

from threadline.server.auth import LOCAL_SCOPE
from threadline.server.bodies import StoreDelete, StoreNamespaces, StorePut, StoreSearch
from threadline.server.deps import Owner, State, not_found
from threadline.server.wire import jsonable
from threadline.store.item import Item

router = APIRouter(prefix="/store", tags=["store"])


def _inside(owner: str, namespace: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    return tuple(namespace) if owner == LOCAL_SCOPE else ("scope", owner, *namespace)


def _outside(owner: str, namespace: tuple[str, ...]) -> list[str]:
    return list(namespace if owner == LOCAL_SCOPE else namespace[2:])


def _item(owner: str, item: Item) -> dict[str, Any]:
    out: dict[str, Any] = {
        "namespace": _outside(owner, item.namespace),
        "key": item.key,
        "value": jsonable(item.value),
        "created_at": item.created_at.isoformat(),
        "updated_at": item.updated_at.isoformat(),
    }
    score = getattr(item, "score", None)
    if score is not None:
        out["score"] = score
    return out


def _store(state: State) -> Any:
    return state.services.store


@router.put("/items", status_code=204)
async def put_item(body: StorePut, state: State, owner: Owner) -> Response:
    ttl = None if body.ttl is None else body.ttl * 60  # minutes on the wire, seconds in the store
    await _store(state).aput(
        _inside(owner, body.namespace), body.key, body.value, index=body.index, ttl=ttl
    )
    return Response(status_code=204)


@router.get("/items")
async def get_item(
    state: State, owner: Owner, key: str, namespace: str = "", refresh_ttl: bool | None = None
) -> dict[str, Any]:
    parts = namespace.split(".") if namespace else []
    found = await _store(state).aget(_inside(owner, parts), key, refresh_ttl=refresh_ttl)
    if found is None:
        raise not_found("item", f"{namespace}/{key}")
    return _item(owner, found)


@router.delete("/items", status_code=204)
async def delete_item(body: StoreDelete, state: State, owner: Owner) -> Response:
    await _store(state).adelete(_inside(owner, body.namespace), body.key)
    return Response(status_code=204)


@router.post("/items/search")
async def search_items(body: StoreSearch, state: State, owner: Owner) -> dict[str, Any]:
    found = await _store(state).asearch(
        _inside(owner, body.namespace_prefix),
        query=body.query,
        filter=body.filter,
        limit=body.limit,
        offset=body.offset,
    )
    if body.refresh_ttl:  # the store's search never refreshes; a read of each item does
        for item in found:
            await _store(state).aget(item.namespace, item.key, refresh_ttl=True)
    return {"items": [_item(owner, i) for i in found]}


@router.post("/namespaces")
async def namespaces(body: StoreNamespaces, state: State, owner: Owner) -> dict[str, Any]:
    depth = body.max_depth if body.max_depth is None or owner == LOCAL_SCOPE else body.max_depth + 2
    found = await _store(state).alist_namespaces(
        prefix=_inside(owner, body.prefix or []),
        suffix=tuple(body.suffix) if body.suffix else None,
        max_depth=depth,
        limit=body.limit,
        offset=body.offset,
    )
    return {"namespaces": [_outside(owner, tuple(n)) for n in found]}
