"""Handing calls to the CPU tier's `actions` queue: a queue of its own (as webhooks have
theirs), so an endpoint that takes its whole timeout never holds up a chat's prompt
preparation on the `cpu` queue, and never a model worker."""

from __future__ import annotations

import logging

QUEUE = "actions"
TASK = "tandem.actions.run"
log = logging.getLogger(__name__)


def call_queue(call_id: str) -> None:
    from inference.wire import broker

    try:
        broker.send(TASK, [call_id], queue=QUEUE, priority=broker.broker_priority(0))
    except Exception:
        log.exception("could not queue action call %s", call_id)


def worker_argv(*, concurrency: int = 4) -> list[str]:
    """The actions worker's command line (run with TANDEM_ROLE=cpu: a CPU-tier process):
    threads, since a call mostly waits on the network."""
    import os
    import sys

    return [sys.executable, "-m", "celery", "-A", "tandem", "worker", "-Q", QUEUE, "-I", "tandem.actions.tasks",
            "-P", "threads", "-c", str(concurrency), "-n", "actions@%h", "--without-gossip", "--without-mingle",
            "-l", os.environ.get("LOG_LEVEL", "INFO")]
