"""The daily retention purge through a real Celery worker of the CPU tier: queued once for
a day whatever the number of workers asking (a Redis key per date and database), then run by the
worker, which deletes the tenant's idle conversations."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from devstack.processes import wait_for
from tandem.chat.models import Conversation
from tandem.contacts import tasks
from tandem.contacts.models import RetentionPolicy
from tandem.rounds import round_key
from tests.factories import make_tenant

from .test_contacts import a_conversation

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_purge_is_queued_once_a_day_and_a_cpu_worker_runs_it(platform, redis_client):
    tenant = make_tenant(slug="retention-task").tenant
    RetentionPolicy.objects.create(tenant=tenant, days=7)
    idle = a_conversation(tenant, "an old question", visitor_id="v-old")
    fresh = a_conversation(tenant, "a new question", visitor_id="v-new")
    Conversation.objects.filter(pk=idle.pk).update(updated_at=timezone.now() - timedelta(days=8))
    # A day of its own (the session's workers queued today's when they started).
    day = timezone.now() + timedelta(days=4000)
    redis_client.delete(round_key(tasks._due_round(day)))
    try:
        assert tasks.purge_if_due(day) is True
        assert tasks.purge_if_due(day) is False  # another worker, the same day: nothing more
        wait_for(lambda: RetentionPolicy.objects.filter(tenant=tenant, last_purge_count=1).exists(), timeout=60,
                 what="the CPU worker's retention purge")
    finally:
        redis_client.delete(round_key(tasks._due_round(day)))
    assert not Conversation.objects.filter(pk=idle.pk).exists()
    assert Conversation.objects.filter(pk=fresh.pk).exists()
