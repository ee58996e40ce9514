"""Celery entry points of the knowledge app: thin, taking ids, idempotent. They run on
the `cpu` queue (sent there by `services`, at the lowest priority, by task name: nothing
imports this module back)."""

from __future__ import annotations

from celery import shared_task

from . import services


@shared_task(name=services.INDEX_TASK, acks_late=True, ignore_result=True)
def index_article(article_id: str) -> None:
    services.article_index(article_id=article_id)


# Syncs' steps and their schedule register with the app that discovers this module.
from . import sync_tasks  # noqa: E402,F401
