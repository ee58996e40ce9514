"""`python -m tandem.webhooks`: the CPU tier's webhooks worker, as the image's `webhooks-worker`
starts it (docker/entrypoint.sh) and `make run` does (devstack): Celery on the queue of
its own, with the command line queue.py builds. TANDEM_WORKER_CONCURRENCY threads (8)."""

from __future__ import annotations

import os

from .queue import worker_argv

argv = worker_argv(concurrency=int(os.environ.get("TANDEM_WORKER_CONCURRENCY") or 8))
os.execv(argv[0], argv)
