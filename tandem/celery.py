"""The Celery app. Queues: `cpu` (validate, retrieve, build prompt, tokenize; and indexing
the tenants' articles, at the lowest priority), and per compute pool `prefill.<pool>`,
`decode.<pool>`, `colocated.<pool>`. Each hop names the queue it sends to
(`inference.wire.broker`; the pool comes from the tenant's allocation, read by
`inference.pipeline.route`): Celery's routing by task name is not used."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tandem.settings")

# Workers outlive a Redis restart (docs/deploy.md). Kombu 5.7's Redis transport crashes
# a worker whose connection was lost while it had tasks delivered: closing the old channel
# pushes those tasks back onto their queues, and acknowledging one that finished after
# the reconnection goes through the old channel; both build a Redis client from the
# closed connection (AttributeError: an "unrecoverable error"). So: no push back (a
# running task's request is owned, so a copy would do nothing, and what a dead worker
# left unacknowledged comes back through the watchers or the visibility timeout), and a
# closed channel raises a connection error, which Celery logs and survives (the task's
# message then comes back after the visibility timeout and finds its stage done).
import redis as _redis  # noqa: E402
from kombu.transport import redis as _kombu_redis  # noqa: E402

_kombu_redis.Channel.do_restore = False
_connparams = _kombu_redis.Channel._connparams


def _connparams_unless_closed(self, *args, **kwargs):
    if self.connection is None or self.connection.client is None:
        raise _redis.exceptions.ConnectionError("this channel's broker connection was closed")
    return _connparams(self, *args, **kwargs)


_kombu_redis.Channel._connparams = _connparams_unless_closed

app = Celery("tandem")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.task_default_queue = "cpu"
if os.environ.get("TANDEM_ROLE", "cpu") == "cpu":
    # The CPU tier (a solo pool, one task at a time) keeps its database connection from
    # one task to the next: opening one costs milliseconds on the way to the first token,
    # and its retrieval statement stays prepared. Celery's Django fixup closes it every
    # this many tasks (the model tiers' thread pools close theirs after every task);
    # before each, CONN_MAX_AGE and the health check apply (inference.worker.signals).
    app.conf.CELERY_DB_REUSE_MAX = 10_000
app.autodiscover_tasks(["inference", "knowledge", "tandem.evals", "tandem.feedback", "tandem.webhooks", "tandem.contacts"])

# Worker start-up hooks (engine loading per role) are connected on import.
import inference.worker.signals  # noqa: E402,F401
