"""add_trusted_sender, revoke_sender_trust, list_trusted_senders through call_tool."""

from __future__ import annotations

import pytest

from openhive.core.context import ToolContext
from openhive.engine.tool_calls import call_tool
from tests.factories import TeamFactory
from trust.models import SenderTrust

pytestmark = pytest.mark.django_db


def as_main(main_team, actor: str = "operator") -> ToolContext:
    return ToolContext(team=main_team, actor=actor)


def test_main_grants_lists_and_revokes(main_team):
    ctx = as_main(main_team)
    granted = call_tool(ctx, "add_trusted_sender", {"channel_type": "ws", "sender_id": "bob"})
    assert granted["success"] and granted["sender"]["channel_id"] is None
    listed = call_tool(ctx, "list_trusted_senders", {"trust_level": "trusted"})
    assert [s["sender_id"] for s in listed["senders"]] == ["bob"]
    revoked = call_tool(ctx, "revoke_sender_trust", {"channel_type": "ws", "sender_id": "bob"})
    assert revoked["success"] and not SenderTrust.objects.exists()


def test_denying_replaces_an_earlier_grant(main_team):
    ctx = as_main(main_team)
    call_tool(ctx, "add_trusted_sender", {"channel_type": "ws", "sender_id": "bob"})
    call_tool(
        ctx,
        "add_trusted_sender",
        {"channel_type": "ws", "sender_id": "bob", "trust_level": "denied"},
    )
    assert SenderTrust.objects.get().trust_level == "denied"


@pytest.mark.parametrize(
    "tool, args",
    [
        ("add_trusted_sender", {"channel_type": "ws", "sender_id": "bob"}),
        ("revoke_sender_trust", {"channel_type": "ws", "sender_id": "bob"}),
        ("list_trusted_senders", {}),
    ],
)
def test_child_teams_cannot_manage_trust(main_team, tool, args):
    child = TeamFactory(name="ops", parent=main_team)
    result = call_tool(ToolContext(team=child, actor="ops"), tool, args)
    assert result["success"] is False and result["code"] == "NOT_ALLOWED"
    assert not SenderTrust.objects.exists()


def test_in_a_chat_turn_only_a_staff_sender_may_change_trust(main_team, django_user_model):
    django_user_model.objects.create_user(username="carol", password="x")
    django_user_model.objects.create_user(username="root", password="x", is_staff=True)
    args = {"channel_type": "ws", "sender_id": "carol"}
    refused = call_tool(as_main(main_team, "user:carol"), "add_trusted_sender", args)
    assert refused["success"] is False and "staff" in refused["error"]
    assert call_tool(as_main(main_team, "user:root"), "add_trusted_sender", args)["success"]


@pytest.mark.parametrize(
    "args, fragment",
    [
        ({"channel_type": "WS!", "sender_id": "bob"}, "channel_type"),
        ({"channel_type": "ws", "sender_id": "bob", "channel_id": "discord:1"}, "does not belong"),
        ({"channel_type": "ws", "sender_id": "bob", "trust_level": "maybe"}, "trust_level"),
    ],
)
def test_bad_arguments_are_refused_and_change_nothing(main_team, args, fragment):
    result = call_tool(as_main(main_team), "add_trusted_sender", args)
    assert result["success"] is False and fragment in result["error"]
    assert not SenderTrust.objects.exists()


def test_revoking_an_unknown_sender_says_so(main_team):
    result = call_tool(
        as_main(main_team), "revoke_sender_trust", {"channel_type": "ws", "sender_id": "nobody"}
    )
    assert result["success"] is False and "no stored trust" in result["error"]


def test_trust_tools_are_never_offered_to_child_teams_even_with_a_star_allowlist():
    from openhive.core.registry import tools_for

    trust_tools = {"add_trusted_sender", "revoke_sender_trust", "list_trusted_senders"}
    assert not trust_tools & {s.name for s in tools_for(["*"], team="ops")}
    assert trust_tools <= {s.name for s in tools_for(["*"], team="main")}
