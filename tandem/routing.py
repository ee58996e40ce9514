from channels.auth import AuthMiddlewareStack
from channels.security.websocket import AllowedHostsOriginValidator
from django.urls import path

from tandem.chat.consumers import ChatConsumer
from tandem.handoff.agent_socket import AgentConsumer
from tandem.handoff.inbox_feed import InboxFeedConsumer

websocket_urlpatterns = [
    path("ws/chat/", ChatConsumer.as_asgi()),
    # The console's own pages only: a session cookie, so the origin must be this site's.
    path("ws/agent/<slug:slug>/<uuid:conversation_id>/",
         AllowedHostsOriginValidator(AuthMiddlewareStack(AgentConsumer.as_asgi()))),
    # The agent's notifications on every console page: the tenant's hand-overs and their messages.
    path("ws/agent/<slug:slug>/", AllowedHostsOriginValidator(AuthMiddlewareStack(InboxFeedConsumer.as_asgi()))),
]
