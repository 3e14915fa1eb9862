"""Pure functions that turn node output into writes and apply a step's writes to the state."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from threadline.constants import START
from threadline.errors import InvalidUpdateError
from threadline.graph.schema import StateSchema
from threadline.types import Command, Overwrite, Send

Update = tuple[tuple[str, Any], ...]


def normalize_output(
    schema: StateSchema, node: str, output: Any
) -> tuple[Update, tuple[str | Send, ...]]:
    """Split what a node returned into state writes and ``goto`` targets, checking the keys."""
    if output is None:
        return (), ()
    if isinstance(output, Command):
        if output.resume is not None:
            raise InvalidUpdateError(
                f"node {node!r} returned Command(resume=...); resume is only for invoke()"
            )
        return updates_of(schema, node, output.update), output.goto_targets()
    return updates_of(schema, node, output), ()


def updates_of(schema: StateSchema, node: str, update: Any) -> Update:
    """Check an update's keys against the schema (LangGraph drops unknown keys; we refuse)."""
    if update is None:
        return ()
    pairs = _pairs(schema, node, update)
    if schema.managed:  # computed each step: a node returning the state it got writes them back
        pairs = tuple(p for p in pairs if p[0] not in schema.managed)
    channels = schema.channels
    unknown = [key for key, _ in pairs if key not in channels]
    if unknown:
        known = ", ".join(schema.channels)
        raise InvalidUpdateError(
            f"{node!r} wrote key {unknown[0]!r}, which is not in state schema "
            f"{schema.cls.__name__} (keys: {known}). Add it to the schema or stop writing it."
        )
    return pairs


def _pairs(schema: StateSchema, node: str, update: Any) -> Update:
    if type(update) is dict or isinstance(update, Mapping):  # the exact check is much cheaper
        return tuple(update.items())
    if schema.kind != "typeddict" and isinstance(update, schema.cls):
        return tuple(schema.input_values(update).items())
    if _is_pair_list(update):
        return tuple(update)
    raise InvalidUpdateError(
        f"{node!r} returned {type(update).__name__}; a node must return a dict of updates, "
        "None or a Command"
    )


def _is_pair_list(update: Any) -> bool:
    """``[("key", value), ...]``, the list form of an update."""
    if not isinstance(update, Sequence) or isinstance(update, str | bytes):
        return False
    return all(isinstance(p, tuple) and len(p) == 2 and isinstance(p[0], str) for p in update)


def finished_updates(
    tasks: Iterable[Any], writes: Mapping[tuple[str, str], Any]
) -> list[tuple[str, Update]]:
    """The updates of the tasks of a stopped step that finished (a ``result`` write is kept for
    them), in task order: what ``get_state`` shows and ``invoke`` returns on top of the step's
    values, as LangGraph does. START's result (a run's input) is not a task's."""
    found = [(t.name, writes.get((t.id, "result"))) for t in tasks if t.name != START]
    return [(name, w.value.updates) for name, w in found if w is not None]


def applied(
    schema: StateSchema, values: Mapping[str, Any], writes: Sequence[tuple[str, Update]]
) -> Mapping[str, Any]:
    """``values`` with ``writes`` applied, for showing (no versions); ``values`` if none."""
    return apply_writes(schema, values, {}, writes, "")[0] if writes else values


def apply_writes(
    schema: StateSchema,
    values: Mapping[str, Any],
    versions: Mapping[str, str],
    writes: Sequence[tuple[str, Update]],
    version: str,
) -> tuple[dict[str, Any], dict[str, str]]:
    """Apply ``(writer, update)`` pairs in order through the reducers; return new values/versions.

    A key whose value really changed gets ``version`` (the id of the checkpoint being made); a
    key written with an equal value keeps its version, so savers need not store it again. Two
    writers setting the same replace-key in one step is an error naming both: the result would
    otherwise depend on scheduling.
    """
    new_values = dict(values)
    replaced_by: dict[str, str] = {}
    for writer, update in writes:
        for key, value in update:
            channel = schema.channels[key]
            overwrite = isinstance(value, Overwrite)
            if overwrite:
                value = value.value
            if channel.reducer is None or overwrite:
                other = replaced_by.get(key)
                if other is not None and other != writer:
                    raise InvalidUpdateError(
                        f"{other!r} and {writer!r} both wrote key {key!r} in the same step; "
                        f"give {key!r} a reducer (Annotated[..., fn]) or let one node write it"
                    )
                replaced_by[key] = writer
                new_values[key] = value
            elif key in new_values:
                new_values[key] = _reduce(channel.reducer, key, writer, new_values[key], value)
            else:
                new_values[key] = value
    new_versions = dict(versions)
    for _, update in writes:
        for key, _ in update:
            if new_versions.get(key) != version and _changed(values, new_values, key):
                new_versions[key] = version
    return new_values, new_versions


def _changed(before: Mapping[str, Any], after: Mapping[str, Any], key: str) -> bool:
    if key not in before:
        return True
    old, new = before[key], after[key]
    if old is new:
        return False
    try:
        return bool(old != new)
    except Exception:  # values whose comparison fails or is ambiguous (arrays): assume changed
        return True


def _reduce(reducer: Any, key: str, writer: str, current: Any, value: Any) -> Any:
    try:
        return reducer(current, value)
    except Exception as exc:
        raise InvalidUpdateError(
            f"the reducer of key {key!r} failed on the value written by {writer!r}: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
