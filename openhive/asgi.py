"""ASGI entry point: HTTP (admin, API, static files) and the chat WebSocket."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "openhive.settings")
django_http = get_asgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler  # noqa: E402

from openhive.chat.origin import SameOriginValidator  # noqa: E402
from openhive.chat.routing import websocket_urlpatterns  # noqa: E402
from openhive.chat.session import socket_auth_stack  # noqa: E402
from openhive.core.accesslog import AccessLog  # noqa: E402
from openhive.core.heap import freeze_long_lived  # noqa: E402
from openhive.core.urlchecks import check_url_configuration  # noqa: E402

# The URL configuration (the admin, the REST API) loads here, with its system checks, which
# `serve` leaves to this process: a broken one stops the web process as it starts rather than
# failing its first request, and what it loads is frozen below with the rest.
check_url_configuration()

# The web server runs with its own access log off (openhive.webserver): this one goes through
# logging.
application = AccessLog(
    ProtocolTypeRouter(
        {
            "http": ASGIStaticFilesHandler(django_http),
            "websocket": SameOriginValidator(socket_auth_stack(URLRouter(websocket_urlpatterns))),
        }
    )
)

# Everything loaded so far lives as long as the web process (see openhive.core.heap).
freeze_long_lived()
