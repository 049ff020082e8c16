"""The chat socket at /ws/chat/: `message` in; `ack`, `topic_list`, `event`, `delta`,
`response`, `notification` and `error` out (DESIGN.md, Interfaces; `delta` carries the main
agent's reply text as it streams, before the final `response`).

Per message: trust gate and store (then `ack`), route to a topic, the main agent's turn in that
topic. Routing runs in arrival order; turns of one topic run in order, turns of different
topics side by side."""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import json
import logging
import re
from typing import Any
from urllib.parse import parse_qs

from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings
from django.urls import reverse
from django.utils import timezone

from openhive.core.errors import DomainError
from openhive.core.text import UnstorableText, check_storable
from trust.gate import NOT_AUTHORIZED_MESSAGE, Sender, may_assert_sender
from trust.services import api_token_authenticate

from . import selectors, services
from .admit import Admission, Inbound, admit_queue
from .close_reason import install as install_close_reason
from .dbpool import db
from .dispatch import DirectDispatch
from .intercept import intercept_inbound
from .models import Topic
from .outbox_hub import outbox_hub
from .topics import Routed
from .turn import TurnResult
from .turnpool import turn_executor

logger = logging.getLogger(__name__)
# The socket is served from here: daphne (if it serves us) is loaded by now.
install_close_reason()

MAX_MESSAGE_CHARS = 20_000
MAX_FRAME_CHARS = 64_000
CLOSE_TOO_BIG = 1009
NOT_AUTHORIZED = {
    "type": "error",
    "code": "not_authorized",
    "message": "Not authorized. Log in, or connect with ?token=<API token>.",
}
# The one reply to a sender the policy refuses: static, the same for everyone, never a model's.
NOT_AUTHORIZED_BY_POLICY = {
    "type": "error",
    "code": "not_authorized",
    "message": NOT_AUTHORIZED_MESSAGE,
}
BUSY = {
    "type": "error",
    "code": "busy",
    "message": "Too many messages are waiting for an answer on this connection; wait for "
    "the answers, then send it again.",
}
ASSERTED_ID = re.compile(r"^[A-Za-z0-9_.@-]{1,64}$")


class ChatConsumer(DirectDispatch, AsyncJsonWebsocketConsumer):
    async def connect(self) -> None:
        sender = await self._identify()
        await self.accept()
        if sender is None:
            await self.send_json(NOT_AUTHORIZED)
            await self.close(code=4401)
            return
        self.sender = sender
        self.channel_id = sender.channel_id
        self.group = services.channel_group(self.channel_id)
        self.routing_lock = asyncio.Lock()
        # Per-socket state stays bounded: a lock per topic only while a turn of it is
        # running or waiting, and at most CHAT_PENDING_PER_SOCKET messages in flight.
        self.topic_locks: dict[int, asyncio.Lock] = {}
        self.topic_waiting: dict[int, int] = {}
        self.turns: set[asyncio.Task] = set()
        self.delivery_lock = asyncio.Lock()
        if self.channel_layer is not None:
            await self.channel_layer.group_add(self.group, self.channel_name)
        await self.send_topic_list()
        outbox_hub().register(self)
        await self.deliver_outbox()  # what arrived while nobody was connected

    async def _identify(self) -> Sender | None:
        """A verified sender (session or API token), or an id the client asserts where the
        policy allows it (namespaced `anon:`, so it can never pass for a real user)."""
        self.is_staff = False
        user = self.scope.get("user")
        query = parse_qs(self.scope.get("query_string", b"").decode(errors="replace"))
        if user is None or not user.is_authenticated:
            token = (query.get("token") or [""])[0]
            user = await db(api_token_authenticate)(token) if token else None
        if user is not None:
            # Staff get a link to a result's task in the admin; nobody else could open it.
            self.is_staff = bool(user.is_staff)
            return Sender(
                channel_id=selectors.user_channel_id(user.pk), sender_id=user.get_username()
            )
        claimed = (query.get("sender") or [""])[0] or _header(self.scope, b"x-sender-id")
        if claimed and ASSERTED_ID.fullmatch(claimed) and await db(may_assert_sender)("ws"):
            return Sender(
                channel_id=f"ws:anon:{claimed}", sender_id=f"anon:{claimed}", asserted=True
            )
        return None

    async def disconnect(self, code: int) -> None:
        if not hasattr(self, "channel_id"):
            return
        outbox_hub().unregister(self)
        if self.channel_layer is not None:
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None, **kw):
        """A malformed frame gets an `error` and the socket stays open for the next one."""
        if text_data is None:
            await self._bad_request("send text frames containing JSON; binary frames are refused")
            return
        if len(text_data) > MAX_FRAME_CHARS:
            # Too big to be a chat message: say why, then close (1009, message too big).
            reason = f"frame larger than {MAX_FRAME_CHARS} characters"
            await self._bad_request(reason)
            await self.close(code=CLOSE_TOO_BIG, reason=reason)
            return
        try:
            content = json.loads(text_data)
        except ValueError:
            await self._bad_request("the frame is not valid JSON")
            return
        except RecursionError:
            await self._bad_request("the frame's JSON is nested too deeply")
            return
        try:
            check_storable(content, "the frame")
        except UnstorableText as exc:  # a NUL or a lone surrogate: no database stores them
            await self._bad_request(f"{exc}; send plain text")
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
        if len(self.turns) >= settings.OPENHIVE["CHAT_PENDING_PER_SOCKET"]:
            # Refused before it is stored: nothing changed, the client may send it again.
            await self.send_json(BUSY)
            return
        try:
            inbound = await admit_queue().admit(
                Admission(
                    sender=self.sender,
                    content=content["content"],
                    topic_id=content.get("topic_id"),
                    new_topic=bool(content.get("new_topic")),
                )
            )
        except DomainError as exc:  # an unknown topic, or the database could not store it
            await self.send_json({"type": "error", "code": exc.code, "message": exc.message})
            return
        if not inbound.decision.allowed:
            if not inbound.decision.silent:
                await self.send_json(NOT_AUTHORIZED_BY_POLICY)
            return
        await self.send_json({"type": "ack", "message_id": inbound.message.pk})
        turn = asyncio.create_task(self._route_and_run(inbound))
        self.turns.add(turn)
        turn.add_done_callback(self.turns.discard)

    async def _route_and_run(self, inbound: Inbound) -> None:
        # Routing in arrival order: a message is filed only after the one before it.
        await self.routing_lock.acquire()
        try:
            await admit_queue().settled()  # the acks of a burst before its turns

            routed: Routed = await turn_executor().route(inbound)
        except DomainError as exc:  # the named topic was closed meanwhile
            self.routing_lock.release()
            await self.send_json({"type": "error", "code": exc.code, "message": exc.message})
            return
        except Exception:
            self.routing_lock.release()
            logger.exception("routing a chat message failed")
            await self.send_json(
                {"type": "error", "code": "routing_failed", "message": "could not file it"}
            )
            return
        topic_id = routed.topic.pk
        topic_lock = self.topic_locks.setdefault(topic_id, asyncio.Lock())
        self.topic_waiting[topic_id] = self.topic_waiting.get(topic_id, 0) + 1
        # Queue on the topic's lock before the next message may be routed (no await between
        # the two calls), so turns of one topic start in arrival order.
        self.routing_lock.release()
        try:
            await topic_lock.acquire()
        except BaseException:
            self._topic_done(topic_id)
            raise
        try:
            if routed.topics_changed:
                await self.topics_changed_everywhere()
            # An answer to a waiting task (or an approval) is not a turn for the main agent.
            taken = await db(intercept_inbound)(
                topic=routed.topic,
                message=inbound.message,
                sender_id=self.sender.sender_id,
                operator=self.is_staff,
            )
            if taken is not None:
                await self.send_json(_turn_payload(TurnResult(True, routed.topic, taken)))
                return
            result = await self._turn(routed, inbound)
            if result.topic_moved:
                await self.topics_changed_everywhere()
            # Still holding the topic's lock: the next turn's events come after this answer.
            await self.send_json(_turn_payload(result))
        except Exception:  # the socket went away meanwhile; the answer is stored anyway
            logger.debug("could not send a turn's answer", exc_info=True)
        finally:
            topic_lock.release()
            self._topic_done(topic_id)

    def _topic_done(self, topic_id: int) -> None:
        left = self.topic_waiting.get(topic_id, 1) - 1
        if left > 0:
            self.topic_waiting[topic_id] = left
        else:
            self.topic_waiting.pop(topic_id, None)
            self.topic_locks.pop(topic_id, None)

    async def _turn(self, routed: Routed, inbound: Inbound) -> TurnResult:
        loop = asyncio.get_running_loop()
        topic_id = routed.topic.pk
        # The sends of the turn's events not known to be done. Each is a task of its own:
        # when the turn host's last event and its answer are read together, the answer was
        # sent first (a tool's result after the reply it led to), so the answer waits for them.
        sending: collections.deque[concurrent.futures.Future] = collections.deque()

        def on_event(event: dict) -> None:
            if event.get("event") == "delta":
                message = {"type": "delta", "topic_id": topic_id, "content": event["content"]}
            else:
                message = {"type": "event", "topic_id": topic_id, "at": _now(), **event}
            while sending and sending[0].done():
                sending.popleft()
            sending.append(asyncio.run_coroutine_threadsafe(self.send_json(message), loop))

        try:
            return await turn_executor().turn(
                routed=routed,
                message=inbound.message,
                sender_id=self.sender.sender_id,
                on_event=on_event,
            )
        except Exception:  # the person must hear about it; the message stays stored
            logger.exception("chat turn failed in topic %s", topic_id)
            return TurnResult(
                False,
                routed.topic,
                error_code="turn_failed",
                error="the turn failed unexpectedly; the operator can see the log",
            )
        finally:
            if sending:  # a socket gone meanwhile is not this turn's error
                events = [asyncio.wrap_future(f) for f in sending]
                await asyncio.gather(*events, return_exceptions=True)

    async def send_topic_list(self) -> None:
        topics = await db(selectors.topics_for_channel)(channel_id=self.channel_id)
        await self.send_json(
            {
                "type": "topic_list",
                "topics": [{"id": t.pk, "name": t.name, "state": t.state} for t in topics],
            }
        )

    async def topics_changed_everywhere(self) -> None:
        """This socket gets the new topic list now (before the answer that caused it); every
        other socket of the conversation, in any process, through the channel layer."""
        await self.send_topic_list()
        if self.channel_layer is not None:
            await self.channel_layer.group_send(
                self.group, {"type": "topics.changed", "origin": self.channel_name}
            )

    async def topics_changed(self, event: dict) -> None:
        if event.get("origin") != self.channel_name:
            await self.send_topic_list()

    async def outbox_wake(self, event: dict) -> None:
        await self.deliver_outbox()

    async def deliver_outbox(self) -> None:
        async with self.delivery_lock:
            items = await db(selectors.outbox_undelivered)(channel_id=self.channel_id)
            for item in items:
                # Claim before sending so two sockets of one user never both deliver it.
                claimed = await db(services.outbox_mark_delivered)(ids=[item.pk])
                if not claimed:
                    continue
                try:
                    await self.send_json(_outbox_payload(item, staff=self.is_staff))
                except Exception:
                    await db(services.outbox_unmark_delivered)(ids=[item.pk])
                    raise


def _header(scope: dict, name: bytes) -> str:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return value.decode(errors="replace").strip()
    return ""


def _turn_payload(result: TurnResult) -> dict:
    if result.ok:
        return {
            "type": "response",
            "topic_id": result.topic.pk,
            "topic_name": result.topic.name,
            "content": result.content,
            "at": _now(),
        }
    return {
        "type": "error",
        "code": result.error_code,
        "message": result.error,
        "topic_id": result.topic.pk,
        "topic_name": result.topic.name,
        "at": _now(),
    }


def _now() -> str:
    return timezone.now().isoformat()


def _outbox_payload(item, *, staff: bool = False) -> dict:
    """A delivery as the socket sends it: `type` stays `notification` (or `response`) for
    clients that know only those; `kind` says result, notification or escalation, and
    `message_id` is the stored copy in the history (so a client can skip what it has)."""
    topic: Topic | None = item.topic
    message = item.message
    payload = {
        "type": "response" if item.kind == "response" else "notification",
        "kind": item.kind,
        "team": item.team_name,
        # The stored copy has the "[team] " tag removed: `team` names the sender.
        "content": message.content if message is not None else item.content,
        "topic_id": topic.pk if topic else None,
        "task_id": item.task_id,
        "task_status": message.task_status if message is not None else "",
        "message_id": message.pk if message is not None else None,
        "at": (message.created_at if message is not None else item.created_at).isoformat(),
    }
    if topic is not None:
        payload["topic_name"] = topic.name
    if item.data:  # a waiting task's question or approval request: what a client shows
        payload["question"] = item.data
    if staff and item.task_id is not None:
        payload["task_url"] = reverse("admin:tasks_task_change", args=[item.task_id])
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
    if topic_id is not None and (
        not isinstance(topic_id, int) or isinstance(topic_id, bool) or not 0 < topic_id < 2**63
    ):
        return "'topic_id' must be a positive integer or null"
    new_topic = content.get("new_topic")
    if new_topic is not None and not isinstance(new_topic, bool):
        return "'new_topic' must be true, false or absent"
    if new_topic and topic_id is not None:
        return "send either 'topic_id' or 'new_topic', not both"
    return ""
