"""The topic classifier: one short completion through litellm (profile `classifier` if it is
defined, else `default`) that files a message under one of the active topics or asks for a new
one. The exchange is recorded like any other, as a chat session of the main team."""

from __future__ import annotations

import hashlib
import json
import re

from django.utils import timezone

from openhive.engine import llm
from openhive.engine.models import LlmExchange, Session
from openhive.engine.providers import ProviderProfile, load_providers, resolve_profile
from teams.services import team_ensure_main
from vault.scrubbing import get_scrubber

from .models import Topic
from .topics import TOPIC_NAME_CHARS, Pick

CLASSIFIER_TEAM = "classifier"  # what a scripted provider's `when: {team: ...}` sees
INSTRUCTIONS = (
    "You file chat messages under conversation topics. Answer with JSON only: "
    '{"topic_id": <id>} to continue one of the listed topics, or '
    '{"new_topic": "<short name>"} when the message starts a different subject.'
)


def classifier_profile() -> ProviderProfile:
    profiles = load_providers().profiles
    return resolve_profile("classifier" if "classifier" in profiles else "default")


def classify_topic(*, channel_id: str, content: str, topics: list[Topic]) -> Pick:
    profile = classifier_profile()
    listing = "\n".join(
        f"- id {t.pk}: {t.name}" + (f" ({t.description})" if t.description else "") for t in topics
    )
    scrubber = get_scrubber()
    messages = [
        {"role": "system", "content": INSTRUCTIONS},
        {
            "role": "user",
            "content": scrubber.text(f"Active topics:\n{listing}\n\nMessage:\n{content}"),
        },
    ]
    session = Session.objects.create(
        team=team_ensure_main(),
        kind=Session.Kind.CHAT,
        model=profile.model,
        provider_profile=profile.name,
    )
    try:
        reply = llm.complete(profile, messages, [], team=CLASSIFIER_TEAM, timeout=30)
    except Exception as exc:
        Session.objects.filter(pk=session.pk).update(
            stop_reason=Session.StopReason.ERROR,
            error=scrubber.text(f"{type(exc).__name__}: {exc}")[:1000],
            finished_at=timezone.now(),
        )
        raise
    text = reply.message.get("content") or ""
    LlmExchange.objects.create(
        session=session,
        turn=1,
        request_digest=_digest(messages),
        request_messages=scrubber.data(messages),
        response=scrubber.data(reply.message),
        finish_reason=reply.finish_reason,
        prompt_tokens=reply.prompt_tokens,
        completion_tokens=reply.completion_tokens,
        cost_usd=reply.cost_usd,
        latency_ms=reply.latency_ms,
    )
    Session.objects.filter(pk=session.pk).update(
        stop_reason=Session.StopReason.COMPLETED,
        final_text=scrubber.text(text)[:2000],
        turns=1,
        prompt_tokens=reply.prompt_tokens,
        completion_tokens=reply.completion_tokens,
        cost_usd=reply.cost_usd,
        finished_at=timezone.now(),
    )
    return parse_pick(text)


def parse_pick(text: str) -> Pick:
    """Read the classifier's JSON, tolerating code fences and prose around it. Anything
    unreadable is a request for a new topic."""
    match = re.search(r"\{.*\}", text, re.DOTALL)
    if not match:
        return Pick()
    try:
        data = json.loads(match.group(0))
    except ValueError:
        return Pick()
    if not isinstance(data, dict):
        return Pick()
    topic_id = data.get("topic_id")
    if isinstance(topic_id, str) and topic_id.isdigit():
        topic_id = int(topic_id)
    if isinstance(topic_id, int) and not isinstance(topic_id, bool):
        return Pick(topic_id=topic_id)
    name = data.get("new_topic")
    if isinstance(name, str):
        return Pick(new_name=" ".join(name.split())[:TOPIC_NAME_CHARS])
    return Pick()


def _digest(messages: list[dict]) -> str:
    return hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).hexdigest()
