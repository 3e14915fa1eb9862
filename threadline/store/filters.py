"""Search filters: ``{"field": value}`` or ``{"field": {"$gte": 18}}``, parsed once and evaluated
with JSON semantics that every backend shares (SQL backends translate the parsed terms)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from threadline.errors import InvalidStoreInputError

Condition = tuple[str, str, Any]
"""One parsed filter term: ``(field, operator, operand)``, e.g. ``("age", "$gte", 18)``."""

OPERATORS = frozenset({"$eq", "$ne", "$gt", "$gte", "$lt", "$lte"})
_RANGE_OPERATORS = frozenset({"$gt", "$gte", "$lt", "$lte"})


def parse_filter(filter: Mapping[str, Any] | None) -> list[Condition]:
    """Validate a ``search`` filter and flatten it into ``(field, operator, operand)`` terms.

    ``{"kind": "fact"}`` is equality. A dict whose keys start with ``"$"`` is a set of operators
    that must all hold: ``$eq``, ``$ne``, ``$gt``, ``$gte``, ``$lt``, ``$lte``; any other key in
    it is an error. A dict without ``"$"`` keys is compared for equality as a whole. Backends
    translate the flat terms (to SQL, say) instead of re-parsing the dict.
    """
    if filter is None:
        return []
    if not isinstance(filter, Mapping):
        raise InvalidStoreInputError(f"filter must be a dict, got {type(filter).__name__}")
    conditions: list[Condition] = []
    for field, spec in filter.items():
        if not isinstance(field, str):
            raise InvalidStoreInputError(f"filter fields must be strings, got {field!r}")
        if field.startswith("$"):
            raise InvalidStoreInputError(
                f"unsupported filter operator {field!r} at top level; filters are field -> "
                f"value or field -> {{operator: value}}"
            )
        if isinstance(spec, Mapping) and any(str(k).startswith("$") for k in spec):
            for op, operand in spec.items():
                if op not in OPERATORS:
                    raise InvalidStoreInputError(
                        f"unsupported filter operator {op!r} on field {field!r}; "
                        f"use one of {', '.join(sorted(OPERATORS))}"
                    )
                if op in _RANGE_OPERATORS and not _orderable(operand):
                    raise InvalidStoreInputError(
                        f"filter operator {op!r} on field {field!r} needs a number or string, "
                        f"got {operand!r}"
                    )
                conditions.append((field, op, operand))
        else:
            conditions.append((field, "$eq", spec))
    return conditions


def matches(value: Mapping[str, Any], conditions: list[Condition]) -> bool:
    """True when ``value`` satisfies every parsed condition (JSON semantics, for all backends).

    A missing field satisfies only ``$ne`` (as in MongoDB). ``True`` never equals ``1``, because
    JSON keeps booleans and numbers apart. Range operators compare number with number or string
    with string (code-point order); any other pairing is simply no match.
    """
    for field, op, operand in conditions:
        present = field in value
        actual = value.get(field)
        if op == "$eq":
            ok = present and _json_equal(actual, operand)
        elif op == "$ne":
            ok = not (present and _json_equal(actual, operand))
        elif not present or not _comparable(actual, operand):
            ok = False
        elif op == "$gt":
            ok = actual > operand
        elif op == "$gte":
            ok = actual >= operand
        elif op == "$lt":
            ok = actual < operand
        else:  # "$lte"; parse_filter admits nothing else
            ok = actual <= operand
        if not ok:
            return False
    return True


def _orderable(x: object) -> bool:
    return isinstance(x, int | float | str) and not isinstance(x, bool)


def _comparable(a: object, b: object) -> bool:
    if not (_orderable(a) and _orderable(b)):
        return False
    return isinstance(a, str) == isinstance(b, str)


def _json_equal(a: object, b: object) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b, strict=True))
    return a == b
