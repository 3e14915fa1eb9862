"""A small JSON Schema validator for answers: the subset forms and tool arguments use.

Answers arrive as JSON from a person or a UI; checking them needs only the common keywords, so
threadline carries this validator instead of a dependency. A schema using anything else is
refused when it is given (``check_supported``), never half-checked, and so is a keyword whose
value the JSON Schema metaschema refuses (``_SHAPES``): read with the wrong shape, it would be
checked wrongly (``"required": "order"`` as five names).

Supported: ``type``, ``enum``, ``const``, ``properties``, ``required``,
``additionalProperties``, ``items``, ``prefixItems``, ``minItems``, ``maxItems``, ``minimum``,
``maximum``, ``exclusiveMinimum``, ``exclusiveMaximum``, ``minLength``, ``maxLength``,
``pattern``, ``anyOf``, ``oneOf``, ``allOf`` and local ``$ref`` (``#/$defs/...``), which covers
what pydantic generates for models, dataclasses and TypedDicts. Annotations (``title``,
``description``, ``default``, ``format``, ``examples``, ``x-...`` and the like) are allowed and
not checked.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Iterator
from typing import Any

from threadline.errors import InvalidAnswerError, InvalidSchemaError

Problem = tuple[str, str]  # (field path, what is wrong)

_CHECKED = frozenset(
    {
        "type", "enum", "const", "properties", "required", "additionalProperties", "items",
        "prefixItems", "minItems", "maxItems", "minimum", "maximum", "exclusiveMinimum",
        "exclusiveMaximum", "minLength", "maxLength", "pattern", "anyOf", "oneOf", "allOf",
        "$ref",
    }
)  # fmt: skip
_ANNOTATIONS = frozenset(
    {
        "title", "description", "default", "examples", "format", "$schema", "$id", "$comment",
        "$defs", "definitions", "readOnly", "writeOnly", "deprecated", "discriminator",
        "contentEncoding", "contentMediaType",
    }
)  # fmt: skip
_TYPES = ("object", "array", "string", "integer", "number", "boolean", "null")


def check_supported(schema: Any, where: str = "schema") -> None:
    """Refuse a schema this validator could not check fully, or that JSON Schema's metaschema
    refuses (``"required": "order"``), naming the keyword and where."""
    for path, node in _subschemas(schema, where):
        if not isinstance(node, dict):
            raise InvalidSchemaError(f"{path} must be a JSON Schema object (a dict), got {node!r}")
        for key in node:
            if key in _CHECKED or key in _ANNOTATIONS or key.startswith("x-"):
                continue
            raise InvalidSchemaError(
                f"{path} uses the JSON Schema keyword {key!r}, which threadline does not check; "
                f"supported: {', '.join(sorted(_CHECKED))}"
            )
        ref = node.get("$ref")
        if ref is not None and not (isinstance(ref, str) and ref.startswith("#/")):
            raise InvalidSchemaError(f"{path}: only local $ref ('#/...') is supported, got {ref!r}")
        for name in _as_list(node.get("type")):
            if name not in _TYPES:
                raise InvalidSchemaError(f"{path}: unknown type {name!r} (known: {_TYPES})")


#: What each checked keyword's value must be, as JSON Schema's metaschema says (a keyword the
#: checker reads with the wrong shape would be misread: ``"required": "order"`` as five names).
_SHAPES: dict[str, tuple[str, Any]] = {
    "type": ("a type name or a list of them", lambda v: isinstance(v, str) or _strings(v)),
    "enum": ("a list", lambda v: isinstance(v, list)),
    "properties": ("an object of schemas", lambda v: _schemas_by_name(v)),
    "$defs": ("an object of schemas", lambda v: _schemas_by_name(v)),
    "definitions": ("an object of schemas", lambda v: _schemas_by_name(v)),
    "required": ("a list of unique property names", lambda v: _strings(v, unique=True)),
    "additionalProperties": ("a schema or a boolean", lambda v: isinstance(v, dict | bool)),
    "items": ("a schema or a boolean", lambda v: isinstance(v, dict | bool)),
    "prefixItems": ("a non-empty list of schemas", lambda v: _schema_list(v)),
    "anyOf": ("a non-empty list of schemas", lambda v: _schema_list(v)),
    "oneOf": ("a non-empty list of schemas", lambda v: _schema_list(v)),
    "allOf": ("a non-empty list of schemas", lambda v: _schema_list(v)),
    "minItems": ("a non-negative integer", lambda v: _count(v)),
    "maxItems": ("a non-negative integer", lambda v: _count(v)),
    "minLength": ("a non-negative integer", lambda v: _count(v)),
    "maxLength": ("a non-negative integer", lambda v: _count(v)),
    "minimum": ("a number", lambda v: _number_value(v)),
    "maximum": ("a number", lambda v: _number_value(v)),
    "exclusiveMinimum": ("a number", lambda v: _number_value(v)),
    "exclusiveMaximum": ("a number", lambda v: _number_value(v)),
    "pattern": ("a regular expression", lambda v: _regex(v)),
}


def _strings(value: Any, unique: bool = False) -> bool:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return False
    return not unique or len(set(value)) == len(value)


def _schemas_by_name(value: Any) -> bool:
    return isinstance(value, dict) and all(isinstance(v, dict | bool) for v in value.values())


def _schema_list(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)


def _count(value: Any) -> bool:
    return type(value) is int and value >= 0


def _number_value(value: Any) -> bool:
    return type(value) in (int, float) and math.isfinite(value)


def _regex(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    try:
        re.compile(value)
    except re.error:
        return False
    return True


def _check_shapes(node: dict[str, Any], path: str) -> None:
    for key, value in node.items():
        shape = _SHAPES.get(key)
        if shape is not None and not shape[1](value):
            raise InvalidSchemaError(f"{path}.{key} must be {shape[0]}, got {value!r}")


def _subschemas(schema: Any, path: str) -> Iterator[tuple[str, Any]]:
    yield path, schema
    if not isinstance(schema, dict):
        return
    _check_shapes(schema, path)
    for key in ("properties", "$defs", "definitions"):
        for name, sub in (schema.get(key) or {}).items():
            yield from _subschemas(sub, f"{path}.{key}.{name}")
    for key in ("additionalProperties", "items"):
        if isinstance(schema.get(key), dict):
            yield from _subschemas(schema[key], f"{path}.{key}")
    for key in ("prefixItems", "anyOf", "oneOf", "allOf"):
        for index, sub in enumerate(schema.get(key) or ()):
            yield from _subschemas(sub, f"{path}.{key}[{index}]")


def problems(schema: dict[str, Any], value: Any) -> list[Problem]:
    """Everything wrong with ``value`` under ``schema`` (empty when it is valid)."""
    return list(_Validator(schema).check(schema, value, ""))


class _Validator:
    def __init__(self, root: dict[str, Any]) -> None:
        self.root = root

    def check(self, schema: Any, value: Any, path: str) -> Iterator[Problem]:
        if schema is True or schema == {}:
            return
        if schema is False:
            yield path, "is not allowed here"
            return
        if "$ref" in schema:
            yield from self.check(self._resolve(schema["$ref"]), value, path)
        for key in ("allOf", "anyOf", "oneOf"):
            if key in schema:
                yield from self._combined(key, schema[key], value, path)
        types = _as_list(schema.get("type"))
        if types and not any(_is_type(value, name) for name in types):
            yield path, f"expected {' or '.join(types)}, got {_describe(value)}"
            return
        if "const" in schema and not _same(value, schema["const"]):
            yield path, f"must be {schema['const']!r}, got {value!r}"
        if "enum" in schema and not any(_same(value, option) for option in schema["enum"]):
            yield path, f"must be one of {schema['enum']!r}, got {value!r}"
        if isinstance(value, dict):
            yield from self._object(schema, value, path)
        elif isinstance(value, list | tuple):
            yield from self._array(schema, list(value), path)
        elif isinstance(value, str):
            yield from _string(schema, value, path)
        elif _is_type(value, "number"):
            yield from _number(schema, value, path)

    def _resolve(self, ref: str) -> Any:
        node: Any = self.root
        for part in ref[2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(node, dict) or part not in node:
                raise InvalidSchemaError(f"$ref {ref!r} points at nothing in the schema")
            node = node[part]
        return node

    def _combined(self, key: str, options: list[Any], value: Any, path: str) -> Iterator[Problem]:
        results = [list(self.check(option, value, path)) for option in options]
        if key == "allOf":
            for found in results:
                yield from found
            return
        passed = sum(1 for found in results if not found)
        if key == "oneOf" and passed > 1:
            yield path, f"matches {passed} of the allowed forms; it must match exactly one"
        if passed:
            return
        # Report the form the value was meant to be (its type fits), else list the types.
        fitting = [
            found
            for option, found in zip(options, results, strict=True)
            if _fits_type(self._deref(option), value)
        ]
        if len(fitting) == 1:
            yield from fitting[0]
            return
        kinds = sorted({t for option in options for t in _as_list(self._deref(option).get("type"))})
        wanted = " or ".join(kinds) if kinds else "one of the allowed forms"
        yield path, f"expected {wanted}, got {_describe(value)}"

    def _deref(self, schema: Any) -> dict[str, Any]:
        while isinstance(schema, dict) and "$ref" in schema:
            schema = self._resolve(schema["$ref"])
        return schema if isinstance(schema, dict) else {}

    def _object(
        self, schema: dict[str, Any], value: dict[str, Any], path: str
    ) -> Iterator[Problem]:
        properties = schema.get("properties") or {}
        for name in schema.get("required") or ():
            if name not in value:
                yield _join(path, name), "is required but missing"
        extra = schema.get("additionalProperties", True)
        for name, item in value.items():
            where = _join(path, str(name))
            if name in properties:
                yield from self.check(properties[name], item, where)
            elif extra is False:
                known = ", ".join(properties) or "none"
                yield where, f"is not an allowed field (allowed: {known})"
            elif isinstance(extra, dict):
                yield from self.check(extra, item, where)

    def _array(self, schema: dict[str, Any], value: list[Any], path: str) -> Iterator[Problem]:
        low, high = schema.get("minItems"), schema.get("maxItems")
        if low is not None and len(value) < low:
            yield path, f"needs at least {low} item(s), got {len(value)}"
        if high is not None and len(value) > high:
            yield path, f"takes at most {high} item(s), got {len(value)}"
        prefix = schema.get("prefixItems") or []
        for index, item in enumerate(value):
            sub = prefix[index] if index < len(prefix) else schema.get("items", True)
            yield from self.check(sub, item, f"{path}[{index}]")


def _string(schema: dict[str, Any], value: str, path: str) -> Iterator[Problem]:
    low, high = schema.get("minLength"), schema.get("maxLength")
    if low is not None and len(value) < low:
        yield path, f"must be at least {low} character(s) long"
    if high is not None and len(value) > high:
        yield path, f"must be at most {high} character(s) long"
    pattern = schema.get("pattern")
    if pattern is not None and re.search(pattern, value) is None:
        yield path, f"must match the pattern {pattern!r}, got {value!r}"


def _number(schema: dict[str, Any], value: float, path: str) -> Iterator[Problem]:
    bounds = (
        ("minimum", operator.ge, ">="),
        ("maximum", operator.le, "<="),
        ("exclusiveMinimum", operator.gt, ">"),
        ("exclusiveMaximum", operator.lt, "<"),
    )
    for key, holds, sign in bounds:
        bound: Any = schema.get(key)  # any JSON value; a number is checked for next
        if _is_type(bound, "number") and not holds(value, bound):
            yield path, f"must be {sign} {bound}, got {value!r}"


def _is_type(value: Any, name: str) -> bool:
    if name == "object":
        return isinstance(value, dict)
    if name == "array":
        return isinstance(value, list | tuple)
    if name == "string":
        return isinstance(value, str)
    if name == "boolean":
        return isinstance(value, bool)
    if name == "null":
        return value is None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    if name == "integer":
        return isinstance(value, int) or (math.isfinite(value) and float(value).is_integer())
    return name == "number"


def _fits_type(schema: dict[str, Any], value: Any) -> bool:
    types = _as_list(schema.get("type"))
    return bool(types) and any(_is_type(value, name) for name in types)


def _same(a: Any, b: Any) -> bool:
    """JSON equality: ``1 == True`` in Python, but not in JSON."""
    return a == b and isinstance(a, bool) == isinstance(b, bool)


def _as_list(types: Any) -> list[str]:
    if types is None:
        return []
    return [types] if isinstance(types, str) else list(types)


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _describe(value: Any) -> str:
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{type(value).__name__} {text}"


def raise_problems(interrupt_id: str, found: list[Problem], what: str = "answer") -> None:
    """Raise ``InvalidAnswerError`` listing ``found``, if there is anything in it."""
    if found:
        raise answer_error(interrupt_id, found, what)


def answer_error(
    interrupt_id: str, found: list[Problem], what: str = "answer", *, in_node: bool = False
) -> Exception:
    """The ``InvalidAnswerError`` naming every problem with an answer: refused at resume
    (nothing ran), or by the node that asked (the node failed)."""
    listed = "; ".join(f"{path}: {message}" if path else message for path, message in found)
    outcome = (
        "The node that asked refused it and failed"
        if in_node
        else "Nothing was resumed; the interrupt is still pending"
    )
    return InvalidAnswerError(
        f"the {what} to interrupt {interrupt_id} is invalid: {listed}. {outcome}; answer the "
        "interrupt again with Command(resume=...)",
        interrupt_id=interrupt_id,
        problems=tuple(found),
    )
