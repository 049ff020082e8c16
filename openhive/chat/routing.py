from django.urls import path

from trust.policy import check_policy_at_startup

from .consumers import ChatConsumer

websocket_urlpatterns = [path("ws/chat/", ChatConsumer.as_asgi())]

# Imported once when the web server loads the ASGI application.
check_policy_at_startup()
