"""Request and response shapes of the webhook endpoints (docs/api.md, docs/webhooks.md).
The schema's; values are checked by `tandem.webhooks.services`, which names the field
it refuses."""

from __future__ import annotations

from rest_framework import serializers

from tandem.webhooks.models import EVENT_TYPES, Delivery, Endpoint


def _iso(value):
    return value.isoformat() if value else None


def endpoint_data(e: Endpoint, *, secret: str | None = None) -> dict:
    data = {"id": str(e.pk), "object": "webhook_endpoint", "url": e.url, "events": list(e.events),
            "description": e.description, "enabled": e.enabled, "disabled_reason": e.disabled_reason or None,
            "created_at": _iso(e.created_at)}
    if secret is not None:
        data["secret"] = secret
    return data


def delivery_data(d: Delivery) -> dict:
    return {"id": str(d.pk), "object": "webhook_delivery", "event": d.event_id, "type": d.event.type,
            "status": d.status, "attempts": d.attempts, "response_code": d.response_code,
            "duration_ms": d.duration_ms, "error": d.error or None, "next_attempt_at": _iso(d.next_attempt_at),
            "created_at": _iso(d.created_at)}


class EndpointCreateSerializer(serializers.Serializer):
    url = serializers.URLField(help_text="http(s); resolved before each delivery, public addresses only")
    events = serializers.ListField(child=serializers.ChoiceField(choices=EVENT_TYPES), min_length=1)
    description = serializers.CharField(required=False, allow_blank=True, max_length=200)


class EndpointUpdateSerializer(serializers.Serializer):
    url = serializers.URLField(required=False)
    events = serializers.ListField(child=serializers.ChoiceField(choices=EVENT_TYPES), min_length=1, required=False)
    description = serializers.CharField(required=False, allow_blank=True, max_length=200)
    enabled = serializers.BooleanField(required=False)


class EndpointSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    object = serializers.CharField()
    url = serializers.CharField()
    events = serializers.ListField(child=serializers.CharField())
    description = serializers.CharField()
    enabled = serializers.BooleanField()
    disabled_reason = serializers.CharField(allow_null=True)
    created_at = serializers.DateTimeField()
    secret = serializers.CharField(required=False, help_text="only in the answer to create: store it now")


class EndpointListSerializer(serializers.Serializer):
    object = serializers.CharField()
    data = EndpointSerializer(many=True)


class DeliverySerializer(serializers.Serializer):
    id = serializers.UUIDField()
    object = serializers.CharField()
    event = serializers.CharField()
    type = serializers.CharField()
    status = serializers.ChoiceField(choices=Delivery.Status.values)
    attempts = serializers.IntegerField()
    response_code = serializers.IntegerField(allow_null=True)
    duration_ms = serializers.IntegerField(allow_null=True)
    error = serializers.CharField(allow_null=True)
    next_attempt_at = serializers.DateTimeField(allow_null=True)
    created_at = serializers.DateTimeField()


class DeliveryListSerializer(serializers.Serializer):
    object = serializers.CharField()
    data = DeliverySerializer(many=True)
