"""The one door to a model: litellm, imported lazily (its import takes seconds) and told never
to fetch its cost map from the internet."""

from __future__ import annotations

import functools
import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from email.utils import parsedate_to_datetime
from types import ModuleType
from typing import Any

from openhive.core.heap import loading_long_lived
from openhive.engine import slim
from openhive.engine.providers import ProviderProfile
from openhive.engine.scripted import calling_team

_lock = threading.Lock()
_module: ModuleType | None = None


def get_litellm() -> ModuleType:
    global _module
    if _module is None:
        with _lock:
            if _module is None:
                os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
                os.environ.setdefault("LITELLM_LOG", "ERROR")
                # Its objects (most of the ~390,000 a process then holds) live as long as
                # the process: no collection walks them while they load, nor after.
                with loading_long_lived():
                    litellm = _import_litellm()
                _module = litellm
    return _module


def _import_litellm() -> ModuleType:
    with slim.deferred_tokenizer_json(), slim.without_httpx_cli():
        import litellm

    from openhive.engine.scripted import make_handler

    litellm.suppress_debug_info = True
    litellm.telemetry = False
    litellm.custom_provider_map = [{"provider": "scripted", "custom_handler": make_handler()}]
    _skip_idle_success_logging(litellm)
    slim.defer_claude_tokenizer(litellm)
    slim.defer_call_encoding(litellm)
    slim.skip_file_id_rewrite(litellm)
    return litellm


_priced: set[str] = set()


def price_scripted_model(model: str) -> None:
    """Tell litellm a scripted model costs nothing. Unpriced, every call sends litellm's
    pricing into an exception whose traceback it formats, reading the source files of the
    stack into memory (~2 MB per process) and spending time on each call. Our own cost of a
    scripted reply is the script's (`_cost`)."""
    if model in _priced:
        return
    get_litellm().register_model(
        {
            model: {
                "input_cost_per_token": 0.0,
                "output_cost_per_token": 0.0,
                # Every price given, or litellm warns that the cache prices default to 0.
                "cache_creation_input_token_cost": 0.0,
                "cache_read_input_token_cost": 0.0,
                "litellm_provider": "scripted",
                "mode": "chat",
            }
        }
    )
    _priced.add(model)


def _skip_idle_success_logging(litellm: ModuleType) -> None:
    """litellm hands every finished call to its success-logging handler on a background
    thread, even when no callback is configured to hear of it; that handler's work (cost maps,
    payload building) then competes with the session for the GIL. A streamed call does more:
    every chunk is handed to a logging job that runs a new asyncio loop for it, and the
    stream's end hands over the whole reply again. With no callback (and no cache) configured
    none of it is handed over; once an operator configures one, it is, as before."""
    from concurrent.futures import Future

    from litellm.litellm_core_utils import thread_pool_executor

    def listened() -> bool:
        return getattr(litellm, "cache", None) is not None or any(
            getattr(litellm, name, None)
            for name in (
                "callbacks",
                "success_callback",
                "_async_success_callback",
                "input_callback",
                "service_callback",
            )
        )

    # The one executor every litellm module submits its logging to (each holds a reference
    # of its own): its `submit` is gated, not one module's name for it.
    pool = thread_pool_executor.executor
    submit = pool.submit

    def gated(fn, /, *args, **kwargs):
        # A call's handler comes wrapped in its context's `run`; a stream's, as it is.
        target = args[0] if args and getattr(fn, "__name__", "") == "run" else fn
        if getattr(target, "__name__", "") in _LOGGING_JOBS and not listened():
            done: Future = Future()
            done.set_result(None)
            return done
        return submit(fn, *args, **kwargs)

    pool.submit = gated


# What litellm hands its logging executor: a finished call (`success_handler`, also at a
# stream's end) and each chunk of a stream (`run_success_logging_and_cache_storage`, which,
# despite its name, only logs: a stream is cached by its end, apart).
_LOGGING_JOBS = frozenset({"success_handler", "run_success_logging_and_cache_storage"})


@dataclass
class Completion:
    message: dict[str, Any]
    finish_reason: str
    prompt_tokens: int
    completion_tokens: int
    cost_usd: Decimal
    latency_ms: int
    # The profile that answered, and every attempt the model port made (retries, fallbacks).
    profile: str = ""
    attempts: list[dict] = field(default_factory=list)


RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 529})


class ProviderError(Exception):
    """A model call that failed, classified once: its HTTP status if any, whether trying
    again may help, and how long the provider asked us to wait (Retry-After)."""

    def __init__(
        self,
        message: str,
        *,
        kind: str,
        status: int | None = None,
        retry_after: float | None = None,
        retryable: bool = False,
    ) -> None:
        super().__init__(message)
        self.kind, self.status, self.retry_after, self.retryable = (
            kind,
            status,
            retry_after,
            retryable,
        )


class ProviderUnavailable(ProviderError):
    """Every attempt on every profile failed: the provider (and its fallbacks) are down."""

    def __init__(self, message: str, attempts: list[dict], **kw: Any) -> None:
        super().__init__(message, **kw)
        self.attempts = attempts


PLAIN_REASONS = {
    "auth": 'The model provider refused the credentials of profile "{profile}". An operator '
    "should check its API key.",
    "rate_limit": "The model provider is limiting requests right now. Please try again in a "
    "minute.",
    "timeout": "The model provider did not answer in time. Please try again shortly.",
    "server": "The model provider had an internal error. Please try again shortly.",
    "connection": "The model provider could not be reached. An operator should check the "
    'network and the address of profile "{profile}".',
    "bad_request": "The model provider rejected the request. An operator can see why in the "
    "admin (Sessions).",
}


def plain_reason(exc: ProviderError, profile: str) -> str:
    """A failed model call as a sentence for a person chatting: no exception names, no
    "Handle with `litellm…`" advice (that stays in the session's record for operators)."""
    template = PLAIN_REASONS.get(
        exc.kind, "The model call failed. An operator can see why in the admin (Sessions)."
    )
    return template.format(profile=profile)


DeltaSink = Callable[[str], None]


def complete(
    profile: ProviderProfile,
    messages: list[dict],
    tools: list[dict],
    *,
    team: str,
    timeout: float | None = None,
    on_delta: DeltaSink | None = None,
) -> Completion:
    """One attempt, no retries (the model port retries): raises `ProviderError`, or
    `ScriptError` for a broken script."""
    litellm = get_litellm()
    if profile.is_scripted:
        price_scripted_model(profile.model)
    kwargs = profile.completion_kwargs()
    if tools:
        kwargs["tools"] = tools
        # Our tools are plain functions, never litellm-proxy MCP servers; without this flag
        # litellm imports its MCP handler (the MCP SDK, starlette, uvicorn: ~65 MB per worker)
        # on the first call with tools, only to find none.
        kwargs["_skip_mcp_handler"] = True
    if timeout is not None:
        kwargs.setdefault("timeout", timeout)
    # Our model port retries, with backoff and the attempts recorded: the SDK must not.
    kwargs.setdefault("max_retries", 0)
    started = time.monotonic()
    try:
        with calling_team(team):
            if on_delta is None:
                response = litellm.completion(messages=messages, **kwargs)
            else:
                response = _streamed(litellm, messages, kwargs, on_delta)
    except Exception as exc:
        # litellm wraps a script's own error in a connection error with a trace and a bug-report
        # link; the script's message is what the operator needs.
        script_error = _script_error(exc)
        if script_error is not None:
            raise script_error from None
        raise classify(exc) from exc
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
        profile=profile.name,
    )


def _streamed(litellm: ModuleType, messages: list[dict], kwargs: dict, on_delta: DeltaSink) -> Any:
    """Stream the reply, handing each piece of text to `on_delta`, then assemble it."""
    stream = litellm.completion(
        messages=messages,
        stream=True,
        stream_options={"include_usage": True},
        **kwargs,
    )
    chunks = []
    for chunk in stream:
        chunks.append(chunk)
        for choice in getattr(chunk, "choices", None) or []:
            text = getattr(choice.delta, "content", None)
            if text:
                on_delta(text)
        # The usage chunk comes once the provider's stream has ended: reading on would only
        # make litellm build, copy and log the whole reply a second time (~1 ms a call).
        if getattr(stream, "sent_stream_usage", False):
            break
    return litellm.stream_chunk_builder(chunks, messages=messages)


def classify(exc: BaseException) -> ProviderError:
    """Any failure of a call as a `ProviderError` (a scripted one included)."""
    if isinstance(exc, ProviderError):
        return exc
    from openhive.engine.scripted import ScriptedFailure

    failure = _in_chain(exc, ScriptedFailure)
    if failure is not None:
        status = failure.status_code
        return ProviderError(
            str(failure),
            kind=_kind(status),
            status=status,
            retry_after=failure.retry_after,
            retryable=status in RETRYABLE_STATUS,
        )
    status = getattr(exc, "status_code", None)
    status = status if isinstance(status, int) else None
    name = type(exc).__name__
    first_line = (str(exc).strip().splitlines() or [""])[0][:500]
    timed_out = "Timeout" in name or isinstance(exc, TimeoutError)
    connection = "APIConnectionError" in name or isinstance(exc, ConnectionError)
    if timed_out:
        kind, retryable = "timeout", True
    elif status is not None:
        kind, retryable = _kind(status), status in RETRYABLE_STATUS
    elif connection:
        kind, retryable = "connection", True
    else:
        kind, retryable = "other", False
    return ProviderError(
        f"{name}: {first_line}",
        kind=kind,
        status=status if not timed_out else (status or 408),
        retry_after=_retry_after(exc),
        retryable=retryable,
    )


def _kind(status: int) -> str:
    if status == 429:
        return "rate_limit"
    if status in (408, 504):
        return "timeout"
    if status >= 500:
        return "server"
    if status in (401, 403):
        return "auth"
    return "bad_request"


def _retry_after(exc: BaseException) -> float | None:
    """Seconds from a Retry-After header (seconds or an HTTP date), if the error carries one."""
    headers: Any = getattr(exc, "litellm_response_headers", None)
    response = getattr(exc, "response", None)
    if not headers and response is not None:
        headers = getattr(response, "headers", None)
    if not headers:
        return None
    try:
        value = headers.get("retry-after") or headers.get("Retry-After")
    except AttributeError:
        return None
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        moment = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, moment.timestamp() - time.time())


def _in_chain(exc: BaseException, kind: type[BaseException]) -> Any:
    seen: set[int] = set()
    node: BaseException | None = exc
    while node is not None and id(node) not in seen:
        if isinstance(node, kind):
            return node
        seen.add(id(node))
        node = node.__cause__ or node.__context__
    return None


def _script_error(exc: BaseException) -> BaseException | None:
    from openhive.engine.scripted import ScriptError

    return _in_chain(exc, ScriptError)


def _cost(litellm: ModuleType, response: Any, profile: ProviderProfile) -> Decimal:
    if profile.is_scripted:
        from openhive.engine.scripted import take_cost

        cost = take_cost(str(getattr(response, "id", "")))
        extra = getattr(response.choices[0].message, "provider_specific_fields", None) or {}
        return Decimal(str(cost or extra.get("cost_usd") or 0))
    # litellm already priced the response while building it; pricing it again cost a step
    # a second pass over the model map.
    hidden = getattr(response, "_hidden_params", None) or {}
    known = hidden.get("response_cost") if hasattr(hidden, "get") else None
    if known is not None:
        return Decimal(str(known))
    try:
        return Decimal(str(litellm.completion_cost(completion_response=response) or 0))
    except Exception:  # unknown models have no price; tokens are still counted
        return Decimal(0)


@functools.lru_cache(maxsize=64)
def _tokenizer(model: str) -> dict:
    # litellm picks the model's tokenizer anew on every encode (~0.3 ms); it never changes.
    tokenizer = get_litellm().utils.select_tokenizer(model=model)
    slim.slim_encodings()  # the one it may just have loaded
    return tokenizer


def count_message_tokens(profile: ProviderProfile, message: dict) -> int:
    """Tokens of one message by litellm's tokenizer for the model (`litellm.encode`) and the
    counting rule of its token counter (3 per message, plus every text field and tool call),
    without the counter's per-call overhead: a session counts each message once."""
    litellm = get_litellm()
    try:
        tokenizer = _tokenizer(profile.model)

        def encode(text: str) -> list:
            return litellm.encode(text=text, custom_tokenizer=tokenizer)

        total = 3
        for key, value in message.items():
            if key == "tool_calls":
                for call in value or []:
                    function = call.get("function") or {}
                    for text in (function.get("name"), function.get("arguments")):
                        if text:
                            total += len(encode(str(text)))
            elif isinstance(value, str):
                total += len(encode(value))
                if key == "name":
                    total += 1
            elif isinstance(value, list):
                for part in value:
                    if isinstance(part, dict) and isinstance(part.get("text"), str):
                        total += len(encode(part["text"]))
        return total
    except Exception:  # an odd shape or tokenizer: the counter itself
        return count_tokens(profile, [message], []) - 3


def count_tokens(profile: ProviderProfile, messages: list[dict], tools: list[dict]) -> int:
    """Tokens of a request, by litellm's counter for the profile's model (its default
    tokenizer for models it does not know, the scripted ones included)."""
    litellm = get_litellm()
    try:
        count = litellm.token_counter(model=profile.model, messages=messages, tools=tools or None)
        slim.slim_encodings()
        return int(count)
    except Exception:  # an odd message shape: a rough count beats none
        return sum(len(json.dumps(m, default=str)) for m in messages) // 4
