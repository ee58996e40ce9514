"""A retrieval asked of the CPU tier and waited for: the console's Test retrieval page.

Questions are embedded on the CPU tier only (the encoder costs a process about 240 MB,
docs/knowledge.md), so the web process does not retrieve itself: `probe` sends the
Celery task `knowledge.retrieval_probe` to the `cpu` queue with a reply key of its own
and waits on that key (BLPOP); the task runs `answer`, which pushes the hits there.
Nothing answers in time (no CPU worker, or all of them busy): None, and the task, once
expired, is dropped by the worker that takes it."""

from __future__ import annotations

import dataclasses
import functools
import json
import uuid

import redis
from celery import current_app
from django.conf import settings

from . import selectors
from .search import Hit

PROBE_TASK = "knowledge.retrieval_probe"
PROBE_QUEUE = "cpu"
KEY_PREFIX = "tandem:knowledge:probe:"
# An answer nobody waits for any more (it came after the wait) goes with its key.
REPLY_TTL_S = 60
# Each waiting page holds a connection for its whole wait: a few, and a page beyond them
# waits for one instead of the web process opening more.
CONNECTIONS = 2


@functools.cache
def _client() -> redis.Redis:
    wait = settings.TANDEM_KNOWLEDGE_PROBE_WAIT_S
    # The socket's read timeout outlasts BLPOP's own (redis-py's default, 5 s, would cut a
    # longer wait with a TimeoutError).
    pool = redis.BlockingConnectionPool.from_url(settings.REDIS_URL, max_connections=CONNECTIONS, timeout=wait,
                                                 socket_timeout=wait + 5)
    return redis.Redis(connection_pool=pool)


def probe(*, tenant_id: int, question: str, k: int, language: str, mode: str) -> list[Hit] | None:
    """The tenant's top `k` chunks for `question` (no minimum score), best first, as a
    CPU worker retrieves them; None when none answered within
    settings.TANDEM_KNOWLEDGE_PROBE_WAIT_S."""
    wait = settings.TANDEM_KNOWLEDGE_PROBE_WAIT_S
    reply_to = f"{KEY_PREFIX}{uuid.uuid4().hex}"
    # The default priority: ahead of indexing (an operator is waiting), level with the
    # visitors of a tenant at the default allocation priority, behind those above it.
    current_app.send_task(PROBE_TASK, kwargs={"reply_to": reply_to, "tenant_id": tenant_id, "question": question,
                                              "k": k, "language": language, "mode": mode},
                          queue=PROBE_QUEUE, priority=current_app.conf.task_default_priority, expires=wait)
    try:
        popped = _client().blpop([reply_to], timeout=wait)
    except redis.exceptions.ConnectionError:  # no free connection within the wait either
        return None
    if popped is None:
        return None
    return [Hit(**h) for h in json.loads(popped[1])]


def answer(*, reply_to: str, tenant_id: int, question: str, k: int, language: str, mode: str) -> None:
    """Retrieve for a probe (the CPU worker's task) and push the hits to `reply_to`."""
    hits = selectors.retrieve(tenant_id=tenant_id, message=question, k=k, min_score=0.0, language=language,
                              mode=mode)
    body = json.dumps([dataclasses.asdict(h) for h in hits])
    pipe = _client().pipeline(transaction=True)
    pipe.rpush(reply_to, body)
    pipe.expire(reply_to, REPLY_TTL_S)
    pipe.execute()
