"""The chat socket at /ws/chat/: `message` in; `ack`, `topic_list`, `event`, `response`,
`notification` and `error` out (DESIGN.md, Interfaces)."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any
from urllib.parse import parse_qs

from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings

from trust.services import api_token_authenticate

from . import selectors, services
from .models import Topic
from .turn import Inbound, chat_receive, chat_turn

logger = logging.getLogger(__name__)

MAX_MESSAGE_CHARS = 20_000
MAX_FRAME_CHARS = 64_000
NOT_AUTHORIZED = {
    "type": "error",
    "code": "not_authorized",
    "message": "Not authorized. Log in, or connect with ?token=<API token>.",
}


class ChatConsumer(AsyncJsonWebsocketConsumer):
    async def connect(self) -> None:
        user = await self._identify()
        await self.accept()
        if user is None:
            await self.send_json(NOT_AUTHORIZED)
            await self.close(code=4401)
            return
        self.sender_id = user.username
        self.channel_id = f"ws:user:{user.pk}"
        self.group = services.channel_group(self.channel_id)
        self.topic_locks: dict[int, asyncio.Lock] = {}
        self.turns: set[asyncio.Task] = set()
        self.delivery_lock = asyncio.Lock()
        if self.channel_layer is not None:
            await self.channel_layer.group_add(self.group, self.channel_name)
        await self.send_topic_list()
        self.poller = asyncio.create_task(self._poll_outbox())

    async def _identify(self) -> Any:
        user = self.scope.get("user")
        if user is not None and user.is_authenticated:
            return user
        query = parse_qs(self.scope.get("query_string", b"").decode())
        token = (query.get("token") or [""])[0]
        if token:
            return await database_sync_to_async(api_token_authenticate)(token)
        return None

    async def disconnect(self, code: int) -> None:
        if not hasattr(self, "channel_id"):
            return
        self.poller.cancel()
        if self.channel_layer is not None:
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None, **kw):
        """A malformed frame gets an `error` and the socket stays open for the next one."""
        if text_data is None:
            await self._bad_request("send text frames containing JSON; binary frames are refused")
            return
        if len(text_data) > MAX_FRAME_CHARS:
            await self._bad_request(f"frame larger than {MAX_FRAME_CHARS} characters")
            return
        try:
            content = json.loads(text_data)
        except ValueError:
            await self._bad_request("the frame is not valid JSON")
            return
        await self.receive_json(content)

    async def _bad_request(self, message: str) -> None:
        await self.send_json({"type": "error", "code": "bad_request", "message": message})

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        if not hasattr(self, "channel_id"):
            return
        problem = _validate(content)
        if problem:
            await self._bad_request(problem)
            return
        try:
            inbound = await database_sync_to_async(chat_receive)(
                channel_id=self.channel_id,
                sender_id=self.sender_id,
                content=content["content"],
                topic_id=content.get("topic_id"),
            )
        except LookupError as exc:
            await self.send_json({"type": "error", "code": "unknown_topic", "message": str(exc)})
            return
        await self.send_json(
            {"type": "ack", "message_id": inbound.message.pk, "topic_id": inbound.topic.pk}
        )
        turn = asyncio.create_task(self._run_turn(inbound))
        self.turns.add(turn)
        turn.add_done_callback(self.turns.discard)

    async def _run_turn(self, inbound: Inbound) -> None:
        topic = inbound.topic
        # Turns of one topic run in order; different topics run side by side.
        async with self.topic_locks.setdefault(topic.pk, asyncio.Lock()):
            loop = asyncio.get_running_loop()

            def on_event(event: dict) -> None:
                message = {"type": "event", "topic_id": topic.pk, **event}
                asyncio.run_coroutine_threadsafe(self.send_json(message), loop)

            result = await sync_to_async(chat_turn, thread_sensitive=False)(
                inbound=inbound, sender_id=self.sender_id, on_event=on_event
            )
        if result.ok:
            await self.send_json(
                {
                    "type": "response",
                    "topic_id": topic.pk,
                    "topic_name": topic.name,
                    "content": result.content,
                }
            )
        else:
            await self.send_json(
                {
                    "type": "error",
                    "code": result.error_code,
                    "message": result.error,
                    "topic_id": topic.pk,
                }
            )
        await self.deliver_outbox()

    async def send_topic_list(self) -> None:
        topics = await database_sync_to_async(selectors.topics_for_channel)(
            channel_id=self.channel_id
        )
        await self.send_json(
            {
                "type": "topic_list",
                "topics": [{"id": t.pk, "name": t.name, "state": t.state} for t in topics],
            }
        )

    async def outbox_wake(self, event: dict) -> None:
        await self.deliver_outbox()

    async def _poll_outbox(self) -> None:
        interval = settings.OPENHIVE["OUTBOX_POLL_SECONDS"]
        while True:
            try:
                await self.deliver_outbox()
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("outbox delivery failed; retrying")
            await asyncio.sleep(interval)

    async def deliver_outbox(self) -> None:
        async with self.delivery_lock:
            items = await database_sync_to_async(selectors.outbox_undelivered)(
                channel_id=self.channel_id
            )
            for item in items:
                # Claim before sending so two sockets of one user never both deliver it.
                claimed = await database_sync_to_async(services.outbox_mark_delivered)(
                    ids=[item.pk]
                )
                if not claimed:
                    continue
                try:
                    await self.send_json(_outbox_payload(item))
                except Exception:
                    await database_sync_to_async(services.outbox_unmark_delivered)(ids=[item.pk])
                    raise


def _outbox_payload(item) -> dict:
    topic: Topic | None = item.topic
    payload = {
        "type": item.kind,
        "team": item.team_name,
        "content": item.content,
        "topic_id": topic.pk if topic else None,
    }
    if topic is not None:
        payload["topic_name"] = topic.name
    return payload


def _validate(content: Any) -> str:
    if not isinstance(content, dict):
        return 'send a JSON object like {"type": "message", "content": "..."}'
    if content.get("type") != "message":
        return f"unknown message type {content.get('type')!r}; the only type accepted is 'message'"
    text = content.get("content")
    if not isinstance(text, str) or not text.strip():
        return "'content' must be a non-empty string"
    if len(text) > MAX_MESSAGE_CHARS:
        return f"'content' is longer than {MAX_MESSAGE_CHARS} characters"
    topic_id = content.get("topic_id")
    if topic_id is not None and (not isinstance(topic_id, int) or isinstance(topic_id, bool)):
        return "'topic_id' must be an integer or null"
    return ""
