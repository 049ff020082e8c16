"""Factories for the models the API and admin tests need beyond tests/factories.py."""

import factory
from django.contrib.auth import get_user_model

from memory.models import Memory
from openhive.chat.models import Message, OutboxMessage, Topic
from openhive.engine.models import LlmExchange, Session, ToolCall
from teams.models import ScopeKeyword
from tests.factories import TaskFactory, TeamFactory
from triggers.models import TriggerConfig
from trust.models import SenderTrust, TrustAuditLog
from vault.models import VaultEntry


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)

    username = factory.Sequence(lambda n: f"user-{n}")
    password = factory.django.Password("pw-123456")


class ScopeKeywordFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ScopeKeyword

    team = factory.SubFactory(TeamFactory)
    keyword = factory.Sequence(lambda n: f"keyword-{n}")


class SessionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Session

    team = factory.SubFactory(TeamFactory)
    task = factory.SubFactory(TaskFactory, team=factory.SelfAttribute("..team"))
    stop_reason = Session.StopReason.COMPLETED
    turns = 2
    prompt_tokens = 120
    completion_tokens = 30


class LlmExchangeFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = LlmExchange

    session = factory.SubFactory(SessionFactory)
    turn = factory.Sequence(lambda n: n + 1)
    request_digest = "0" * 64
    request_messages = factory.LazyFunction(lambda: [{"role": "user", "content": "hello"}])
    response = factory.LazyFunction(lambda: {"content": "hi"})


class ToolCallFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ToolCall

    session = factory.SubFactory(SessionFactory)
    team = factory.SelfAttribute("session.team")
    team_name = factory.SelfAttribute("team.name")
    tool = "list_teams"
    arguments = factory.LazyFunction(dict)
    success = True
    duration_ms = 12


class TopicFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Topic

    channel_id = "web:operator"
    name = factory.Sequence(lambda n: f"topic {n}")


class MessageFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Message

    topic = factory.SubFactory(TopicFactory)
    channel_id = factory.SelfAttribute("topic.channel_id")
    role = Message.Role.USER
    content = factory.Faker("sentence")


class OutboxMessageFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = OutboxMessage

    channel_id = "web:operator"
    content = factory.Faker("sentence")


class TriggerConfigFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = TriggerConfig

    team = factory.SubFactory(TeamFactory)
    name = factory.Sequence(lambda n: f"trigger-{n}")
    type = TriggerConfig.Type.SCHEDULE
    config = factory.LazyFunction(lambda: {"cron": "0 9 * * *"})
    task = "Write the morning report"


class MemoryFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Memory

    team = factory.SubFactory(TeamFactory)
    key = factory.Sequence(lambda n: f"memory-{n}")
    content = factory.Faker("sentence")


class VaultEntryFactory(factory.django.DjangoModelFactory):
    """A plain (non-secret) entry; secrets go through vault_store_secret."""

    class Meta:
        model = VaultEntry

    team = factory.SubFactory(TeamFactory)
    key = factory.Sequence(lambda n: f"state-{n}")
    value = "some state"


class SenderTrustFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = SenderTrust

    channel_type = "web"
    sender_id = factory.Sequence(lambda n: f"sender-{n}")


class TrustAuditLogFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = TrustAuditLog

    channel_type = "web"
    sender_id = factory.Sequence(lambda n: f"sender-{n}")
    decision = "allow"
    reason = "trusted_sender"
