"""SQL text for ``PostgresStore``: filter terms as SQL, values as JSON that ``jsonb`` keeps,
the pieces its statements share, and rows read back as items.

Filters translate each ``(field, operator, operand)`` term of ``parse_filter`` with the semantics
of ``matches``; every value (field names included) is a bound parameter, never SQL text.
"""

from __future__ import annotations

import json
import math
from datetime import UTC
from typing import Any, LiteralString

from psycopg import sql

from threadline.errors import InvalidStoreInputError
from threadline.store.filters import Condition
from threadline.store.item import Item, Namespace

_OPERATORS: dict[str, LiteralString] = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}


def condition_sql(condition: Condition, i: int, params: dict[str, Any]) -> sql.Composable:
    """One filter term as SQL with the semantics of ``matches``; its values go into ``params``.

    Parameter names are generated (``f0``, ``o0``); the field name is only ever a bound value.
    """
    field, op, operand = condition
    if not text_ok(field):
        # No stored object has this key, so the field is missing everywhere.
        return sql.SQL("TRUE" if op == "$ne" else "FALSE")
    f, o = f"f{i}", f"o{i}"
    params[f] = field
    got = f"(value -> %({f})s::text)"
    if op in ("$eq", "$ne"):
        try:
            params[o] = jsonb_text(operand, "operand")
        except ValueError:
            # Not representable in jsonb, so equal to no stored value.
            return sql.SQL("TRUE" if op == "$ne" else "FALSE")
        if op == "$eq":
            return sql.SQL(f"{got} = %({o})s::jsonb")
        return sql.SQL(f"{got} IS DISTINCT FROM %({o})s::jsonb")
    sign = _OPERATORS[op]
    below = op in ("$lt", "$lte")
    if isinstance(operand, str):
        bound, sign = string_bound(operand, sign, below)
        params[o] = bound
        return sql.SQL(
            f"CASE WHEN jsonb_typeof({got}) = 'string' "
            f'THEN (value ->> %({f})s::text) COLLATE "C" {sign} %({o})s::text ELSE FALSE END'
        )
    if math.isnan(operand) or (math.isinf(operand) and below != (operand > 0)):
        return sql.SQL("FALSE")  # nothing is above +inf or below -inf; nan orders nothing
    is_number = f"jsonb_typeof({got}) = 'number'"
    if math.isinf(operand):
        return sql.SQL(f"COALESCE({is_number}, FALSE)")  # every number is below +inf
    params[o] = jsonb_text(operand, "operand")
    return sql.SQL(f"CASE WHEN {is_number} THEN {got} {sign} %({o})s::jsonb ELSE FALSE END")


def string_bound(operand: str, sign: LiteralString, below: bool) -> tuple[str, LiteralString]:
    """Rewrite a string range operand PostgreSQL cannot bind (NUL, lone surrogate) into an
    equivalent bound for the strings it can store (which never hold those characters)."""
    for i, char in enumerate(operand):
        if char == "\x00":
            # t < s  <=>  t <= s[:i],   t > s  <=>  t > s[:i]
            return operand[:i], ("<=" if below else ">")
        if "\ud800" <= char <= "\udfff":
            # Stored characters skip the surrogate block, so s[:i] + U+E000 splits them alike.
            return operand[:i] + "\ue000", ("<" if below else ">=")
    return operand, sign


def text_ok(text: str) -> bool:
    if "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def storable(namespace: Namespace, key: str) -> bool:
    return all(text_ok(text) for text in (*namespace, key))


def jsonb_text(value: object, what: str) -> str:
    """JSON text that ``jsonb`` stores and returns unchanged in meaning.

    Raises ``ValueError`` for what ``jsonb`` cannot hold (non-JSON data, NUL characters, lone
    surrogates); writes integral floats in exponent range in full (``1e+16`` would come back an
    ``int``).
    """
    parts: list[str] = []
    write_json(value, what, parts)
    return "".join(parts)


def write_json(value: object, path: str, out: list[str]) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, str):
        out.append(json_string(value, path))
    elif isinstance(value, int):
        out.append(int.__repr__(value))
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidStoreInputError(f"{path} is {value!r}, which JSON cannot hold")
        text = float.__repr__(value)
        if "e" in text and value.is_integer():
            text = f"{int(value)}.0"
        out.append(text)
    elif isinstance(value, dict):
        out.append("{")
        for n, (k, v) in enumerate(value.items()):
            if not isinstance(k, str):
                raise InvalidStoreInputError(f"{path} has a non-string key {k!r}")
            if n:
                out.append(",")
            out.append(json_string(k, f"{path} key"))
            out.append(":")
            write_json(v, f"{path}[{k!r}]", out)
        out.append("}")
    elif isinstance(value, list | tuple):
        out.append("[")
        for n, v in enumerate(value):
            if n:
                out.append(",")
            write_json(v, f"{path}[{n}]", out)
        out.append("]")
    else:
        raise InvalidStoreInputError(f"{path} is a {type(value).__name__}, which JSON cannot hold")


def json_string(text: str, path: str) -> str:
    if not text_ok(text):
        raise InvalidStoreInputError(
            f"{path} holds a NUL character or a lone surrogate ({text[:40]!r}), which "
            "PostgreSQL jsonb cannot store"
        )
    return json.dumps(text, ensure_ascii=False)


# -- statements' pieces and rows ------------------------------------------------------------

COLUMNS = "prefix, key, value::text, created_at, updated_at, expires_at"
LIVE = "(expires_at IS NULL OR expires_at > %(now)s)"
IN_PREFIX = "(prefix = %(p)s OR (prefix >= %(p_lo)s AND prefix < %(p_hi)s))"
# The best cosine of the row's vectors (0.0 for a zero vector, as in ``semantic.cosine``);
# NULL, so no result, when it has none. ``sum`` adds in array order, as Python's ``sum`` does.
SCORE = """(
    SELECT MAX(CASE WHEN v.norm = 0 OR %(q_norm)s = 0 THEN 0.0 ELSE
               (SELECT sum(a * b) FROM unnest(v.vector, %(q)s::float8[]) AS u(a, b))
               / (v.norm * %(q_norm)s) END)
      FROM {vectors} AS v WHERE v.prefix = t.prefix AND v.key = t.key
)"""
WITH_SUFFIX = "(prefix = %(s)s OR right(prefix, %(s_len)s) = %(s_dot)s)"


def prefix_params(prefix: Namespace) -> dict[str, str]:
    text = ".".join(prefix)
    return {"p": text, "p_lo": text + ".", "p_hi": text + "/"}  # "/" follows "."


def item_of(row: tuple[Any, ...]) -> Item:
    prefix, key, text, created, updated, expires = row
    return Item(
        value=json.loads(text),
        key=key,
        namespace=tuple(prefix.split(".")),
        created_at=created.astimezone(UTC),
        updated_at=updated.astimezone(UTC),
        expires_at=None if expires is None else expires.astimezone(UTC),
    )
