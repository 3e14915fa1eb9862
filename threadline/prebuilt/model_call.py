"""What the model node of an agent does: turn the state into the model's input (the prompt),
pick the model (static or chosen per call), and keep the history valid before each call."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from threadline.errors import NotSupportedError
from threadline.messages import AIMessage, SystemMessage
from threadline.prebuilt.history import history_update, repair_history, validate_history

OUT_OF_STEPS = "Sorry, need more steps to process this request."


def state_value(state: Any, key: str, default: Any = None) -> Any:
    return state.get(key, default) if isinstance(state, dict) else getattr(state, key, default)


def prompt_function(prompt: object) -> Callable[[Any], Any]:
    """The function from state to model input that ``prompt`` stands for: ``None`` (the
    messages), a str or ``SystemMessage`` (put first), a function of the state, or an object
    with ``invoke`` (a langchain-core prompt template)."""
    if prompt is None:
        return lambda state: state_value(state, "messages")
    if isinstance(prompt, str):
        prompt = SystemMessage(content=prompt)
    if isinstance(prompt, SystemMessage):
        system = prompt
        return lambda state: [system, *state_value(state, "messages")]
    if inspect.iscoroutinefunction(prompt):
        raise NotSupportedError("an async prompt function is not supported; make it sync")
    invoke: object = getattr(prompt, "invoke", None)
    if callable(invoke):
        return invoke
    if callable(prompt):
        return prompt
    raise ValueError(f"Got unexpected type for `prompt`: {type(prompt)}")


def bound_model(model: Any, tools: Sequence[Any]) -> Any:
    """``model`` offering ``tools``, unless tools were bound to it already."""
    if not tools:
        return model
    already = getattr(model, "kwargs", None)
    if isinstance(already, dict) and already.get("tools"):
        return model  # a langchain-core model.bind_tools(...) given as it is
    return model.bind_tools(list(tools))


def is_dynamic(model: Any) -> bool:
    """A function choosing the model per call: ``(state, runtime) -> model``."""
    return callable(model) and not callable(getattr(model, "invoke", None))


@dataclass(frozen=True, slots=True)
class ModelStep:
    """Calls the model on the state's conversation, after making that conversation valid."""

    model: Any  # a chat model with the tools bound, or a function choosing one
    prompt: Callable[[Any], Any]
    name: str | None
    return_direct: frozenset[str] | set[str] = frozenset()
    messages_key: str = "messages"

    def __call__(self, state: Any, runtime: Any) -> dict[str, Any]:
        given = state_value(state, "llm_input_messages")  # from a pre-model hook
        messages = list(given or state_value(state, self.messages_key) or [])
        repair: list[Any] = []
        if validate_history(messages):
            repaired = repair_history(messages)
            if not given:  # the state's own history: store the repair
                repair = history_update(messages, repaired)
            messages = repaired
        if given or repair:  # the prompt sees what the model is sent
            state = _with_messages(state, self.messages_key, messages)
        model = self.model(state, runtime) if is_dynamic(self.model) else self.model
        if inspect.isawaitable(model):
            raise NotSupportedError("an async model-choosing function is not supported")
        response = model.invoke(self.prompt(state))
        if isinstance(response, AIMessage):
            response.name = self.name
            if self._out_of_steps(state, response):
                response = AIMessage(id=response.id, content=OUT_OF_STEPS)
        return {self.messages_key: [*repair, response]}

    def _out_of_steps(self, state: Any, response: AIMessage) -> bool:
        """LangGraph's rule: tools asked for when the run cannot take them and answer."""
        remaining = state_value(state, "remaining_steps")
        if remaining is None:
            return False
        calls = response.tool_calls
        all_direct = all(call["name"] in self.return_direct for call in calls)
        return (remaining < 1 and all_direct) or (remaining < 2 and bool(calls))


def _with_messages(state: Any, key: str, messages: list[Any]) -> Any:
    if isinstance(state, dict):
        return {**state, key: messages}
    copy = getattr(state, "model_copy", None)
    if callable(copy):
        return copy(update={key: messages})
    import dataclasses

    return dataclasses.replace(state, **{key: messages})
