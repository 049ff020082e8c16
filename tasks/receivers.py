"""The queue's hooks into lower layers: a chat message that answers a waiting task."""

from openhive.chat.intercept import register_interceptor

from .services.waiting import chat_answer

register_interceptor(chat_answer)
