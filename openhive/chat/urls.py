from django.urls import path

from . import views

app_name = "chat"

urlpatterns = [
    path("", views.chat_page, name="page"),
    path("login/", views.ChatLoginView.as_view(), name="login"),
    path("logout/", views.ChatLogoutView.as_view(), name="logout"),
    path("topics/<int:topic_id>/messages/", views.topic_history_json, name="topic-history"),
    path("notifications/", views.notifications_json, name="notifications"),
]
