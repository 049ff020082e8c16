"""The chat page at /chat/ for logged-in users, its login, and the history of a topic (JSON,
read by the page when a topic is opened or the socket reconnects)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import LoginView, LogoutView
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from .models import Topic
from .selectors import topic_messages

LOGIN_URL = "/chat/login/"


def user_channel(user) -> str:
    """The conversation of a logged-in user: the same id the socket uses."""
    return f"ws:user:{user.pk}"


@require_GET
@login_required(login_url=LOGIN_URL)
def chat_page(request: HttpRequest) -> HttpResponse:
    return render(request, "chat/page.html", {"username": request.user.get_username()})


@require_GET
def topic_history_json(request: HttpRequest, topic_id: int) -> JsonResponse:
    if not request.user.is_authenticated:
        return JsonResponse({"detail": "log in first"}, status=401)
    topic = Topic.objects.filter(pk=topic_id, channel_id=user_channel(request.user)).first()
    if topic is None:
        return JsonResponse({"detail": "no such topic in your conversation"}, status=404)
    return JsonResponse(
        {
            "topic": {"id": topic.pk, "name": topic.name, "state": topic.state},
            "messages": [
                {
                    "id": m.pk,
                    "role": m.role,
                    "content": m.content,
                    "created_at": m.created_at.isoformat(),
                }
                for m in topic_messages(topic=topic)
            ],
        }
    )


class ChatLoginView(LoginView):
    template_name = "chat/login.html"
    redirect_authenticated_user = True

    def get_default_redirect_url(self) -> str:
        return "/chat/"


class ChatLogoutView(LogoutView):
    next_page = LOGIN_URL
