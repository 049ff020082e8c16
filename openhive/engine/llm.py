"""The one door to a model: litellm, imported lazily (its import takes seconds) and told never
to fetch its cost map from the internet."""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from decimal import Decimal
from types import ModuleType
from typing import Any

from openhive.engine.providers import ProviderProfile

_lock = threading.Lock()
_module: ModuleType | None = None


def get_litellm() -> ModuleType:
    global _module
    if _module is None:
        with _lock:
            if _module is None:
                os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
                os.environ.setdefault("LITELLM_LOG", "ERROR")
                import litellm

                from openhive.engine.scripted import make_handler

                litellm.suppress_debug_info = True
                litellm.telemetry = False
                litellm.custom_provider_map = [
                    {"provider": "scripted", "custom_handler": make_handler()}
                ]
                _module = litellm
    return _module


@dataclass
class Completion:
    message: dict[str, Any]
    finish_reason: str
    prompt_tokens: int
    completion_tokens: int
    cost_usd: Decimal
    latency_ms: int


def complete(
    profile: ProviderProfile,
    messages: list[dict],
    tools: list[dict],
    *,
    team: str,
    timeout: float | None = None,
) -> Completion:
    litellm = get_litellm()
    kwargs = profile.completion_kwargs()
    if tools:
        kwargs["tools"] = tools
    if timeout is not None:
        kwargs.setdefault("timeout", timeout)
    started = time.monotonic()
    try:
        response = litellm.completion(messages=messages, metadata={"openhive_team": team}, **kwargs)
    except Exception as exc:
        # litellm wraps a script's own error in a connection error with a trace and a bug-report
        # link; the script's message is what the operator needs.
        script_error = _script_error(exc)
        if script_error is not None:
            raise script_error from None
        raise
    latency_ms = int((time.monotonic() - started) * 1000)
    choice = response.choices[0]
    message = choice.message.model_dump(exclude_none=True)
    message.setdefault("content", None)
    message = {k: v for k, v in message.items() if k in ("role", "content", "tool_calls")}
    usage = getattr(response, "usage", None)
    return Completion(
        message=message,
        finish_reason=str(choice.finish_reason or ""),
        prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
        completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
        cost_usd=_cost(litellm, response, profile),
        latency_ms=latency_ms,
    )


def _script_error(exc: BaseException) -> BaseException | None:
    from openhive.engine.scripted import ScriptError

    seen: set[int] = set()
    node: BaseException | None = exc
    while node is not None and id(node) not in seen:
        if isinstance(node, ScriptError):
            return node
        seen.add(id(node))
        node = node.__cause__ or node.__context__
    return None


def _cost(litellm: ModuleType, response: Any, profile: ProviderProfile) -> Decimal:
    if profile.is_scripted:
        return Decimal(0)
    try:
        return Decimal(str(litellm.completion_cost(completion_response=response) or 0))
    except Exception:  # unknown models have no price; tokens are still counted
        return Decimal(0)
