"""A session that waits for a person: a tool asks for it (`ctx.request_pause`, e.g. `ask_user`)
or the team's `require_approval` gate stops a call before it runs. The loop turns either into
stop reason `waiting`; the caller (a task) keeps the pause and resumes it in a new session
with `SessionRequest.resume`. Only a task's own session can wait (`SessionRequest.pausable`):
elsewhere a gated call is refused and the pausing tools are not offered."""

from __future__ import annotations

import json

from openhive.core.registry import is_allowed

from .spec import AgentSpec, SessionRequest


class Paused(Exception):
    """Raised inside a tool call that waits for a person; the loop adds the conversation."""

    def __init__(self, details: dict, text: str) -> None:
        super().__init__(text)
        self.details = details
        self.text = text


def approval_gate(agent: AgentSpec, request: SessionRequest, name: str, call: dict) -> dict | None:
    """None: the call may run. A tool message: refused (a session that cannot wait). Raises
    `Paused` when the call must wait for an operator's approval."""
    patterns = agent.require_approval
    resume = request.resume
    if not patterns or not is_allowed(name, patterns):
        return None
    if resume is not None and call.get("id") in resume.approved:
        return None
    if not request.pausable:
        result = {
            "success": False,
            "code": "APPROVAL_REQUIRED",
            "error": f"tool \"{name}\" needs an operator's approval, which only a task's own "
            "session can wait for; do the rest of the work and say in your answer that this "
            "call needs approval",
        }
        return tool_message(call, name, result)
    arguments = call["function"].get("arguments") or "{}"
    raise Paused(
        {"kind": "approval", "tool": name, "arguments": arguments},
        f"[Waiting for an operator to approve {name}.]",
    )


def tool_requested_pause(details: dict) -> Paused:
    return Paused(details, f"[Waiting for a person: {details.get('kind')}.]")


def pause_state(paused: Paused, messages: list[dict], calls: list[dict], index: int) -> dict:
    """What a resume needs: the conversation so far (no system prompt: the resumed session
    builds its own), the call that waits, and the calls of the same reply after it."""
    return {
        **paused.details,
        "messages": [m for m in messages if m.get("role") != "system"],
        "call": calls[index],
        "calls": calls[index + 1 :],
    }


def tool_message(call: dict, name: str, result: dict) -> dict:
    return {
        "role": "tool",
        "tool_call_id": call["id"],
        "name": name,
        "content": json.dumps(result, default=str),
    }
