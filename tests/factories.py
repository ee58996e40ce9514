"""Factories for test data. Tenants are made through the service, as production makes
them, so every tenant has its quota, allocation and keys."""

from __future__ import annotations

import itertools

import factory
from django.contrib.auth import get_user_model

from tenants import services

_counter = itertools.count(1)


def make_tenant(*, slug: str | None = None, origins: list[str] | None = None, **quota) -> services.CreatedTenant:
    slug = slug or f"tenant-{next(_counter)}"
    return services.tenant_create(
        slug=slug, name=slug.title(), allowed_origins=origins or ["http://testserver"], quota=quota or None
    )


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()

    username = factory.Sequence(lambda n: f"user{n}")
    email = factory.LazyAttribute(lambda u: f"{u.username}@example.test")
