"""Events other apps may react to without the chat app knowing them."""

from django.dispatch import Signal

# Sent after an inbound chat message is stored (and, once the trust gate exists, admitted).
# kwargs: message (chat.Message), topic (chat.Topic), channel_id (str), sender_id (str).
message_received = Signal()
