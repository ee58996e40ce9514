"""The getting-started checklist of a tenant's overview: five steps, each done or not
from facts already stored (nothing is ticked by hand), in the order a new tenant takes
them. Five small reads, each an EXISTS or a row by primary key."""

from __future__ import annotations

from dataclasses import dataclass

from django.urls import reverse

from knowledge.models import Article
from tandem.chat.models import Message
from tenants.models import ApiKey, Invitation, Membership, Tenant

from .models import TenantSetup


@dataclass(frozen=True)
class Step:
    key: str
    title: str
    done: bool
    detail: str  # what was done, or what to do
    url: str  # where to do it
    action: str  # the link's text


def setup_for(tenant: Tenant) -> TenantSetup:
    return TenantSetup.objects.filter(tenant=tenant).first() or TenantSetup(tenant=tenant)


def checklist(tenant: Tenant) -> list[Step]:
    setup = setup_for(tenant)
    slug = tenant.slug
    install = reverse("console:install", args=[slug])
    connected = setup.widget_connected_at is not None
    origins = sorted({o for key in ApiKey.objects.filter(tenant=tenant, kind=ApiKey.Kind.WIDGET,
                                                         revoked_at__isnull=True).only("allowed_origins")
                      for o in key.allowed_origins})
    articles = Article.objects.filter(tenant=tenant, status=Article.Status.INDEXED).count()
    answered = Message.objects.filter(conversation__tenant=tenant, role=Message.Role.ASSISTANT,
                                      status=Message.Status.DONE).exists()
    invited = (Invitation.objects.filter(tenant=tenant).exclude(status=Invitation.Status.REVOKED).exists()
               or Membership.objects.filter(tenant=tenant).count() > 1)
    copied = setup.snippet_copied_at is not None or connected
    if connected:
        origin_detail = f"The widget connected from {setup.widget_origin} on {setup.widget_connected_at:%Y-%m-%d %H:%M} UTC."
    elif origins:
        origin_detail = (f"Allowed: {', '.join(origins)}. This turns green when the widget first connects "
                         f"from one of them.")
    else:
        origin_detail = "List the address of the site the snippet goes on (e.g. https://shop.example.com)."
    return [
        Step("snippet", "Copy the embed snippet", copied,
             "Copied." if copied else "One script tag, pasted before </body> on every page of your site.",
             install, "Install"),
        Step("origin", "Allow your site's origin", connected, origin_detail, install + "#origins", "Allowed origins"),
        Step("articles", "Add articles", articles > 0,
             f"{articles} article{'s' if articles != 1 else ''} indexed." if articles
             else "The assistant answers from your help centre's articles.",
             reverse("console:knowledge", args=[slug]), "Knowledge"),
        Step("assistant", "Try the assistant", answered,
             "The assistant has answered." if answered
             else "Ask it a question a customer would ask, and check the sources it cites.",
             reverse("console:assistant", args=[slug]), "Assistant"),
        Step("teammate", "Invite a teammate", invited,
             "Invited." if invited else "Agents answer the conversations the assistant hands over.",
             reverse("console:members", args=[slug]), "Team"),
    ]
