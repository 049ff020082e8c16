from typing import Any

from django.urls import re_path

from trust.policy import check_policy_at_startup

from .consumers import ChatConsumer
from .origin import CLOSE_NOT_FOUND, refuse


async def no_such_socket(scope: dict, receive: Any, send: Any) -> None:
    """Any other socket path: a readable `error` frame and close 4404, not a server error with
    a traceback in the log (Channels' router raises for a path it does not know)."""
    path = scope.get("path", "")
    shown = path if len(path) <= 100 else path[:100] + "…"
    await refuse(
        send,
        receive,
        {
            "type": "error",
            "code": "not_found",
            "message": f"no socket at {shown}; the chat socket is /ws/chat/",
            "close_code": CLOSE_NOT_FOUND,
        },
    )


websocket_urlpatterns = [
    # With or without the trailing slash: clients write both.
    re_path(r"^ws/chat/?$", ChatConsumer.as_asgi()),
    re_path(r"", no_such_socket),
]

# Imported once when the web server loads the ASGI application.
check_policy_at_startup()
