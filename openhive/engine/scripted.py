"""The scripted provider: a litellm custom provider (`scripted/<script>`) whose replies come
from a YAML file of rules. The first rule whose `when` holds produces the reply. Used by tests,
benchmarks and the offline demo; never a silent fallback for a real provider."""

from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from openhive import paths


class ScriptError(Exception):
    pass


class When(BaseModel):
    model_config = ConfigDict(extra="forbid")

    team: str | None = None
    last: str | None = Field(default=None, pattern="^(user|tool|assistant)$")
    tool: str | None = None
    matches: str | None = None

    @field_validator("matches")
    @classmethod
    def _valid_regex(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"matches is not a valid regular expression: {exc}") from exc
        return value


class ScriptedToolCall(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class Usage(BaseModel):
    model_config = ConfigDict(extra="forbid")

    prompt_tokens: int = 0
    completion_tokens: int = 0


class Reply(BaseModel):
    model_config = ConfigDict(extra="forbid")

    content: str | None = None
    tool_calls: list[ScriptedToolCall] = Field(default_factory=list)
    delay_ms: int = Field(default=0, ge=0)
    usage: Usage | None = None


class Rule(BaseModel):
    model_config = ConfigDict(extra="forbid")

    when: When = Field(default_factory=When)
    reply: Reply


class Script(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rules: list[Rule]


@dataclass
class Conversation:
    """The facts a `when` clause can test, read from the request."""

    team: str | None
    last_role: str | None
    last_tool: str | None
    last_text: str
    messages: list[dict] = field(default_factory=list)


def resolve_script_path(name: str) -> Path:
    candidate = Path(name)
    options = (
        [candidate]
        if candidate.is_absolute()
        else [
            paths.scripts_dir() / name,
            paths.config_dir() / name,
            Path.cwd() / name,
        ]
    )
    for option in options:
        for path in (option, option.with_suffix(".yaml")):
            if path.is_file():
                return path
    raise ScriptError(
        f"scripted provider: script {name!r} not found (looked in {options[0].parent})"
    )


_cache: dict[tuple[Path, int], Script] = {}
_cache_lock = threading.Lock()


def load_script(name: str) -> Script:
    path = resolve_script_path(name)
    key = (path, path.stat().st_mtime_ns)
    with _cache_lock:
        if key not in _cache:
            try:
                _cache[key] = Script.model_validate(yaml.safe_load(path.read_text()) or {})
            except Exception as exc:
                raise ScriptError(f"scripted provider: {path} is invalid: {_short(exc)}") from exc
        return _cache[key]


def _short(exc: Exception) -> str:
    """One line: which rule and field is wrong, or where the YAML breaks."""
    if isinstance(exc, ValidationError):
        return "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'script'}: {e['msg']}" for e in exc.errors()
        )
    return " ".join(str(exc).split())


def read_conversation(messages: list[dict], team: str | None) -> Conversation:
    turns = [m for m in messages if m.get("role") != "system"]
    last = turns[-1] if turns else {}
    role = last.get("role")
    tool_name = last.get("name") if role == "tool" else None
    if role == "tool" and not tool_name:
        tool_name = _tool_name_for_call(turns, last.get("tool_call_id"))
    return Conversation(team, role, tool_name, _text(last.get("content")), turns)


def _tool_name_for_call(turns: list[dict], call_id: str | None) -> str | None:
    for message in reversed(turns):
        for call in message.get("tool_calls") or []:
            if call.get("id") == call_id:
                return call.get("function", {}).get("name")
    return None


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return "" if content is None else str(content)


def rule_matches(when: When, conv: Conversation) -> bool:
    if when.team is not None and when.team != conv.team:
        return False
    if when.last is not None and when.last != conv.last_role:
        return False
    if when.tool is not None and when.tool != conv.last_tool:
        return False
    return when.matches is None or re.search(when.matches, conv.last_text) is not None


def choose_reply(script: Script, conv: Conversation) -> Reply:
    for rule in script.rules:
        if rule_matches(rule.when, conv):
            return rule.reply
    raise ScriptError(
        f"scripted provider: no rule matched (team={conv.team}, last={conv.last_role}, "
        f"tool={conv.last_tool}, text={conv.last_text[:80]!r})"
    )


def reply_payload(reply: Reply, turn: int) -> dict:
    """The reply in OpenAI chat-completion form."""
    tool_calls = [
        {
            "id": f"call_{turn}_{i}",
            "type": "function",
            "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
        }
        for i, call in enumerate(reply.tool_calls)
    ]
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    usage = reply.usage or Usage()
    return {
        "message": message,
        "finish_reason": "tool_calls" if tool_calls else "stop",
        "usage": {
            "prompt_tokens": usage.prompt_tokens,
            "completion_tokens": usage.completion_tokens,
            "total_tokens": usage.prompt_tokens + usage.completion_tokens,
        },
    }


def scripted_reply(script_name: str, messages: list[dict], team: str | None) -> dict:
    script = load_script(script_name)
    conv = read_conversation(messages, team)
    try:
        reply = choose_reply(script, conv)
    except ScriptError as exc:
        # Say which script to edit: the operator may have several.
        raise ScriptError(f"{exc} in script {resolve_script_path(script_name)}") from None
    if reply.delay_ms:
        time.sleep(reply.delay_ms / 1000)
    turn = sum(1 for m in conv.messages if m.get("role") == "assistant")
    return reply_payload(reply, turn)


def make_handler():
    """The litellm CustomLLM instance; built lazily because litellm is imported lazily."""
    from litellm import CustomLLM, ModelResponse

    class ScriptedLLM(CustomLLM):
        def completion(self, model, messages, *args, **kwargs):  # type: ignore[override]
            litellm_params = kwargs.get("litellm_params") or {}
            team = (litellm_params.get("metadata") or {}).get("openhive_team")
            payload = scripted_reply(model, messages, team)
            return ModelResponse(
                choices=[
                    {"message": payload["message"], "finish_reason": payload["finish_reason"]}
                ],
                usage=payload["usage"],
                model=f"scripted/{model}",
            )

        async def acompletion(self, model, messages, *args, **kwargs):  # type: ignore[override]
            import asyncio

            return await asyncio.to_thread(self.completion, model, messages, *args, **kwargs)

    return ScriptedLLM()
