"""The topic classifier: one short completion through litellm (profile `classifier` if it is
defined, else `default`) that files a message under one of the active topics or asks for a new
one. The exchange is recorded like any other, as a chat session of the main team."""

from __future__ import annotations

import json
import re

from openhive.core.scrubbing import get_scrubber
from openhive.engine.models import Session
from openhive.engine.providers import ProviderProfile, load_providers, resolve_profile
from openhive.engine.recorder import SessionRecorder, complete_once
from teams.services import team_ensure_main

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
    recorder = SessionRecorder(team_id=team_ensure_main().pk, kind=Session.Kind.CHAT)
    reply = complete_once(
        recorder=recorder, profile=profile, messages=messages, agent=CLASSIFIER_TEAM, timeout=30
    )
    text = reply.message.get("content") or ""
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
