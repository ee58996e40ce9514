"""The tenant change counter: what tells open websockets to re-read their key and tenant."""

from __future__ import annotations

import pytest
from django.db import transaction

from tenants import changes
from tenants.models import Tenant
from tenants.services import api_key_revoke
from tests.factories import make_tenant

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_committed_save_counts_once_the_transaction_commits():
    created = make_tenant()
    before = changes.version()
    with transaction.atomic():
        quota = created.tenant.quota
        quota.requests_per_minute = 7
        quota.save()
        assert changes.version() == before  # not before the commit: a reader would re-read the old row
    assert changes.version() == before + 1


def test_a_rolled_back_change_is_not_counted():
    created = make_tenant()
    before = changes.version()
    with pytest.raises(RuntimeError):
        with transaction.atomic():
            Tenant.objects.get(pk=created.tenant.pk).save()
            raise RuntimeError("rolled back")
    assert changes.version() == before


def test_revoking_a_key_and_moving_an_allocation_count():
    created = make_tenant()
    before = changes.version()
    api_key_revoke(api_key=created.widget_key.api_key)
    allocation = created.tenant.allocation
    allocation.max_decode_slots = 3
    allocation.save()
    assert changes.version() == before + 2
