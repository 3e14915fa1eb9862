"""Pure functions that turn node output into writes and apply a step's writes to the state."""

from __future__ import annotations

import operator
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from threadline.checkpoint.base import WriteKind
from threadline.checkpoint.changes import SET, Append, Change, then
from threadline.constants import START
from threadline.errors import InvalidUpdateError
from threadline.graph.schema import ROOT, StateSchema
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
    if schema.kind == "root":  # the state is one value: what the node returned is the write
        return ((ROOT, update),)
    pairs = tuple(update.items()) if type(update) is dict else _pairs(schema, node, update)
    if schema.managed:  # computed each step: a node returning the state it got writes them back
        pairs = tuple(p for p in pairs if p[0] not in schema.managed)
    channels = schema.channels
    for key, _ in pairs:  # a loop: a comprehension's frame costs more at every task
        if key not in channels:
            known = ", ".join(channels)
            raise InvalidUpdateError(
                f"{node!r} wrote key {key!r}, which is not in state schema "
                f"{schema.cls.__name__} (keys: {known}). Add it to the schema or stop writing it."
            )
    return pairs


def _pairs(schema: StateSchema, node: str, update: Any) -> Update:
    if isinstance(update, Mapping):
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
    tasks: Iterable[Any], writes: Mapping[tuple[str, WriteKind], Any]
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
    return _reduced(schema, values, None, writes)[0] if writes else values


def apply_writes(
    schema: StateSchema,
    values: Mapping[str, Any],
    versions: Mapping[str, str] | None,
    writes: Sequence[tuple[str, Update]],
    version: str,
) -> tuple[dict[str, Any], dict[str, str], dict[str, Change]]:
    """Apply ``(writer, update)`` pairs in order through the reducers: new values, versions, and
    what happened to each changed key (the ``Changes`` a saver stores as whole values or deltas).

    A key whose value really changed gets ``version`` (the id of the checkpoint being made); a
    key written with an equal value keeps its version, so savers need not store it again. Two
    writers setting the same replace-key in one step is an error naming both: the result would
    otherwise depend on scheduling. ``versions=None``: the checkpoint is never saved, and both
    exist only to tell a saver what to store, so none are kept (empty versions and changes).
    """
    new_values, changes = _reduced(schema, values, versions, writes)
    if versions is None:
        return new_values, {}, changes
    new_versions = dict(versions)
    for key in list(changes):
        if new_versions.get(key) != version and _changed(values, new_values, key):
            new_versions[key] = version
        else:
            del changes[key]
    return new_values, new_versions, changes


def _reduced(
    schema: StateSchema,
    values: Mapping[str, Any],
    versions: Mapping[str, str] | None,
    writes: Sequence[tuple[str, Update]],
) -> tuple[dict[str, Any], dict[str, Change]]:
    """``values`` with ``writes`` applied and, when ``versions`` is given, what each write did
    (an append names the version it extends); without them, no changes."""
    new_values = dict(values)
    replaced_by: dict[str, str] = {}
    changes: dict[str, Change] = {}
    for writer, update in writes:
        for key, value in update:
            channel = schema.channels[key]
            overwrite = isinstance(value, Overwrite)
            if overwrite:
                value = value.value
            change: Change = SET
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
                old = new_values[key]
                new_values[key] = new = _reduce(channel.reducer, key, writer, old, value)
                if versions is not None and key in versions:
                    change = _reduction(channel.reducer, versions[key], old, new)
            else:
                new_values[key] = value
            if versions is not None:
                earlier = changes.get(key)
                changes[key] = change if earlier is None else then(earlier, change)
    return new_values, changes


def _reduction(reducer: Any, base_version: str, old: Any, new: Any) -> Change:
    """What a reducer did: appended to the list (kept its items in place, added more) or set a
    new value (add_messages replacing or removing a message by id, or any other result)."""
    if not (isinstance(old, list) and isinstance(new, list)) or len(new) <= len(old):
        return SET
    if reducer is operator.add:  # list + list: appends by definition
        return Append(base_version, len(old))
    try:
        kept = new[: len(old)] == old  # compares by identity first: cheap for kept items
    except Exception:
        return SET
    return Append(base_version, len(old)) if kept else SET


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
