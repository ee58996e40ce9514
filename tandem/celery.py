"""The Celery app. Queues: `cpu` (validate, retrieve, build prompt, tokenize; and indexing
the tenants' articles, at the lowest priority), and per compute pool `prefill.<pool>`,
`decode.<pool>`, `colocated.<pool>`. Each hop names the queue it sends to
(`inference.wire.broker`; the pool comes from the tenant's allocation, read by
`inference.pipeline.route`): Celery's routing by task name is not used."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tandem.settings")

app = Celery("tandem")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.task_default_queue = "cpu"
app.autodiscover_tasks(["inference", "knowledge"])

# Worker start-up hooks (engine loading per role) are connected on import.
import inference.worker.signals  # noqa: E402,F401
