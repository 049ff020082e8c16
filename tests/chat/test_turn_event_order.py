"""A turn's events reach the socket before its answer, also when the turn host's last event
and its answer are read together (the event's send is a task of its own, the answer's is not)."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from openhive.chat import consumers
from openhive.chat.turn import TurnResult
from openhive.chat.turnpool import ThreadTurns
from trust.services import api_token_create

from .conftest import connect, receive_until

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("close_db_connections", "fast_hashing"),
]


class SameReadTurns(ThreadTurns):
    """Routes as the web process does; its turn hands over a tool's event and returns at
    once, on the event loop, as `ProcessTurns` does with two frames read in one go."""

    async def turn(self, *, routed, message, sender_id, on_event) -> TurnResult:
        on_event({"event": "tool_result", "name": "delegate_task", "success": True})
        return TurnResult(True, routed.topic, "I've asked the ops team.")


async def test_a_tools_event_arrives_before_the_answer_it_led_to(django_user_model, monkeypatch):
    await django_user_model.objects.acreate(username="alice")
    token = (await sync_to_async(api_token_create)(username="alice"))[1]
    executor = SameReadTurns()
    monkeypatch.setattr(consumers, "turn_executor", lambda: executor)
    communicator = await connect(f"/ws/chat/?token={token}")
    await receive_until(communicator, "topic_list")
    await communicator.send_json_to({"type": "message", "content": "ask ops to check"})
    seen = [m["type"] for m in await receive_until(communicator, "response")]
    assert "event" in seen and seen.index("event") < seen.index("response")
    await communicator.disconnect()
