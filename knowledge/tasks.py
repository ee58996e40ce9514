"""Celery entry points of the knowledge app: thin, taking ids, idempotent. They run on
the `cpu` queue (sent there by `services`, at the lowest priority, and by `probe`, by
task name: nothing imports this module back)."""

from __future__ import annotations

from celery import shared_task

from . import probe, services


@shared_task(name=services.INDEX_TASK, acks_late=True, ignore_result=True)
def index_article(article_id: str) -> None:
    services.article_index(article_id=article_id)


# A lost probe is a page that said nobody answered: no redelivery, and its answer goes to
# the reply key, not to a result backend.
@shared_task(name=probe.PROBE_TASK, acks_late=False, ignore_result=True)
def retrieval_probe(*, reply_to: str, tenant_id: int, question: str, k: int, language: str, mode: str) -> None:
    probe.answer(reply_to=reply_to, tenant_id=tenant_id, question=question, k=k, language=language, mode=mode)


# Syncs' steps and their schedule register with the app that discovers this module.
from . import sync_tasks  # noqa: E402,F401
