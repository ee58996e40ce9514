"""Tenant → Conversations: the filtered list, a transcript with what served each reply,
and exports (CSV, JSON) of either."""

from __future__ import annotations

import json

from django.core.paginator import Paginator
from django.http import StreamingHttpResponse
from django.utils import timezone

from tandem.chat.models import Conversation

from .. import selectors
from ..csv_export import csv_lines
from ..forms import ConversationFilterForm
from .base import Obj, render_page, tenant_page

PAGE_SIZE = 50


def _filtered(request, access):
    form = ConversationFilterForm(request.GET or None)
    rows = selectors.conversation_list(tenant=access.tenant, **form.filters())
    return form, rows


@tenant_page(methods=("GET",))
def conversations(request, access):
    form, rows = _filtered(request, access)
    page = Paginator(rows, PAGE_SIZE).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    return render_page(request, "console/conversations.html",
                       {"form": form, "page": page, "query": query.urlencode()},
                       access=access, nav="conversations")


CONVERSATION = {"conversation_id": Obj("conv", Conversation.objects.all(), "conversation")}


@tenant_page(methods=("GET",), objects=CONVERSATION)
def conversation_detail(request, access, conv):
    return render_page(request, "console/conversation.html",
                       {"conversation": conv, "items": selectors.transcript(conv)},
                       access=access, nav="conversations")


def _export(rows, *, fmt: str, name: str):
    stamp = timezone.now().strftime("%Y%m%d-%H%M%S")
    if fmt == "csv":
        response = StreamingHttpResponse(csv_lines(selectors.EXPORT_FIELDS, selectors.export_rows(rows)),
                                         content_type="text/csv; charset=utf-8")
    else:
        def chunks():
            yield "["
            for i, row in enumerate(selectors.export_rows(rows)):
                yield ("," if i else "") + "\n" + json.dumps(row, ensure_ascii=False)
            yield "\n]\n"

        response = StreamingHttpResponse(chunks(), content_type="application/json")
    response["Content-Disposition"] = f'attachment; filename="{name}-{stamp}.{fmt}"'
    return response


@tenant_page(methods=("GET",))
def conversations_export(request, access, fmt):
    _, rows = _filtered(request, access)
    return _export(rows, fmt=fmt, name=f"{access.tenant.slug}-conversations")


@tenant_page(methods=("GET",), objects=CONVERSATION)
def conversation_export(request, access, conv, fmt):
    rows = Conversation.objects.filter(pk=conv.pk)
    return _export(rows, fmt=fmt, name=f"{access.tenant.slug}-conversation-{conv.pk}")
