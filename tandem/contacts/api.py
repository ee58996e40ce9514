"""Contacts over REST, with a secret key (the tenant's server-side key):

- `GET /api/v1/contacts/<contact id>/`: who they are and how many conversations;
- `GET /api/v1/contacts/<contact id>/export/`: everything of theirs (docs/privacy.md);
- `DELETE /api/v1/contacts/<contact id>/`: delete it all (usage records stay, with
  nothing of the person), answered `{"id", "object": "contact", "deleted": true, "counts"}`.

A contact id is "user:<the site's user id>" or "visitor:<widget visitor id>"; one with no
conversation in the key's tenant (or another tenant's) is a 404 `contact_not_found`.
Thin: the work is in tandem.contacts.services; the audit log names the key."""

from __future__ import annotations

from dataclasses import dataclass

from django.http import JsonResponse
from drf_spectacular.utils import extend_schema
from rest_framework import serializers

from tandem.api.base import AsyncAPIView
from tandem.api.errors import ApiError
from tandem.api.openai_views import ERRORS
from tandem.db_pool import pooled_sync_to_async
from tenants.access import NotFound

from . import services
from .identity import contact_get

TAGS = ["contacts"]


@dataclass(frozen=True)
class KeyActor:
    """The audit log's actor for a change made with an API key (no person behind it)."""

    prefix: str
    user: None = None
    source: str = "api"

    @property
    def name(self) -> str:
        return f"API key {self.prefix}…"


class ContactSerializer(serializers.Serializer):
    id = serializers.CharField()
    object = serializers.CharField(default="contact")
    kind = serializers.CharField(help_text="user or visitor")
    conversations = serializers.IntegerField()
    names = serializers.ListField(child=serializers.CharField())
    emails = serializers.ListField(child=serializers.CharField())


class ContactExportSerializer(serializers.Serializer):
    format = serializers.CharField()
    exported_at = serializers.DateTimeField()
    tenant = serializers.CharField()
    contact = serializers.DictField()
    conversations = serializers.ListField(child=serializers.DictField())


class ContactDeletedSerializer(serializers.Serializer):
    id = serializers.CharField()
    object = serializers.CharField(default="contact")
    deleted = serializers.BooleanField()
    counts = serializers.DictField(child=serializers.IntegerField())


def _call(fn):
    try:
        return fn()
    except NotFound as exc:
        raise ApiError(404, "No such contact in this tenant.", code=exc.code, param="contact_id") from None


class ContactDetailView(AsyncAPIView):
    @extend_schema(operation_id="getContact", responses={200: ContactSerializer, **ERRORS}, tags=TAGS)
    def get(self, request, contact_id):
        raise NotImplementedError

    @extend_schema(operation_id="deleteContact", responses={200: ContactDeletedSerializer, **ERRORS}, tags=TAGS,
                   description="Delete the contact's conversations, messages, ratings, offline messages, "
                               "attachments and identity. Usage records stay, without personal data. Audited.")
    def delete(self, request, contact_id):
        raise NotImplementedError

    async def get_async(self, request, contact_id):
        api_key = await self.authenticate(request)

        def read():
            contact, convs = contact_get(tenant=api_key.tenant, contact_id=contact_id)
            rows = list(convs.values_list("user_name", "user_email"))
            return {"id": contact.id, "object": "contact", "kind": contact.kind, "conversations": len(rows),
                    "names": sorted({n for n, _ in rows if n}), "emails": sorted({e for _, e in rows if e})}

        return JsonResponse(await pooled_sync_to_async(_call)(read))

    async def delete_async(self, request, contact_id):
        api_key = await self.authenticate(request)

        def delete():
            erased = services.contact_delete(tenant=api_key.tenant, contact_id=contact_id,
                                             actor=KeyActor(api_key.prefix))
            return {"id": contact_id, "object": "contact", "deleted": True, "counts": erased.as_dict()}

        return JsonResponse(await pooled_sync_to_async(_call)(delete))


class ContactExportView(AsyncAPIView):
    @extend_schema(operation_id="exportContact", tags=TAGS, responses={200: ContactExportSerializer, **ERRORS},
                   description="The contact's data (format tandem.contact_export.v1, docs/privacy.md); "
                               "attachments carry their bytes in base64. Audited.")
    def get(self, request, contact_id):
        raise NotImplementedError

    async def get_async(self, request, contact_id):
        api_key = await self.authenticate(request)

        def export():
            return services.contact_export_take(tenant=api_key.tenant, contact_id=contact_id,
                                                actor=KeyActor(api_key.prefix))

        data = await pooled_sync_to_async(_call)(export)
        response = JsonResponse(data, json_dumps_params={"ensure_ascii": False})
        response["Content-Disposition"] = 'attachment; filename="contact-export.json"'
        response["Cache-Control"] = "no-store"
        return response
