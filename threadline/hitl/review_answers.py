"""Reading a person's answer to a review request, in any of the shapes UIs send.

The canonical answer is ``{"decisions": [{"type": ..., "args": ..., "message": ...}, ...]}``,
one decision per action, in order, ``type`` one of ``accept``, ``edit``, ``respond``,
``reject``. Also understood, so existing UIs work unchanged:

- LangChain's HumanInTheLoopMiddleware: ``approve`` (= accept), ``edit`` with
  ``edited_action: {"name", "args"}``, ``reject``/``respond`` with ``message``;
- Agent Inbox's ``HumanResponse`` list: ``accept``, ``edit`` with ``args: {"action", "args"}``,
  ``response`` (= respond) with the text in ``args``, ``ignore`` (= reject);
- a bare list of decisions, or one decision alone when one action waits.

Everything here is pure: the request (the interrupt's value) says what each action allows.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

from threadline.hitl.inbox import canonical_request
from threadline.hitl.validation import Problem, problems, raise_problems

DecisionType = Literal["accept", "edit", "respond", "reject"]
DECISION_TYPES: tuple[DecisionType, ...] = ("accept", "edit", "respond", "reject")
ALIASES = {"approve": "accept", "response": "respond", "ignore": "reject"}
# Marks an interrupt's answer schema as a review's: its answer is read by ``review_answer``.
REVIEW_MARK = "x-threadline-review"

Json = dict[str, Any]
Read = tuple[Json, list[Problem]]  # a canonical decision, or what is wrong with it


def review_answer(request: dict[str, Any], answer: Any, interrupt_id: str) -> dict[str, Any]:
    """The canonical form of ``answer`` to ``request``; ``InvalidAnswerError`` naming every
    problem (``decisions[1].args.amount: ...``) when it is not a valid answer."""
    request = canonical_request(request)  # asked in Agent Inbox's shape, perhaps
    actions = request["action_requests"]
    configs = request["review_configs"]
    raw, found = _decision_list(answer, len(actions))
    decisions: list[dict[str, Any]] = []
    for index, (item, action, config) in enumerate(zip(raw, actions, configs, strict=False)):
        decision, wrong = _decision(item, action, config, f"decisions[{index}]")
        decisions.append(decision)
        found.extend(wrong)
    raise_problems(interrupt_id, found, "review answer")
    return {"decisions": decisions}


def _decision_list(answer: Any, expected: int) -> tuple[list[Any], list[Problem]]:
    if isinstance(answer, dict) and "decisions" in answer:
        extra = sorted(set(answer) - {"decisions"})
        if extra:
            return [], [("", f"unexpected keys {extra} next to 'decisions'")]
        answer = answer["decisions"]
    elif _is_decision(answer):
        answer = [answer]
    if not isinstance(answer, list | tuple):
        return [], [("", f"expected {{'decisions': [...]}} or a list of decisions, got {answer!r}")]
    if len(answer) != expected:
        return [], [
            (
                "decisions",
                f"expected {expected} decision(s), one per action in order, got {len(answer)}",
            )
        ]
    return list(answer), []


def _is_decision(value: Any) -> bool:
    return (isinstance(value, dict) and "type" in value) or (
        dataclasses.is_dataclass(value) and hasattr(value, "type")
    )


def _decision(item: Any, action: Json, config: Json, path: str) -> Read:
    if dataclasses.is_dataclass(item) and not isinstance(item, type):
        item = {k: v for k, v in dataclasses.asdict(item).items() if v is not None}
    if not isinstance(item, dict) or not isinstance(item.get("type"), str):
        return {}, [(path, f"expected a decision like {{'type': 'accept'}}, got {item!r}")]
    kind = ALIASES.get(item["type"], item["type"])
    allowed = config["allowed_decisions"]
    if kind not in DECISION_TYPES:
        return {}, [
            (f"{path}.type", f"unknown decision {item['type']!r} (known: {DECISION_TYPES})")
        ]
    if kind not in allowed:
        return {}, [
            (
                f"{path}.type",
                f"{kind!r} is not allowed for action {action['name']!r} (allowed: {allowed})",
            )
        ]
    extra = sorted(set(item) - _KEYS[kind])
    if extra:
        return {}, [
            (path, f"a {kind!r} decision takes no {extra} (it takes {sorted(_KEYS[kind])})")
        ]
    return _READERS[kind](item, action, config, path)


def _accept(item: Json, action: Json, config: Json, path: str) -> Read:
    sent = item.get("args")
    if sent is not None and _unwrap(sent, action) != action["args"]:
        return {}, [(f"{path}.args", "an accept cannot change the arguments; send an 'edit'")]
    return {"type": "accept"}, []


def _edit(item: Json, action: Json, config: Json, path: str) -> Read:
    if "edited_action" in item and "args" in item:
        return {}, [(path, "give the edited arguments once: 'args' or 'edited_action'")]
    if "edited_action" in item:  # LangChain: {"name", "args"}
        edited = item["edited_action"]
        if not isinstance(edited, dict) or set(edited) - {"name", "args"}:
            return {}, [(f"{path}.edited_action", "expected {'name': ..., 'args': {...}}")]
        if edited.get("name", action["name"]) != action["name"]:
            return {}, [
                (
                    f"{path}.edited_action.name",
                    f"an edit changes arguments, not the action: keep {action['name']!r}",
                )
            ]
        args = edited.get("args")
    else:
        args = _unwrap(item.get("args"), action)
    where = f"{path}.args"
    if not isinstance(args, dict):
        return {}, [(where, f"an edit needs the edited arguments as a dict, got {args!r}")]
    schema = config.get("args_schema")
    found = [] if schema is None else problems(schema, args)
    return {"type": "edit", "args": args}, [(_join(where, p), m) for p, m in found]


def _respond(item: Json, action: Json, config: Json, path: str) -> Read:
    message = item.get("message", item.get("args"))
    if not isinstance(message, str):
        return {}, [(f"{path}.message", f"a respond decision needs the text, got {message!r}")]
    return {"type": "respond", "message": message}, []


def _reject(item: Json, action: Json, config: Json, path: str) -> Read:
    message = item.get("message", item.get("args"))
    if message is None:
        return {"type": "reject"}, []
    if not isinstance(message, str):
        return {}, [(f"{path}.message", f"a reject message must be text, got {message!r}")]
    return {"type": "reject", "message": message}, []


def _unwrap(args: Any, action: dict[str, Any]) -> Any:
    """Agent Inbox sends arguments wrapped as ``{"action": name, "args": {...}}``."""
    wrapped = isinstance(args, dict) and set(args) == {"action", "args"}
    if wrapped and args["action"] == action["name"] and isinstance(args["args"], dict):
        return args["args"]
    return args


def _join(path: str, sub: str) -> str:
    return f"{path}.{sub}" if sub else path


_KEYS = {
    "accept": {"type", "args"},
    "edit": {"type", "args", "edited_action"},
    "respond": {"type", "message", "args"},
    "reject": {"type", "message", "args"},
}
_READERS = {"accept": _accept, "edit": _edit, "respond": _respond, "reject": _reject}
