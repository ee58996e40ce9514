"""The demo chat page is for development: with DEBUG off (production) only signed-in
staff see it, so it is no public way to chat on a tenant's quota."""

from __future__ import annotations

import pytest

from tests.factories import UserFactory, make_tenant

pytestmark = pytest.mark.django_db


def test_with_debug_off_the_demo_page_is_for_staff_only(client, settings):
    tenant = make_tenant().tenant
    url = f"/demo/{tenant.slug}/"
    settings.DEBUG = True
    assert client.get(url).status_code == 200
    settings.DEBUG = False
    assert client.get(url).status_code == 404
    client.force_login(UserFactory())
    assert client.get(url).status_code == 404
    client.force_login(UserFactory(is_staff=True))
    assert client.get(url).status_code == 200
