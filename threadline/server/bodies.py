"""Request bodies of the HTTP API, as LangGraph Server's; unknown fields are refused by name."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from threadline.server.runopts import STREAM_MODES

StreamMode = Literal[
    "values", "updates", "custom", "messages-tuple", "tasks", "checkpoints", "debug"
]
Strategy = Literal["reject", "enqueue", "interrupt", "rollback"]
SortOrder = Literal["asc", "desc"]


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AssistantCreate(Body):
    graph_id: str
    assistant_id: str | None = None
    config: dict[str, Any] | None = None
    context: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    if_exists: Literal["raise", "do_nothing"] = "raise"
    name: str | None = None
    description: str | None = None


class AssistantPatch(Body):
    graph_id: str | None = None
    config: dict[str, Any] | None = None
    context: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    name: str | None = None
    description: str | None = None


class AssistantSearch(Body):
    metadata: dict[str, Any] | None = None
    graph_id: str | None = None
    name: str | None = None
    limit: int = Field(10, ge=1, le=1000)
    offset: int = Field(0, ge=0, le=1_000_000_000)
    sort_by: Literal["assistant_id", "graph_id", "name", "created_at", "updated_at"] | None = None
    sort_order: SortOrder | None = None
    select: list[str] | None = None


class ThreadCreate(Body):
    thread_id: str | None = None
    metadata: dict[str, Any] | None = None
    if_exists: Literal["raise", "do_nothing"] = "raise"
    graph_id: str | None = None
    supersteps: list[dict[str, Any]] | None = None
    ttl: dict[str, Any] | int | None = None

    @field_validator("supersteps", "ttl")
    @classmethod
    def _unsupported(cls, value: Any) -> Any:
        if value is not None:
            raise ValueError("not supported by threadline's server yet")
        return value


class ThreadPatch(Body):
    metadata: dict[str, Any] | None = None
    ttl: dict[str, Any] | int | None = None

    @field_validator("ttl")
    @classmethod
    def _unsupported(cls, value: Any) -> Any:
        if value is not None:
            raise ValueError("not supported by threadline's server yet")
        return value


class ThreadSearch(Body):
    metadata: dict[str, Any] | None = None
    values: dict[str, Any] | None = None
    ids: list[str] | None = None
    status: Literal["idle", "busy", "interrupted", "error"] | None = None
    limit: int = Field(10, ge=1, le=1000)
    offset: int = Field(0, ge=0, le=1_000_000_000)
    sort_by: Literal["thread_id", "status", "created_at", "updated_at"] | None = None
    sort_order: SortOrder | None = None
    select: list[str] | None = None
    extract: dict[str, str] | None = None

    @field_validator("extract")
    @classmethod
    def _unsupported(cls, value: Any) -> Any:
        if value is not None:
            raise ValueError("not supported by threadline's server yet")
        return value


class ThreadPrune(Body):
    thread_ids: list[str] = Field(max_length=1000)
    strategy: Literal["delete", "keep_latest"] = "delete"


class ThreadCount(Body):
    metadata: dict[str, Any] | None = None
    values: dict[str, Any] | None = None
    status: Literal["idle", "busy", "interrupted", "error"] | None = None


class CheckpointRef(Body):
    thread_id: str | None = None
    checkpoint_ns: str = ""
    checkpoint_id: str | None = None
    checkpoint_map: dict[str, Any] | None = None


class StateUpdate(Body):
    values: dict[str, Any] | list[Any] | None = None
    as_node: str | None = None
    checkpoint: CheckpointRef | None = None
    checkpoint_id: str | None = None


class StateAt(Body):
    checkpoint: CheckpointRef | None = None
    subgraphs: bool = False


class HistoryQuery(Body):
    limit: int = Field(10, ge=1, le=1000)
    before: CheckpointRef | str | None = None
    metadata: dict[str, Any] | None = None
    checkpoint: CheckpointRef | None = None


class CommandBody(Body):
    resume: Any = None
    update: dict[str, Any] | list[Any] | None = None
    goto: Any = None


class RunCreate(Body):
    """A run's options (LangGraph's ``RunCreateStateful``/``RunCreateStateless``)."""

    assistant_id: str
    input: Any = None
    command: CommandBody | None = None
    config: dict[str, Any] | None = None
    context: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    stream_mode: StreamMode | list[StreamMode] = "values"
    stream_subgraphs: bool = False
    stream_resumable: bool = False
    checkpoint: CheckpointRef | None = None
    checkpoint_id: str | None = None
    checkpoint_during: bool | None = None
    interrupt_before: Literal["*"] | list[str] | None = None
    interrupt_after: Literal["*"] | list[str] | None = None
    durability: Literal["sync", "async", "exit"] | None = None
    webhook: str | None = None
    on_disconnect: Literal["cancel", "continue"] = "continue"
    on_completion: Literal["delete", "keep"] | None = None
    multitask_strategy: Strategy = "reject"
    if_not_exists: Literal["create", "reject"] = "reject"
    after_seconds: float | None = Field(None, ge=0)

    @field_validator("webhook")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("a webhook is an http:// or https:// URL")
        return value

    def run_kwargs(self) -> dict[str, Any]:
        """What the worker needs to run it, as stored with the run (``Run.kwargs``)."""
        if self.input is not None and self.command is not None:
            raise ValueError("give input or command, not both")
        durability = self.durability
        if durability is None and self.checkpoint_during is not None:
            durability = "async" if self.checkpoint_during else "exit"
        modes = [self.stream_mode] if isinstance(self.stream_mode, str) else self.stream_mode
        assert all(m in STREAM_MODES for m in modes)
        return {
            "input": self.input,
            "command": self.command.model_dump(exclude_unset=True) if self.command else None,
            "config": self.config,
            "context": self.context,
            "stream_mode": modes,
            "stream_subgraphs": self.stream_subgraphs,
            "checkpoint": self.checkpoint.model_dump() if self.checkpoint else None,
            "checkpoint_id": self.checkpoint_id,
            "interrupt_before": self.interrupt_before,
            "interrupt_after": self.interrupt_after,
            "durability": durability,
            "webhook": self.webhook,
            "run_metadata": self.metadata,
        }


class RunBatchItem(RunCreate):
    pass


class RunsCancel(Body):
    """``POST /runs/cancel``: the runs of a thread, runs by id, or every run in a status."""

    thread_id: str | None = None
    run_ids: list[str] | None = None
    status: Literal["pending", "running", "all"] | None = None


class StorePut(Body):
    namespace: list[str]
    key: str
    value: dict[str, Any]
    index: Literal[False] | list[str] | None = None
    # minutes, as LangGraph Server's; at most about a hundred years
    ttl: float | None = Field(None, gt=0, le=52_596_000)


class StoreDelete(Body):
    namespace: list[str]
    key: str


class StoreSearch(Body):
    namespace_prefix: list[str] = Field(default_factory=list)
    filter: dict[str, Any] | None = None
    limit: int = Field(10, ge=1, le=1000)
    offset: int = Field(0, ge=0, le=1_000_000_000)
    query: str | None = None
    refresh_ttl: bool | None = None  # the items found are read again with their TTL refreshed


class StoreNamespaces(Body):
    prefix: list[str] | None = None
    suffix: list[str] | None = None
    max_depth: int | None = Field(None, ge=1)
    limit: int = Field(100, ge=1, le=1000)
    offset: int = Field(0, ge=0, le=1_000_000_000)
