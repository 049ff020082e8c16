"""Topics: the vocabulary of routing (modes, picks, names, the idle period). The state
changes (open, reactivate, idle out, route) are in `services.topics`.

Routing (a message that names no topic and does not ask for a new one):
- no active topic      → open a new one (no model involved);
- one active topic     → that topic; the main agent's turn may move the message to a new topic
                          with the `start_new_topic` tool (its decision, not a guess in code);
- two or more          → a small classifier call picks one or asks for a new one.
At most MAX_ACTIVE_TOPICS are active per channel: opening or reactivating one more idles the
least recently active. A topic quiet for longer than the idle period becomes idle.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings

from .models import Topic

MAX_ACTIVE_TOPICS = 5
TOPIC_NAME_CHARS = 60

NAMED = "named"  # the client chose the topic
NEW = "new"  # there was no active topic
SINGLE = "single"  # one active topic: the turn decides continue or new
CLASSIFIED = "classified"  # the classifier picked an existing topic
CLASSIFIED_NEW = "classified_new"  # the classifier asked for a new topic


@dataclass
class Routed:
    topic: Topic
    mode: str
    topics_changed: bool


@dataclass
class Pick:
    """A classifier's answer: an existing topic id, or a name for a new topic."""

    topic_id: int | None = None
    new_name: str = ""


Classifier = Callable[..., Pick]


def idle_after() -> timedelta:
    return timedelta(minutes=settings.OPENHIVE["TOPIC_IDLE_MINUTES"])


def topic_name_from(text: str) -> str:
    """A readable name from the first words of a message (no model needed)."""
    words = re.sub(r"\s+", " ", text).strip()
    if len(words) <= TOPIC_NAME_CHARS:
        return words or "New topic"
    cut = words[:TOPIC_NAME_CHARS].rsplit(" ", 1)[0]
    return (cut or words[:TOPIC_NAME_CHARS]) + "…"
