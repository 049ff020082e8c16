"""OpenTelemetry spans for the queue claim, a session, each model call (GenAI semantic
conventions) and each tool call. The SDK is always set up; spans leave the process only when
the standard OTEL_* variables configure an exporter (`OTEL_TRACES_EXPORTER=otlp|console`, or an
`OTEL_EXPORTER_OTLP_ENDPOINT`); with nothing to receive them they are dropped when made (their
ids still flow). `OTEL_SDK_DISABLED=true` turns tracing off.

Trace context crosses the queue as a W3C `traceparent` carrier stored with the child task, so
one trace shows a parent task and every task it delegated or queried."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from .providers import ProviderProfile

_lock = threading.Lock()
_state: dict[str, Any] = {"provider": None, "enabled": True, "listening": False}
_propagator = TraceContextTextMapPropagator()
NAME = "openhive"


def _sdk_disabled() -> bool:
    return os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true"


def provider():
    """The SDK tracer provider of this process, made on first use."""
    if _state["provider"] is None:
        with _lock:
            if _state["provider"] is None:
                _state["provider"] = _make_provider()
    return _state["provider"]


def _make_provider():
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider

    resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME", NAME)})
    sdk = TracerProvider(resource=resource, sampler=_ListeningSampler())
    exporter = _configured_exporter()
    if exporter is not None:
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        sdk.add_span_processor(BatchSpanProcessor(exporter))
        _state["listening"] = True
    return sdk


def _sampler_base():
    from opentelemetry.sdk.trace.sampling import Sampler

    return Sampler


class _ListeningSampler(_sampler_base()):  # type: ignore[misc]
    """Records spans only while something receives them (an exporter, a test's processor).
    Otherwise spans are dropped at creation, the cheap path, yet keep valid ids: the trace id
    is still recorded on sessions and still crosses the queue to child tasks."""

    def should_sample(
        self, parent_context, trace_id, name, kind=None, attributes=None, links=None,
        trace_state=None,
    ):  # fmt: skip
        from opentelemetry.sdk.trace.sampling import Decision, SamplingResult

        parent = trace.get_current_span(parent_context).get_span_context()
        state = parent.trace_state if parent.is_valid else trace_state
        if _state["listening"]:
            return SamplingResult(Decision.RECORD_AND_SAMPLE, attributes, state)
        return SamplingResult(Decision.DROP, None, state)

    def get_description(self) -> str:
        return "OpenHiveListeningSampler"


def _configured_exporter():
    """An exporter only when the operator asked for one with the standard variables."""
    choice = os.environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    endpoint = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or os.environ.get(
        "OTEL_EXPORTER_OTLP_ENDPOINT"
    )
    if choice == "none" or (not choice and not endpoint):
        return None
    if choice == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter()


def add_span_processor(processor: Any) -> None:
    """Attach a processor (tests: an in-memory exporter) to this process's provider; spans
    are recorded from then on."""
    provider().add_span_processor(processor)
    _state["listening"] = True


def set_enabled(enabled: bool) -> None:
    """Turn spans on or off for this process (the benchmark's baseline runs without)."""
    _state["enabled"] = enabled


_NO_OP = trace.NoOpTracer()


def tracer() -> trace.Tracer:
    if not _state["enabled"] or _sdk_disabled():
        return _NO_OP
    made = _state.get("tracer")
    if made is None:
        made = _state["tracer"] = provider().get_tracer(NAME)
    return made


# --- trace context across the queue ------------------------------------------------------------


def inject() -> dict[str, str]:
    """The current trace context as a W3C carrier (empty when no span is recording)."""
    carrier: dict[str, str] = {}
    if trace.get_current_span().get_span_context().is_valid:
        _propagator.inject(carrier)
    return carrier


def extract(carrier: dict | None) -> otel_context.Context | None:
    if not carrier:
        return None
    return _propagator.extract(carrier)


def trace_id_of(span: Span) -> str:
    context = span.get_span_context()
    return format(context.trace_id, "032x") if context.is_valid else ""


# --- spans --------------------------------------------------------------------------------------


@contextlib.contextmanager
def queue_claim_span(
    *, team: str, task_id: int | None, carrier: dict | None, start_time: int | None = None
) -> Iterator[Span]:
    """`start_time` (ns since the epoch): when the claim began, for a span made after it."""
    with tracer().start_as_current_span(
        "openhive.queue claim",
        context=extract(carrier),
        kind=SpanKind.CONSUMER,
        start_time=start_time,
        attributes={
            "messaging.operation.type": "receive",
            "messaging.system": "openhive.tasks",
            "openhive.team": team,
            **({"openhive.task_id": task_id} if task_id else {}),
        },
    ) as span:
        yield span


@contextlib.contextmanager
def session_span(
    *, agent: str, team_id: int, task_id: int | None, kind: str, carrier: dict | None
) -> Iterator[Span]:
    """`invoke_agent {agent}`: the parent is the carrier's context when the session runs a
    task handed over the queue, else whatever span is current (a query, a chat turn)."""
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": agent,
        "openhive.team_id": team_id,
        "openhive.session.kind": kind,
    }
    if task_id:
        attributes["openhive.task_id"] = task_id
    with tracer().start_as_current_span(
        f"invoke_agent {agent}", context=extract(carrier), attributes=attributes
    ) as span:
        yield span


class _Unmade:
    """What a model or tool call's span is while nothing receives spans: none is made, and the
    session's own span (a dropped one, whose ids still cross the queue) stays current. Making
    and dropping two spans per step cost ~5 % of a quick step; the generator context managers
    that decided not to make them still cost ~1 %."""

    __slots__ = ()

    def __enter__(self) -> Span:
        return trace.get_current_span()

    def __exit__(self, *_exc: object) -> None:
        return None


_UNMADE = _Unmade()


def provider_name(model: str) -> str:
    return model.split("/", 1)[0] if "/" in model else "openai"


def model_call_span(
    profile: ProviderProfile, agent: str
) -> contextlib.AbstractContextManager[Span]:
    if not _state["listening"]:
        return _UNMADE
    return _model_call_span(profile, agent)


@contextlib.contextmanager
def _model_call_span(profile: ProviderProfile, agent: str) -> Iterator[Span]:
    model = profile.model.split("/", 1)[-1]
    attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": provider_name(profile.model),
        "gen_ai.system": provider_name(profile.model),
        "gen_ai.request.model": model,
        "gen_ai.agent.name": agent,
        "openhive.provider_profile": profile.name,
    }
    if profile.options.get("max_tokens"):
        attributes["gen_ai.request.max_tokens"] = profile.options["max_tokens"]
    if profile.options.get("temperature") is not None:
        attributes["gen_ai.request.temperature"] = profile.options["temperature"]
    with tracer().start_as_current_span(
        f"chat {model}", kind=SpanKind.CLIENT, attributes=attributes
    ) as span:
        try:
            yield span
        except Exception as exc:
            span.set_attribute("error.type", getattr(exc, "kind", "") or type(exc).__name__)
            status = getattr(exc, "status", None)
            if status:
                span.set_attribute("http.response.status_code", status)
            span.set_status(Status(StatusCode.ERROR, str(exc)[:200]))
            raise


def model_call_result(span: Span, reply: Any) -> None:
    if not span.is_recording():
        return
    span.set_attribute("gen_ai.response.finish_reasons", [reply.finish_reason or "stop"])
    span.set_attribute("gen_ai.usage.input_tokens", reply.prompt_tokens)
    span.set_attribute("gen_ai.usage.output_tokens", reply.completion_tokens)
    span.set_attribute("openhive.cost_usd", float(reply.cost_usd))


def tool_span(name: str, call_id: str) -> contextlib.AbstractContextManager[Span]:
    if not _state["listening"]:
        return _UNMADE
    return tracer().start_as_current_span(
        f"execute_tool {name}",
        attributes={
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": call_id,
            "gen_ai.tool.type": "function",
        },
    )
