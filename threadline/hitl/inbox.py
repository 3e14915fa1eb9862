"""Review requests in Agent Inbox's shape, so that UI can list and answer threadline's reviews.

Agent Inbox shows an interrupt whose value is a list of ``HumanInterrupt``:
``{"action_request": {"action": name, "args": {...}}, "config": {"allow_accept",
"allow_edit", "allow_respond", "allow_ignore"}, "description": ...}``. Its answers (``accept``,
``edit``, ``response``, ``ignore``) are read by ``review_answers`` like any other shape.
"""

from __future__ import annotations

from typing import Any

# Agent Inbox's switch for each of threadline's decisions
ALLOW = {
    "accept": "allow_accept",
    "edit": "allow_edit",
    "respond": "allow_respond",
    "reject": "allow_ignore",
}


def inbox_request(request: dict[str, Any]) -> list[dict[str, Any]]:
    """A canonical review request (``action_requests``/``review_configs``) as Agent Inbox's
    list of ``HumanInterrupt``; an action's ``args_schema`` rides along in its ``config``."""
    shown = []
    for action, config in zip(request["action_requests"], request["review_configs"], strict=True):
        allowed = set(config["allowed_decisions"])
        switches: dict[str, Any] = {flag: kind in allowed for kind, flag in ALLOW.items()}
        if "args_schema" in config:
            switches["args_schema"] = config["args_schema"]
        shown.append(
            {
                "action_request": {"action": action["name"], "args": action["args"]},
                "config": switches,
                "description": action.get("description"),
            }
        )
    return shown


def canonical_request(value: Any) -> dict[str, Any]:
    """The canonical request an interrupt's value holds, in either shape."""
    if not isinstance(value, list):
        return dict(value)
    actions, configs = [], []
    for item in value:
        request, switches = item["action_request"], item["config"]
        action = {"name": request["action"], "args": request["args"]}
        if item.get("description") is not None:
            action["description"] = item["description"]
        config: dict[str, Any] = {
            "action_name": request["action"],
            "allowed_decisions": [kind for kind, flag in ALLOW.items() if switches.get(flag)],
        }
        if "args_schema" in switches:
            config["args_schema"] = switches["args_schema"]
        actions.append(action)
        configs.append(config)
    return {"action_requests": actions, "review_configs": configs}
