"""Reading labels, scoped through tenants.access like every read."""

from __future__ import annotations

from collections import defaultdict

from django.db.models import Count

from tenants.access import access_list
from tenants.models import Tenant

from .models import Label


def label_list(*, tenant: Tenant, counts: bool = False) -> list[Label]:
    """The tenant's labels by name; with `counts`, each with `n` conversations carrying it."""
    qs = access_list(Label, tenant=tenant)
    if counts:
        qs = qs.annotate(n=Count("conversations"))
    return list(qs)


def label_by_id(*, tenant: Tenant, label_id) -> Label | None:
    """The tenant's label of that id, or None (a missing, foreign or malformed id)."""
    try:
        pk = int(label_id)
    except (TypeError, ValueError):
        return None
    return access_list(Label, tenant=tenant).filter(pk=pk).first()


def labels_of(conversation_ids) -> dict:
    """{conversation id: [its labels]} for a page of conversations, in one query."""
    out: dict = defaultdict(list)
    rows = Label.conversations.through.objects.filter(conversation_id__in=list(conversation_ids)).select_related("label")
    for row in rows.order_by("label__name"):
        out[row.conversation_id].append(row.label)
    return out
