"""The Runnable methods LangGraph users call on a compiled graph, besides invoke and stream.

``batch``/``abatch`` run several inputs concurrently, ``with_config`` binds config to a copy
of the graph, ``get_input_jsonschema``/``get_output_jsonschema`` describe what ``invoke`` takes
and returns (with pydantic, as LangGraph does). ``version="v2"`` outputs are shaped here too.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import sys
import typing
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Self

from threadline.constants import INTERRUPT_KEY
from threadline.errors import ConfigError
from threadline.graph.schema import is_pydantic_model, is_typeddict
from threadline.types import GraphOutput

Config = Mapping[str, Any]
# Config keys merged key by key (the others replace the bound value)
_MERGED_KEYS = ("configurable", "metadata")


class RunnableMethods:
    """Mixed into ``CompiledStateGraph``: what LangChain's Runnable offers that graphs use."""

    name: str
    config: dict[str, Any] | None
    builder: Any  # the StateGraph this graph was compiled from

    if TYPE_CHECKING:  # defined by CompiledStateGraph

        def invoke(self, input: Any, config: Config | None = None, **kwargs: Any) -> Any: ...

        async def ainvoke(self, input: Any, config: Config | None = None, **kwargs: Any) -> Any: ...

    def with_config(self, config: Config | None = None, **fields: Any) -> Self:
        """A copy of this graph whose runs use ``config`` (and ``fields`` such as
        ``recursion_limit=`` or ``tags=``) under what each call passes."""
        clone = copy.copy(self)
        clone.config = merge_configs(self.config, {**(config or {}), **fields})
        return clone

    def batch(
        self,
        inputs: Sequence[Any],
        config: Config | Sequence[Config] | None = None,
        *,
        return_exceptions: bool = False,
        **kwargs: Any,
    ) -> list[Any]:
        """``invoke`` each input, concurrently (at most ``config["max_concurrency"]`` at once);
        outputs in input order. With ``return_exceptions=True`` a failed run gives its error."""
        if not inputs:
            return []
        configs = _configs(config, len(inputs))

        def run(pair: tuple[Any, Config | None]) -> Any:
            try:
                return self.invoke(pair[0], pair[1], **kwargs)
            except Exception as exc:
                if return_exceptions:
                    return exc
                raise

        workers = _max_concurrency(configs[0]) or len(inputs)
        with ThreadPoolExecutor(max_workers=min(workers, len(inputs))) as pool:
            return list(pool.map(run, zip(inputs, configs, strict=True)))

    async def abatch(
        self,
        inputs: Sequence[Any],
        config: Config | Sequence[Config] | None = None,
        *,
        return_exceptions: bool = False,
        **kwargs: Any,
    ) -> list[Any]:
        """``ainvoke`` each input concurrently; outputs in input order."""
        if not inputs:
            return []
        configs = _configs(config, len(inputs))
        limit = asyncio.Semaphore(_max_concurrency(configs[0]) or len(inputs))

        async def run(input: Any, cfg: Config | None) -> Any:
            async with limit:
                return await self.ainvoke(input, cfg, **kwargs)

        runs = [run(i, c) for i, c in zip(inputs, configs, strict=True)]
        return list(await asyncio.gather(*runs, return_exceptions=return_exceptions))

    def get_input_jsonschema(self, config: Config | None = None) -> dict[str, Any]:
        """The JSON schema of what ``invoke`` takes (the input schema, else the state's)."""
        return _json_schema(self.builder.input_schema, f"{self.name}_input")

    def get_output_jsonschema(self, config: Config | None = None) -> dict[str, Any]:
        """The JSON schema of what ``invoke`` returns (the output schema, else the state's)."""
        return _json_schema(self.builder.output_schema, f"{self.name}_output")

    def _bound(self, config: Config | None) -> Config | None:
        """The call's config over the one ``with_config`` bound."""
        if config is not None and not isinstance(config, Mapping):
            raise ConfigError(
                f"config must be a dict such as {{'configurable': {{'thread_id': ...}}}}, got "
                f"{type(config).__name__} {config!r}"
            )
        return merge_configs(self.config, config) if self.config else config

    def _graph_output(self, output: Any) -> GraphOutput[Any]:
        """An ``invoke`` output as ``version="v2"`` returns it."""
        interrupts: tuple[Any, ...] = ()
        if isinstance(output, dict) and INTERRUPT_KEY in output:
            output = dict(output)
            interrupts = tuple(output.pop(INTERRUPT_KEY))
        return GraphOutput(self._as_output_type(output), interrupts)

    def _as_output_type(self, values: Any) -> Any:
        """``values`` as an instance of the output schema when it is a dataclass or a pydantic
        model (LangGraph's v2 outputs), else as they are."""
        cls = self.builder.output_schema
        if isinstance(values, dict) and _is_model_class(cls):
            return cls(**values)
        return values


def merge_configs(base: Config | None, over: Config | None) -> dict[str, Any]:
    """``over`` on top of ``base``: ``configurable`` and ``metadata`` merged key by key,
    ``tags`` joined, anything else replaced."""
    merged = dict(base or {})
    for key, value in (over or {}).items():
        if key in _MERGED_KEYS and isinstance(merged.get(key), Mapping):
            merged[key] = {**merged[key], **(value or {})}
        elif key == "tags" and merged.get("tags"):
            merged[key] = list(dict.fromkeys([*merged["tags"], *(value or ())]))
        else:
            merged[key] = value
    return merged


def _configs(config: Config | Sequence[Config] | None, count: int) -> list[Config | None]:
    if isinstance(config, Sequence) and not isinstance(config, str):
        if len(config) != count:
            raise ValueError(f"batch got {count} inputs but {len(config)} configs")
        return list(config)
    return [config] * count


def _max_concurrency(config: Config | None) -> int | None:
    limit = (config or {}).get("max_concurrency")
    if limit is not None and (not isinstance(limit, int) or limit < 1):
        raise ValueError(f"max_concurrency must be a positive integer, got {limit!r}")
    return limit


def _is_model_class(cls: Any) -> bool:
    return isinstance(cls, type) and (dataclasses.is_dataclass(cls) or is_pydantic_model(cls))


def _json_schema(cls: Any, dataclass_title: str) -> dict[str, Any]:
    try:
        from pydantic import TypeAdapter
    except ImportError as exc:  # pragma: no cover - pydantic is installed with the dev extra
        raise ImportError(
            "get_input_jsonschema/get_output_jsonschema need pydantic: "
            "pip install 'threadline[pydantic]'"
        ) from exc
    schema = TypeAdapter(_adaptable(cls)).json_schema()
    if dataclasses.is_dataclass(cls):
        schema["title"] = dataclass_title  # LangGraph names a dataclass's schema after the graph
    return schema


def _adaptable(cls: Any) -> Any:
    """``cls``, or for a ``typing.TypedDict`` on Python < 3.12 (which pydantic refuses there)
    the same keys as a ``typing_extensions.TypedDict``."""
    if sys.version_info >= (3, 12) or not is_typeddict(cls) or type(cls).__module__ != "typing":
        return cls
    import typing_extensions

    hints = typing.get_type_hints(cls, include_extras=True)
    fields = {
        key: hint if key in cls.__required_keys__ else typing_extensions.NotRequired[hint]
        for key, hint in hints.items()
    }
    return typing_extensions.TypedDict(cls.__name__, fields)  # type: ignore[operator]


__all__ = ["RunnableMethods", "merge_configs"]
