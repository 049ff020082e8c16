"""The reads every chat message and turn makes in the turn host (its topic's history, the active
topics, the listening triggers, the main team, the main agent's plugins) are compiled once per
process, and answer what the ORM's own queries answer."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from openhive.chat import selectors
from openhive.chat.models import CONVERSATION_ROLES, Message, Topic
from openhive.tools.models import Plugin
from openhive.tools.plugins import source
from openhive.tools.plugins.selectors import plugins_active
from teams import services as team_services
from teams.services import team_ensure_main
from tests.factories import TeamFactory
from triggers import selectors as trigger_selectors
from triggers.models import TriggerConfig

pytestmark = pytest.mark.django_db


def _said(topic: Topic, role: str, content: str, reply_to: Message | None = None) -> Message:
    return Message.objects.create(
        topic=topic, channel_id=topic.channel_id, role=role, content=content, in_reply_to=reply_to
    )


def _orm_history(topic: Topic, limit: int, before_id: int | None) -> list[dict]:
    rows = Message.objects.filter(topic=topic, role__in=CONVERSATION_ROLES)
    if before_id is not None:
        rows = rows.exclude(role=Message.Role.USER, pk__gte=before_id)
    last = list(rows.order_by("-id")[:limit])
    last.sort(key=lambda m: (m.in_reply_to_id or m.pk, m.role == Message.Role.ASSISTANT, m.pk))
    return [{"role": m.role, "content": m.content} for m in last]


def test_a_topics_history_is_compiled_once_and_leaves_out_the_turns_message_and_later_ones():
    topic = Topic.objects.create(channel_id="ws:user:1", name="disk")
    other = Topic.objects.create(channel_id="ws:user:1", name="other")
    first = _said(topic, Message.Role.USER, "check the disk")
    _said(topic, Message.Role.ASSISTANT, "it is at 40%", reply_to=first)
    _said(other, Message.Role.USER, "not this topic")
    second = _said(topic, Message.Role.USER, "and the memory?")
    waiting = _said(topic, Message.Role.USER, "and the network?")  # its turn is still to come
    _said(topic, Message.Role.NOTIFICATION, "a delivery, not the conversation")

    # The turn's own message is its request, not its history.
    assert selectors.topic_history(topic=topic, limit=50, before_id=second.pk) == [
        {"role": "user", "content": "check the disk"},
        {"role": "assistant", "content": "it is at 40%"},
    ]
    assert selectors.topic_history(topic=topic, limit=50, before_id=waiting.pk)[-1] == {
        "role": "user",
        "content": "and the memory?",
    }
    assert selectors._conversation_query(50)._compiled[connection.vendor] is not None
    for limit, before in ((50, None), (50, waiting.pk), (2, second.pk), (2, None)):
        assert selectors.topic_history(topic=topic, limit=limit, before_id=before) == (
            _orm_history(topic, limit, before)
        )
    assert selectors.topic_history(topic=other, limit=50) == [
        {"role": "user", "content": "not this topic"}
    ]


def test_the_active_topics_are_compiled_once_most_recent_first():
    now = timezone.now()
    older = Topic.objects.create(
        channel_id="ws:user:1", name="older", last_activity_at=now - timedelta(hours=1)
    )
    newer = Topic.objects.create(channel_id="ws:user:1", name="newer", last_activity_at=now)
    Topic.objects.create(channel_id="ws:user:1", name="idle", state=Topic.State.IDLE)
    Topic.objects.create(channel_id="ws:user:2", name="someone else's")
    assert selectors.active_topics(channel_id="ws:user:1") == [newer, older]
    assert selectors._ACTIVE_TOPICS._compiled[connection.vendor] is not None
    assert [t.name for t in selectors.active_topics(channel_id="ws:user:2")] == ["someone else's"]


def test_the_listening_triggers_are_compiled_once(main_team):
    team = TeamFactory(name="ops", parent=main_team)
    listening = TriggerConfig.objects.create(
        team=team, name="on-disk", type=TriggerConfig.Type.KEYWORD, task="x", state="active"
    )
    TriggerConfig.objects.create(
        team=team, name="nightly", type=TriggerConfig.Type.SCHEDULE, task="x", state="active"
    )
    TriggerConfig.objects.create(
        team=team, name="quiet", type=TriggerConfig.Type.MESSAGE, task="x", state="disabled"
    )
    assert trigger_selectors.triggers_listening() == [listening]
    assert trigger_selectors._LISTENING._compiled[connection.vendor] is not None


def test_the_main_team_is_found_in_one_read_once_it_exists(main_team, django_assert_num_queries):
    with django_assert_num_queries(1):
        assert team_ensure_main() == main_team
    assert team_services._MAIN._compiled[connection.vendor] is not None


def test_the_main_team_is_made_when_it_is_missing():
    assert not team_services._MAIN.rows(team_services.Team)
    made = team_ensure_main()
    assert made.name == "main" and team_ensure_main() == made


def test_a_teams_plugin_tools_come_from_its_active_plugins_read_compiled_once(main_team):
    team = TeamFactory(name="ops", parent=main_team)

    def plugin(name: str, **fields) -> Plugin:
        return Plugin.objects.create(
            team=team,
            tool_name=name,
            source_path=f"plugins/{name}.py",
            source_hash="0" * 64,
            description=f"{name} things",
            parameters={"type": "object", "properties": {"n": {"type": "integer"}}},
            **fields,
        )

    plugin("add")
    plugin("sub")
    plugin("old", status=Plugin.Status.DEPRECATED)
    Plugin.objects.create(
        team=main_team, tool_name="mine", source_path="p.py", source_hash="0" * 64, description="m"
    )
    specs = list(source.plugin_tool_specs(team))
    assert [s.name for s in specs] == [p.offered_name for p in plugins_active(team_id=team.pk)]
    assert [s.name for s in specs] == ["plugin__add", "plugin__sub"]
    assert specs[0].parameters["properties"] == {"n": {"type": "integer"}}
    assert source._ACTIVE._compiled[connection.vendor] is not None
    assert list(source.plugin_tool_specs(TeamFactory.build(name="unsaved"))) == []
