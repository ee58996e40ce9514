"""ASGI entry point: HTTP goes to Django, websockets to the Channels router."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tandem.settings")
django_asgi_app = get_asgi_application()

from django.conf import settings  # noqa: E402
from django.core.signals import request_finished  # noqa: E402
from django.db import connections  # noqa: E402


def _close_http_request_connections(**_):
    """Under ASGI each HTTP request runs its sync code on a thread of its own (Django's
    ThreadSensitiveContext), and this signal is sent on that thread: give its database
    connections back now (to the process's pool: tandem/webserver.py), or they would
    outlive the thread and wait for the garbage collector."""
    connections.close_all()


request_finished.connect(_close_http_request_connections, dispatch_uid="tandem-close-http-connections")

# A handful of Redis connections whatever the number of sockets (docs/architecture.md):
# the stream reader's, the asyncio pool's, a bounded pool for the sync code, and Celery's
# producers.
from inference.wire.connections import get_redis, limit_sync_connections  # noqa: E402
from tenants import changes  # noqa: E402

limit_sync_connections(settings.TANDEM_WEB_REDIS_SYNC_CONNECTIONS)
changes.use_client(get_redis)
# Celery's producer pool (the submissions' enqueue) is Redis connections too; acquiring
# from it waits for a free one.
# (The tandem package made its Celery app the current one; importing tandem.celery here
# would bring the workers' modules into the web tier's import graph.)
from celery import current_app  # noqa: E402

current_app.conf.broker_pool_limit = settings.TANDEM_WEB_BROKER_CONNECTIONS

if settings.DEBUG:
    # daphne does not serve static files; in development Django's handler does.
    from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler

    django_asgi_app = ASGIStaticFilesHandler(django_asgi_app)

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from tandem.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": URLRouter(websocket_urlpatterns),
    }
)

# Load the tokenizer (quota admission counts tokens) before the first request, so that
# request does not pay for reading it. It is the Rust `tokenizers` library and a Jinja
# chat template: this process never imports torch or transformers (an import-linter
# contract and tests/test_web_tier_is_lean.py hold it to that).
if os.environ.get("TANDEM_WARM_TOKENIZER", "1") == "1":
    from inference.text.tokenizer import get_tokenizer  # noqa: E402

    get_tokenizer()
