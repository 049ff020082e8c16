"""The model port: how a session asks a model for its next message. Retries and fallbacks wrap
one call here (`ResilientModel`), replay substitutes recorded replies (`engine.replay`), and the
loop checks budgets before it calls, without the loop knowing which port it has."""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from typing import Protocol

from django.conf import settings

from openhive.core.errors import ProviderNotConfigured

from . import llm, tracing
from .providers import ProviderProfile, resolve_profile

logger = logging.getLogger(__name__)


class ModelPort(Protocol):
    def complete(
        self,
        profile: ProviderProfile,
        messages: list[dict],
        tools: list[dict],
        *,
        agent: str,
        timeout: float | None = None,
        on_delta: llm.DeltaSink | None = None,
    ) -> llm.Completion: ...


class LitellmModel:
    """One attempt on one profile, through litellm (the scripted provider included)."""

    def complete(
        self,
        profile: ProviderProfile,
        messages: list[dict],
        tools: list[dict],
        *,
        agent: str,
        timeout: float | None = None,
        on_delta: llm.DeltaSink | None = None,
    ) -> llm.Completion:
        return llm.complete(
            profile, messages, tools, team=agent, timeout=timeout, on_delta=on_delta
        )


def backoff_seconds(attempt: int, retry_after: float | None, *, rng: random.Random) -> float:
    """Exponential backoff with jitter (half fixed, half random, so retries of many sessions
    spread out), never shorter than what the provider asked for."""
    conf = settings.OPENHIVE
    ceiling = min(conf["LLM_BACKOFF_MAX_SECONDS"], conf["LLM_BACKOFF_SECONDS"] * 2 ** (attempt - 1))
    delay = ceiling / 2 + rng.random() * ceiling / 2
    return max(delay, retry_after or 0.0)


class ResilientModel:
    """Retries a failed call with backoff and jitter (rate limits, timeouts, server errors;
    Retry-After honoured), then tries the profile's `fallbacks` in order. Every attempt is
    returned on the completion (or on the `ProviderUnavailable` error) for the recorder."""

    def __init__(
        self,
        inner: ModelPort | None = None,
        *,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
    ) -> None:
        self.inner = inner or LitellmModel()
        self.sleep = sleep
        self.rng = rng or random.Random()

    def complete(
        self,
        profile: ProviderProfile,
        messages: list[dict],
        tools: list[dict],
        *,
        agent: str,
        timeout: float | None = None,
        on_delta: llm.DeltaSink | None = None,
    ) -> llm.Completion:
        attempts: list[dict] = []
        last: llm.ProviderError | None = None
        for candidate in self._profiles(profile, attempts):
            try:
                reply = self._with_retries(
                    candidate, messages, tools, agent, timeout, on_delta, attempts
                )
            except llm.ProviderError as exc:
                last = exc
                continue
            reply.attempts = attempts
            return reply
        assert last is not None or attempts
        hint = max((a.get("retry_after") or 0 for a in attempts), default=0) or None
        tried = ", ".join(dict.fromkeys(a["profile"] for a in attempts))
        summary = last or llm.ProviderError("no profile could be tried", kind="other")
        raise llm.ProviderUnavailable(
            f"the model provider did not answer after {len(attempts)} attempt(s) "
            f"(profiles: {tried}); last error: {summary}",
            attempts,
            kind=summary.kind,
            status=summary.status,
            retry_after=hint,
            retryable=any(a.get("retryable") for a in attempts),
        )

    def _profiles(self, profile: ProviderProfile, attempts: list[dict]):
        yield profile
        for name in profile.fallbacks:
            try:
                yield resolve_profile(name)
            except ProviderNotConfigured as exc:  # a fallback without its key: note, skip
                attempts.append(
                    {"profile": name, "ok": False, "error": exc.message, "kind": "config"}
                )

    def _with_retries(
        self,
        profile: ProviderProfile,
        messages: list[dict],
        tools: list[dict],
        agent: str,
        timeout: float | None,
        on_delta: llm.DeltaSink | None,
        attempts: list[dict],
    ) -> llm.Completion:
        conf = settings.OPENHIVE
        tries = 1 + max(0, conf["LLM_RETRIES"])
        for attempt in range(1, tries + 1):
            started = time.monotonic()
            record = {"profile": profile.name, "model": profile.model, "attempt": attempt}
            attempts.append(record)
            try:
                with tracing.model_call_span(profile, agent) as span:
                    reply = self.inner.complete(
                        profile, messages, tools, agent=agent, timeout=timeout, on_delta=on_delta
                    )
                    tracing.model_call_result(span, reply)
            except llm.ProviderError as exc:
                record.update(
                    ok=False,
                    error=str(exc)[:500],
                    kind=exc.kind,
                    status=exc.status,
                    retry_after=exc.retry_after,
                    retryable=exc.retryable,
                    latency_ms=int((time.monotonic() - started) * 1000),
                )
                too_long = (exc.retry_after or 0) > conf["LLM_RETRY_AFTER_MAX_SECONDS"]
                if not exc.retryable or attempt == tries or too_long:
                    raise
                delay = backoff_seconds(attempt, exc.retry_after, rng=self.rng)
                record["waited_ms"] = int(delay * 1000)
                logger.info(
                    "model call to %s failed (%s); retry %d of %d in %.2f s",
                    profile.name,
                    exc.kind,
                    attempt,
                    tries - 1,
                    delay,
                )
                self.sleep(delay)
                continue
            record.update(ok=True, latency_ms=reply.latency_ms)
            return reply
        raise AssertionError("unreachable")
