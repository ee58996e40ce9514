"""Reads for the console and REST: a tenant's endpoints, one endpoint (another tenant's
is not found, like a missing one) and its delivery log."""

from __future__ import annotations

from django.core.exceptions import ValidationError

from tenants.access import NotFound
from tenants.models import Tenant

from .models import Delivery, Endpoint

LOG_LIMIT = 100


def endpoint_list(*, tenant: Tenant) -> list[Endpoint]:
    return list(Endpoint.objects.filter(tenant=tenant))


def endpoint_get(*, tenant: Tenant, endpoint_id) -> Endpoint:
    try:
        return Endpoint.objects.select_related("tenant").get(tenant=tenant, pk=endpoint_id)
    except (Endpoint.DoesNotExist, ValidationError, ValueError, TypeError):  # missing, or not a UUID
        raise NotFound("webhook") from None


def delivery_list(*, endpoint: Endpoint, limit: int = LOG_LIMIT) -> list[Delivery]:
    return list(endpoint.deliveries.select_related("event").order_by("-created_at")[:limit])


def delivery_get(*, endpoint: Endpoint, delivery_id) -> Delivery:
    try:
        return endpoint.deliveries.select_related("event", "endpoint").get(pk=delivery_id)
    except (Delivery.DoesNotExist, ValidationError, ValueError, TypeError):  # missing, or not a UUID
        raise NotFound("delivery") from None
