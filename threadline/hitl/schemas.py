"""The schema of an answer: given as a class or a JSON Schema, stored as JSON Schema.

``interrupt(value, schema=...)`` stores the JSON Schema with the interrupt (so a UI can render a
form and another process can check the answer); the node gets the answer back as the schema's
own kind of value: a model instance for a pydantic model, a dataclass instance for a dataclass,
a dict for a TypedDict or a JSON Schema dict.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import types
import typing
from collections.abc import Callable
from typing import Any

from threadline.errors import InvalidSchemaError
from threadline.hitl.answers import checked_answer
from threadline.hitl.validation import answer_error, check_supported


@dataclasses.dataclass(frozen=True, slots=True)
class AnswerSchema:
    """What an ``interrupt(schema=...)`` expects: its JSON Schema, and how to build the value
    the node receives from a valid answer."""

    json_schema: dict[str, Any]
    build: Callable[[Any], Any] | None = None  # None: the answer itself (a dict schema)

    def answer(self, question: Any, answer: Any, interrupt_id: str) -> Any:
        """The node's value for a stored answer, checked again (a spare answer given while no
        interrupt waited was not checked at resume)."""
        answer = checked_answer(self.json_schema, question, answer, interrupt_id)
        if self.build is None:
            return answer
        from pydantic import ValidationError  # build is pydantic's

        try:
            return self.build(answer)
        except ValidationError as exc:  # a check JSON Schema cannot express (a validator)
            found = [
                (".".join(map(str, e["loc"])), e["msg"]) for e in exc.errors(include_url=False)
            ]
            raise answer_error(interrupt_id, found, in_node=True) from None


def answer_schema(schema: Any) -> AnswerSchema:
    """Read ``schema`` (pydantic model class, dataclass, TypedDict or JSON Schema dict)."""
    if isinstance(schema, dict):
        check_supported(schema)
        return AnswerSchema(copy.deepcopy(schema))
    if isinstance(schema, type):
        return _class_schema(schema)
    raise InvalidSchemaError(
        f"interrupt(schema=...) takes a pydantic model class, a dataclass, a TypedDict or a "
        f"JSON Schema dict, got {schema!r}"
    )


@functools.lru_cache(maxsize=256)
def _class_schema(cls: type) -> AnswerSchema:
    try:
        import pydantic
    except ImportError:
        raise InvalidSchemaError(
            f"interrupt(schema={cls.__qualname__}) needs pydantic to read the class "
            "(pip install 'threadline[pydantic]'); or pass a JSON Schema dict"
        ) from None
    if issubclass(cls, pydantic.BaseModel):
        json_schema = cls.model_json_schema()
        build: Callable[[Any], Any] = cls.model_validate
    elif dataclasses.is_dataclass(cls) or _is_typeddict(cls):
        adapter = pydantic.TypeAdapter(_pydantic_ready(cls))
        json_schema = adapter.json_schema()
        build = adapter.validate_python
    else:
        raise InvalidSchemaError(
            f"interrupt(schema={cls.__qualname__}) needs a pydantic model, a dataclass or a "
            "TypedDict class (or a JSON Schema dict)"
        )
    check_supported(json_schema, f"the JSON Schema of {cls.__qualname__}")
    return AnswerSchema(json_schema, build)


def _is_typeddict(cls: type) -> bool:
    import typing_extensions  # installed with pydantic, which reading a class needs anyway

    return typing_extensions.is_typeddict(cls)


def _pydantic_ready(tp: Any) -> Any:
    """``tp`` with every TypedDict in it rebuilt as a ``typing_extensions`` one: pydantic
    refuses ``typing.TypedDict`` before Python 3.12, and LangGraph users write both."""
    import typing_extensions

    if typing_extensions.is_typeddict(tp):
        return _rebuilt_typeddict(tp)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is None or not args or origin is typing.Literal:
        return tp
    if origin is typing.Annotated:
        return typing.Annotated[(_pydantic_ready(args[0]), *tp.__metadata__)]
    ready = tuple(_pydantic_ready(arg) for arg in args)
    if ready == args:
        return tp
    if origin is typing.Union or origin is types.UnionType:
        return typing.Union[ready]  # noqa: UP007 (rebuilt at run time, not an annotation)
    return origin[ready]


@functools.lru_cache(maxsize=256)
def _rebuilt_typeddict(tp: Any) -> Any:
    import typing_extensions as te

    fields = {}
    qualifiers: tuple[object, ...] = (te.Required, te.NotRequired)
    for name, hint in te.get_type_hints(tp, include_extras=True).items():
        while typing.get_origin(hint) in qualifiers:
            hint = typing.get_args(hint)[0]
        wrap = te.Required if name in tp.__required_keys__ else te.NotRequired
        fields[name] = wrap[_pydantic_ready(hint)]
    rebuilt = te.TypedDict(tp.__name__, fields)  # type: ignore[misc]  # a name known at run time
    rebuilt.__doc__ = tp.__doc__
    return rebuilt
