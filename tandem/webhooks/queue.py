"""Handing deliveries to the CPU tier's `webhooks` queue (its own, so a slow receiver
never holds up a chat's prompt preparation on the `cpu` queue)."""

from __future__ import annotations

import logging

QUEUE = "webhooks"
TASK = "tandem.webhooks.deliver"
log = logging.getLogger(__name__)


def deliveries_queue(delivery_ids: list[str]) -> None:
    from inference.wire import broker

    for delivery_id in delivery_ids:
        try:
            broker.send(TASK, [delivery_id], queue=QUEUE, priority=broker.broker_priority(0))
        except Exception:
            # The broker is away: the schedule queues it again once its lease has passed.
            log.exception("could not queue webhook delivery %s", delivery_id)


def worker_argv(*, concurrency: int = 8) -> list[str]:
    """The webhooks worker's command line (run with TANDEM_ROLE=cpu: a CPU-tier process):
    threads, since a delivery mostly waits on the network."""
    import os
    import sys

    return [sys.executable, "-m", "celery", "-A", "tandem", "worker", "-Q", QUEUE, "-P", "threads",
            "-c", str(concurrency), "-n", "webhooks@%h", "--without-gossip", "--without-mingle",
            "-l", os.environ.get("LOG_LEVEL", "INFO")]
