"""The last-owner rule holds when two owners demote or remove each other at the same
moment (issue 27, finding 7), on PostgreSQL: two threads, each with its own database
connection and transaction, each past its check before either commits."""

from __future__ import annotations

import threading

import pytest
from django.core.exceptions import ValidationError
from django.db import connection, transaction

from tenants import services
from tenants.models import Membership
from tests.factories import UserFactory, make_tenant

pytestmark = pytest.mark.django_db(transaction=True)


def at_the_same_moment(*actions) -> list:
    """Run each action in its own thread and transaction; each calls `go` after its
    service call, before its commit, and they commit together from there. One that is
    still waiting for a lock the other holds never reaches `go`: after a while the other
    commits alone. Their results, in order (an exception raised is its result)."""
    barrier, results = threading.Barrier(len(actions)), [None] * len(actions)

    def go():
        try:
            barrier.wait(timeout=2)
        except threading.BrokenBarrierError:
            pass  # the other is waiting for this one's locks: commit first

    def run(i, action):
        try:
            with transaction.atomic():
                results[i] = action()
                go()
        except Exception as exc:  # noqa: BLE001 - the caller asserts on it
            results[i] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i, a)) for i, a in enumerate(actions)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def _two_owners():
    tenant = make_tenant().tenant
    return [Membership.objects.create(tenant=tenant, user=UserFactory(), role="owner") for _ in range(2)]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="SQLite serialises writes: no race to test")
@pytest.mark.parametrize("change", ["demote", "remove"])
def test_two_owners_demoting_or_removing_each_other_at_once_leave_one_owner(change):
    a, b = _two_owners()

    def act(membership):
        if change == "demote":
            return lambda: services.member_set_role(membership=membership, role="admin")
        return lambda: services.member_remove(membership=membership)

    results = at_the_same_moment(act(b), act(a))
    refused = [r for r in results if isinstance(r, ValidationError)]
    assert len(refused) == 1 and "at least one owner" in str(refused[0])
    assert Membership.objects.filter(tenant=a.tenant, role="owner").count() == 1
