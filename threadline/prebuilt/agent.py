"""``create_react_agent`` (LangGraph's) and ``create_agent`` (LangChain v1's): a model node
and a tools node in a loop, until the model answers without asking for tools.

The model node (``"agent"``, or ``"model"`` for ``create_agent``) calls the model on the
conversation, after repairing it if a run left a tool call unanswered (see ``history.py``).
Each tool call is sent to ``"tools"`` on its own (``Send``), so calls run in parallel and a
call that stops for a person does not hold the others. With ``review``, a ``"review"`` node
asks for one decision per reviewed call, all in one interrupt, before any of them runs.
"""

from __future__ import annotations

import typing
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal, NotRequired, TypedDict

from threadline.checkpoint.base import BaseSaver
from threadline.constants import END
from threadline.errors import NotSupportedError
from threadline.graph.compiled import CompiledStateGraph
from threadline.graph.schema import is_pydantic_model
from threadline.graph.state_graph import StateGraph
from threadline.managed import RemainingSteps
from threadline.messages import AIMessage, AnyMessage, SystemMessage, ToolMessage, add_messages
from threadline.prebuilt.model_call import (
    ModelStep,
    bound_model,
    is_dynamic,
    prompt_function,
    state_value,
)
from threadline.prebuilt.review import edit_schema, make_review_node, needs_review, review_rules
from threadline.prebuilt.tool_node import ToolNode
from threadline.prebuilt.tools import AnyTool, as_tool
from threadline.store.base import BaseStore
from threadline.types import Send


class AgentState(TypedDict):
    """The state of an agent: its conversation, and how many steps the run may still take."""

    messages: Annotated[Sequence[AnyMessage], add_messages]
    remaining_steps: NotRequired[RemainingSteps]


class AgentStateWithStructuredResponse(AgentState):
    """The state of an agent asked for a ``response_format``."""

    structured_response: Any


def create_react_agent(
    model: Any,
    tools: Sequence[Any],
    *,
    prompt: Any = None,
    response_format: Any = None,
    pre_model_hook: Any = None,
    post_model_hook: Any = None,
    state_schema: type | None = None,
    context_schema: type | None = None,
    checkpointer: BaseSaver | bool | None = None,
    store: BaseStore | None = None,
    interrupt_before: list[str] | None = None,
    interrupt_after: list[str] | None = None,
    debug: bool = False,
    version: Literal["v1", "v2"] = "v2",
    name: str | None = None,
    **unexpected: Any,
) -> CompiledStateGraph:
    """An agent graph that calls tools in a loop until the model answers, as LangGraph's.

    Nodes: ``"agent"`` (the model) and ``"tools"`` (a ``ToolNode``); with ``response_format``,
    ``"generate_structured_response"`` asks the model once more for an answer in that schema,
    stored as ``structured_response``; with ``pre_model_hook``, that node runs before each model
    call (its ``llm_input_messages``, if it returns them, are what the model is sent); with
    ``post_model_hook``, after each (calls it leaves unanswered run; answers it adds go back to
    the model).
    ``version="v2"`` sends each tool call to ``"tools"`` on its own; ``"v1"`` runs all calls of
    a turn in one ``"tools"`` task.
    """
    _refuse(unexpected)
    if version not in ("v1", "v2"):
        raise ValueError(f"Invalid version {version}. Supported versions are 'v1' and 'v2'.")
    builder = _AgentBuilder(
        model, tools, prompt, response_format, state_schema, "agent", version, name, {}
    )
    return builder.with_hooks(pre_model_hook, post_model_hook).compile(
        context_schema,
        checkpointer=checkpointer,
        store=store,
        interrupt_before=interrupt_before,
        interrupt_after=interrupt_after,
        debug=debug,
        name=name,
    )


def create_agent(
    model: Any,
    tools: Sequence[Any] | None = None,
    *,
    system_prompt: str | SystemMessage | None = None,
    middleware: Sequence[Any] = (),
    response_format: Any = None,
    state_schema: type | None = None,
    context_schema: type | None = None,
    checkpointer: BaseSaver | bool | None = None,
    store: BaseStore | None = None,
    interrupt_before: list[str] | None = None,
    interrupt_after: list[str] | None = None,
    debug: bool = False,
    name: str | None = None,
    cache: Any = None,
    review: Mapping[str, Any] | None = None,
    **unexpected: Any,
) -> CompiledStateGraph:
    """LangChain v1's agent: nodes ``"model"`` and ``"tools"``.

    ``review={tool_name: allowed_decisions}`` (or ``True`` for all of ``accept``, ``edit``,
    ``respond``, ``reject``) makes calls of those tools wait for a person: a ``"review"`` node
    asks about all of a turn's reviewed calls in one interrupt (``threadline.hitl``); answer
    with ``Command(resume=...)``. Rejected and answered calls never run.
    """
    _refuse(unexpected, middleware=list(middleware) or None)
    return _AgentBuilder(
        model,
        list(tools or ()),
        system_prompt,
        response_format,
        state_schema,
        "model",
        "v2",
        name,
        review,
    ).compile(
        context_schema,
        checkpointer=checkpointer,
        store=store,
        interrupt_before=interrupt_before,
        interrupt_after=interrupt_after,
        debug=debug,
        name=name,
        cache=cache,
    )


class _AgentBuilder:
    """The agent's graph: its nodes and the routes between them."""

    def __init__(
        self,
        model: Any,
        tools: Sequence[Any],
        prompt: Any,
        response_format: Any,
        state_schema: type | None,
        model_node: str,
        version: str,
        name: str | None,
        review: Mapping[str, Any] | None,
    ) -> None:
        if isinstance(model, str):
            raise NotSupportedError(
                f"model {model!r}: model names need LangChain's init_chat_model, which "
                "threadline does not have; pass a model object, e.g. OpenAIChatModel(model=...)"
            )
        self.runnable: list[AnyTool] = [as_tool(t) for t in tools if not isinstance(t, dict)]
        builtin = [t for t in tools if isinstance(t, dict)]  # run by the provider, not here
        names = [t.name for t in self.runnable]
        self.rules = review_rules(review, names)
        self.model = model
        self.response_format = response_format
        self.model_node = model_node
        self.version = version
        self.state_schema = _state_schema(state_schema, response_format)
        offered = [t.for_model() for t in self.runnable] + builtin
        chosen = model if is_dynamic(model) else bound_model(model, offered)
        self.return_direct = {t.name for t in self.runnable if t.return_direct}
        self.step = ModelStep(chosen, prompt_function(prompt), name, self.return_direct)
        self.injects_state = any(t.injections.state or t.injections.runtime for t in self.runnable)
        self.pre_model_hook: Any = None
        self.post_model_hook: Any = None
        self.entry = model_node  # where each turn starts: the hook, else the model

    def with_hooks(self, pre: Any, post: Any) -> _AgentBuilder:
        """LangGraph's ``pre_model_hook`` and ``post_model_hook`` nodes."""
        if pre is not None:
            self.pre_model_hook = pre
            self.entry = "pre_model_hook"
        self.post_model_hook = post
        return self

    def compile(self, context_schema: type | None, **options: Any) -> CompiledStateGraph:
        graph = StateGraph(self.state_schema, context_schema)
        self._add_model(graph)
        if self.response_format is not None:
            graph.add_node("generate_structured_response", self._structured_response)
            graph.add_edge("generate_structured_response", END)
        if self.runnable:
            graph.add_node("tools", ToolNode(self.runnable))
            if self.return_direct:
                graph.add_conditional_edges("tools", self._after_tools, [self.entry, END])
            else:
                graph.add_edge("tools", self.entry)
        checked = [self.entry, self.finish, *(["tools"] if self.runnable else [])]
        if self.post_model_hook is not None:
            graph.add_node("post_model_hook", self.post_model_hook)
            graph.add_edge(self.model_node, "post_model_hook")
            graph.add_conditional_edges("post_model_hook", self._after_check, checked)
        elif self.runnable:
            review = ["review"] if self.rules else []
            graph.add_conditional_edges(
                self.model_node, self._after_model, [self.finish, "tools", *review]
            )
        else:
            graph.add_edge(self.model_node, self.finish)
        if self.rules:
            schemas = {t.name: edit_schema(t) for t in self.runnable if t.name in self.rules}
            graph.add_node("review", make_review_node(self.rules, schemas))
            graph.add_conditional_edges("review", self._after_check, checked)
        return graph.compile(**options)

    def _add_model(self, graph: StateGraph) -> None:
        if self.pre_model_hook is None:
            graph.add_node(self.model_node, self.step)
        else:
            reads = model_input_schema(self.state_schema)
            graph.add_node(self.model_node, self.step, input_schema=reads)
            graph.add_node("pre_model_hook", self.pre_model_hook)
            graph.add_edge("pre_model_hook", self.model_node)
        graph.set_entry_point(self.entry)

    # ------------------------------------------------------------------ routes
    @property
    def finish(self) -> str:
        """Where a turn without tool calls goes."""
        return "generate_structured_response" if self.response_format is not None else END

    def _after_model(self, state: Any) -> str | list[Send]:
        last = state_value(state, "messages")[-1]
        if not isinstance(last, AIMessage) or not last.tool_calls:
            return self.finish
        if self.rules and needs_review(last, self.rules):
            return "review"
        return self._to_tools(state, last.tool_calls)

    def _after_check(self, state: Any) -> str | list[Send]:
        """After a post-model hook or the review: the calls of the last assistant message that
        nothing answered yet run; if answers were added, the model sees them; else the turn
        ends."""
        messages = list(state_value(state, "messages"))
        asked = [i for i, m in enumerate(messages) if isinstance(m, AIMessage)]
        if not asked:
            return self.finish
        at = asked[-1]
        answered = {m.tool_call_id for m in messages[at + 1 :] if isinstance(m, ToolMessage)}
        pending = [c for c in messages[at].tool_calls if c["id"] not in answered]
        if pending and self.runnable:
            return self._to_tools(state, pending)
        if isinstance(messages[-1], ToolMessage):
            return self.entry
        return self.finish

    def _to_tools(self, state: Any, calls: Sequence[Mapping[str, Any]]) -> str | list[Send]:
        if self.version == "v1":
            return "tools"
        context = state if self.injects_state else None
        return [
            Send(
                "tools",
                {"__type": "tool_call_with_context", "tool_call": call, "state": context},
            )
            for call in calls
        ]

    def _after_tools(self, state: Any) -> str:
        messages = state_value(state, "messages")
        for message in reversed(messages):
            if not isinstance(message, ToolMessage):
                calls = getattr(message, "tool_calls", ())
                if any(c["name"] in self.return_direct for c in calls):
                    return END
                break
            if message.name in self.return_direct:
                return END
        return self.entry

    # ------------------------------------------------------------------ nodes
    def _structured_response(self, state: Any, runtime: Any) -> dict[str, Any]:
        messages = list(state_value(state, "messages"))
        schema = self.response_format
        if isinstance(schema, tuple):
            system, schema = schema
            messages = [SystemMessage(content=system), *messages]
        model = self.model(state, runtime) if is_dynamic(self.model) else self.model
        model = getattr(model, "bound", model)  # a langchain-core binding's model
        return {"structured_response": model.with_structured_output(schema).invoke(messages)}


def model_input_schema(state_schema: type) -> type:
    """What the model node reads when a pre-model hook runs: the state plus the hook's
    ``llm_input_messages`` (the messages to send, leaving the state's as they are)."""
    if is_pydantic_model(state_schema):
        from pydantic import create_model

        return create_model(
            "CallModelInputSchema",
            llm_input_messages=(list[AnyMessage] | None, None),
            __base__=state_schema,
        )
    fields = {
        **typing.get_type_hints(state_schema, include_extras=True),
        "llm_input_messages": NotRequired[list[AnyMessage]],
    }
    schema: type = TypedDict("CallModelInputSchema", fields)  # type: ignore[misc]  # run-time fields
    return schema


def _state_schema(schema: type | None, response_format: Any) -> type:
    if schema is None:
        return AgentStateWithStructuredResponse if response_format is not None else AgentState
    required = {"messages"} | ({"structured_response"} if response_format is not None else set())
    missing = required - set(typing.get_type_hints(schema))
    if missing:
        raise ValueError(f"Missing required key(s) {missing} in state_schema")
    return schema


def _refuse(unexpected: dict[str, Any], **unsupported: Any) -> None:
    if unexpected:
        raise TypeError(f"got unexpected keyword arguments: {sorted(unexpected)}")
    given = sorted(k for k, v in unsupported.items() if v is not None)
    if given:
        raise NotSupportedError(
            f"{', '.join(given)} not supported by threadline's prebuilt agents yet; "
            "build the graph with StateGraph to add such steps"
        )
