"""The scripted provider: a litellm custom provider (`scripted/<script>`) whose replies come
from a YAML file of rules. The first rule whose `when` holds produces the reply. Used by tests,
benchmarks and the offline demo; never a silent fallback for a real provider."""

from __future__ import annotations

import contextvars
import json
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator

from openhive.core import paths, saferegex

# How much of the last message a rule's `matches` reads (tool results can be long).
SCRIPT_MATCH_CHARS = 1_000_000

# The team whose session is calling, for rules that say `team:`. Passed beside litellm, not
# through its `metadata`: litellm copies and logs metadata on every call (0.1 ms a call), for
# every provider, and only this one reads it. A context variable follows the call onto the
# thread litellm's async door hands it to.
_calling_team: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "scripted_team", default=None
)


class calling_team:  # used as a function: `with calling_team(team):`
    """Around a model call (and the reading of its stream): the team a script sees. A class,
    not a generator: it runs around every model call."""

    __slots__ = ("team", "token")

    def __init__(self, team: str) -> None:
        self.team = team

    def __enter__(self) -> None:
        self.token = _calling_team.set(self.team)

    def __exit__(self, *_exc: object) -> None:
        _calling_team.reset(self.token)


class ScriptError(Exception):
    pass


class ScriptedFailure(Exception):
    """A provider error the script asked for (`reply: {error: {status: 429, ...}}`): the model
    port treats it exactly like the same HTTP error from a real provider."""

    def __init__(self, status: int, message: str, retry_after: float | None = None) -> None:
        super().__init__(f"scripted provider error {status}: {message}")
        self.status_code = status
        self.retry_after = retry_after


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
                saferegex.check_pattern(value)
            except saferegex.UnsafePattern as exc:
                raise ValueError(f"matches {exc}") from exc
        return value


class ScriptedToolCall(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class Usage(BaseModel):
    model_config = ConfigDict(extra="forbid")

    prompt_tokens: int = Field(default=0, ge=0)
    completion_tokens: int = Field(default=0, ge=0)
    # What the call is said to have cost (the scripted provider has no price of its own).
    cost_usd: float = Field(default=0, ge=0)


class ScriptedErrorSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    status: int = Field(ge=400, le=599)
    message: str = "scripted error"
    retry_after: float | None = Field(default=None, ge=0)


class Reply(BaseModel):
    model_config = ConfigDict(extra="forbid")

    content: str | None = None
    tool_calls: list[ScriptedToolCall] = Field(default_factory=list)
    delay_ms: int = Field(default=0, ge=0)
    usage: Usage | None = None
    # Fail the call as a provider would (429 with Retry-After, 500, 503...), after delay_ms.
    error: ScriptedErrorSpec | None = None


class Rule(BaseModel):
    model_config = ConfigDict(extra="forbid")

    when: When = Field(default_factory=When)
    reply: Reply
    # Answer at most this many calls (counted per version of the script file, in this
    # process), then let later rules answer: "a 429, then a success".
    times: int | None = Field(default=None, ge=1)


class Script(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rules: list[Rule]
    # How often each limited rule has answered. Kept on the script itself: a count kept by
    # `id(script)` outlived a dropped script and was inherited by the next one given its id.
    _uses: dict[int, int] = PrivateAttr(default_factory=dict)


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
    # RE2: a script's pattern runs in linear time over the (possibly long) last message.
    return when.matches is None or saferegex.search(
        when.matches, conv.last_text, max_input=SCRIPT_MATCH_CHARS
    )


def forget_uses() -> None:
    """Every loaded script's limited rules answer afresh (a benchmark's next round)."""
    with _cache_lock:
        for script in _cache.values():
            script._uses.clear()


def choose_reply(script: Script, conv: Conversation) -> Reply:
    for index, rule in enumerate(script.rules):
        if not rule_matches(rule.when, conv):
            continue
        if rule.times is not None:
            with _cache_lock:
                if script._uses.get(index, 0) >= rule.times:
                    continue
                script._uses[index] = script._uses.get(index, 0) + 1
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
        "cost_usd": usage.cost_usd,
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
    if reply.error is not None:
        raise ScriptedFailure(reply.error.status, reply.error.message, reply.error.retry_after)
    turn = sum(1 for m in conv.messages if m.get("role") == "assistant")
    return reply_payload(reply, turn)


# What each scripted response cost, by response id, until the model port reads it: litellm
# keeps no field of ours on the response it hands back.
_costs: dict[str, float] = {}


def take_cost(response_id: str) -> float:
    with _cache_lock:
        return _costs.pop(response_id, 0.0)


def _remember_cost(response_id: str, cost: float) -> None:
    if cost:
        with _cache_lock:
            _costs[response_id] = cost


def stream_chunks(payload: dict) -> list[dict]:
    """The reply as a provider streams it: the text a few words at a time, then each tool
    call, then the end with the usage."""
    message = payload["message"]
    chunks: list[dict] = []
    words = re.findall(r"\S+\s*", message.get("content") or "")
    for start in range(0, len(words), 3):
        chunks.append(_chunk(text="".join(words[start : start + 3])))
    for index, call in enumerate(message.get("tool_calls") or []):
        chunks.append(_chunk(tool_use={**call, "index": index}, index=0))
    usage = payload["usage"]
    chunks.append(_chunk(finished=payload["finish_reason"], usage=usage))
    return chunks


def _chunk(
    *,
    text: str = "",
    tool_use: dict | None = None,
    finished: str = "",
    usage: dict | None = None,
    index: int = 0,
) -> dict:
    return {
        "text": text,
        "tool_use": tool_use,
        "is_finished": bool(finished),
        "finish_reason": finished,
        "usage": usage,
        "index": index,
    }


def make_handler():
    """The litellm CustomLLM instance; built lazily because litellm is imported lazily."""
    from litellm import CustomLLM, ModelResponse

    class ScriptedLLM(CustomLLM):
        def completion(self, model, messages, *args, **kwargs):  # type: ignore[override]
            payload = scripted_reply(model, messages, _calling_team.get())
            response = ModelResponse(
                choices=[
                    {"message": payload["message"], "finish_reason": payload["finish_reason"]}
                ],
                usage=payload["usage"],
                model=f"scripted/{model}",
            )
            _remember_cost(response.id, payload["cost_usd"])
            return response

        def streaming(self, model, messages, *args, **kwargs):  # type: ignore[override]
            payload = scripted_reply(model, messages, _calling_team.get())
            chunks = stream_chunks(payload)
            if payload["cost_usd"]:
                chunks[-1]["provider_specific_fields"] = {"cost_usd": payload["cost_usd"]}
            yield from chunks

        async def acompletion(self, model, messages, *args, **kwargs):  # type: ignore[override]
            import asyncio

            return await asyncio.to_thread(self.completion, model, messages, *args, **kwargs)

    return ScriptedLLM()
