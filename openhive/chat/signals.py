"""Events other apps may react to without the chat app knowing them."""

from django.dispatch import Signal

# Sent once an inbound chat message has passed the trust gate and been filed under a topic;
# never for a message the gate refused. The message/keyword triggers listen to it.
# kwargs: message (chat.Message), topic (chat.Topic), channel_id (str), sender_id (str).
message_received = Signal()
