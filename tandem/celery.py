"""The Celery app. Queues: `cpu` (validate, retrieve, build prompt, tokenize; and indexing
the tenants' articles, at the lowest priority), and per compute
pool `prefill.<pool>`, `decode.<pool>`, `colocated.<pool>`. Tasks are routed explicitly
by `inference.pipeline.route` (the pool comes from the tenant's allocation), never by name."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tandem.settings")

app = Celery("tandem")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.task_default_queue = "cpu"
app.autodiscover_tasks(["inference", "knowledge"])

# Worker start-up hooks (engine loading per role) are connected on import.
import inference.worker.signals  # noqa: E402,F401
