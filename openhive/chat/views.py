"""The chat page at /chat/ for logged-in users, its login, and what the page reads as JSON: the
history of a topic (when a topic is opened or the socket reconnects) and the channel's
notifications (when the page loads)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import LoginView, LogoutView
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.urls import NoReverseMatch, reverse
from django.views.decorators.http import require_GET

from openhive.core.scrubbing import scrub

from .models import Message, Topic
from .selectors import channel_deliveries, topic_messages, topic_tool_calls, user_channel_id

LOGIN_URL = "/chat/login/"


def user_channel(user) -> str:
    """The conversation of a logged-in user: the same id the socket uses."""
    return user_channel_id(user.pk)


@require_GET
@login_required(login_url=LOGIN_URL)
def chat_page(request: HttpRequest) -> HttpResponse:
    return render(request, "chat/page.html", {"username": request.user.get_username()})


def _task_admin_url(request: HttpRequest, task_id: int | None) -> str:
    """The task's admin page, for staff only: nobody else could open it."""
    if task_id is None or not request.user.is_staff:
        return ""
    try:
        return reverse("admin:tasks_task_change", args=[task_id])
    except NoReverseMatch:
        return ""


def _message_json(request: HttpRequest, m: Message) -> dict:
    return {
        "id": m.pk,
        "role": m.role,
        "content": m.content,
        "created_at": m.created_at.isoformat(),
        "team": m.team_name,
        "task_id": m.task_id,
        "task_status": m.task_status,
        "task_url": _task_admin_url(request, m.task_id),
        "topic_id": m.topic_id,
        "topic_name": m.topic.name if m.topic_id else "",
    }


@require_GET
def topic_history_json(request: HttpRequest, topic_id: int) -> JsonResponse:
    if not request.user.is_authenticated:
        return JsonResponse({"detail": "log in first"}, status=401)
    topic = Topic.objects.filter(pk=topic_id, channel_id=user_channel(request.user)).first()
    if topic is None:
        return JsonResponse({"detail": "no such topic in your conversation"}, status=404)
    messages = [_message_json(request, m) for m in topic_messages(topic=topic)]
    # The tool calls of the topic's turns, from the audit, so a reload loses no event.
    events = [
        {
            "name": c.tool,
            "success": c.success,
            "error": scrub(c.error)[:1000],
            "created_at": c.created_at.isoformat(),
        }
        for c in topic_tool_calls(topic=topic)
    ]
    return JsonResponse(
        {
            "topic": {"id": topic.pk, "name": topic.name, "state": topic.state},
            "messages": messages,
            "events": events,
        }
    )


@require_GET
def notifications_json(request: HttpRequest) -> JsonResponse:
    if not request.user.is_authenticated:
        return JsonResponse({"detail": "log in first"}, status=401)
    rows = channel_deliveries(channel_id=user_channel(request.user))
    return JsonResponse({"notifications": [_message_json(request, m) for m in rows]})


class ChatLoginView(LoginView):
    template_name = "chat/login.html"
    redirect_authenticated_user = True

    def get_default_redirect_url(self) -> str:
        return "/chat/"


class ChatLogoutView(LogoutView):
    next_page = LOGIN_URL
