"""The IDOR sweep: every console URL pattern that carries an id is asked, by an owner
of tenant A (the strongest tenant role), for tenant B's object, with every method; the
answer is 404, exactly as for a missing object. The patterns come from the resolver, so
a page added later is swept without editing this test; an id this test cannot fill in
fails it until it learns how."""

from __future__ import annotations

import uuid

import pytest
from django.urls import URLPattern, URLResolver, get_resolver

from knowledge.models import Article, Source, SourceFile
from tandem.chat.models import OfflineMessage
from tandem.webhooks import services as webhooks
from tenants import invitations
from tenants.models import ApiKey, ComputePool, Invitation, Membership
from tests.actions.helpers import action_ids
from tests.evals.helpers import eval_ids

pytestmark = pytest.mark.django_db


def console_patterns():
    """(name, route, parameter names) of every URL in the console's namespace."""
    out = []

    def walk(patterns, prefix, namespace):
        for p in patterns:
            if isinstance(p, URLResolver):
                walk(p.url_patterns, prefix + str(p.pattern), p.namespace or namespace)
            elif isinstance(p, URLPattern) and namespace == "console":
                out.append((p.name, prefix + str(p.pattern), list(p.pattern.converters)))

    walk(get_resolver().url_patterns, "", None)
    return out


def test_the_sweep_sees_the_console_and_its_ids():
    patterns = console_patterns()
    params = {name for _, _, names in patterns for name in names}
    assert len(patterns) > 20
    assert {"slug", "key_id", "membership_id", "conversation_id", "pool_id", "article_id", "offline_id",
            "invitation_id", "token"} <= params
    names = {name for name, _, _ in patterns}
    assert {"inbox_conversation", "inbox_claim", "inbox_reply", "inbox_note", "inbox_resolve"} <= names
    assert {"knowledge", "article_edit", "article_delete", "assistant_preview", "identity_secret_rotate"} <= names


def article_of(tenant, title: str = "Returns") -> Article:
    """An article row as the knowledge services leave it (indexing is not the point here)."""
    return Article.objects.create(tenant=tenant, title=title, body="Send it back within 30 days.",
                                  text="Send it back within 30 days.")


def b_source(b) -> Source:
    return Source.objects.filter(tenant=b).first() or Source.objects.create(tenant=b, kind="files", name="B's files")


def other_tenants_values(world) -> dict[str, list[dict]]:
    """For each id a path can carry: the ways to point at tenant B's object while signed
    in as A's owner (B's own slug, or A's slug with B's object)."""
    b = world.b.tenant
    return {
        "slug": b.slug,
        "key_id": ApiKey.objects.filter(tenant=b).first().pk,
        "membership_id": Membership.objects.filter(tenant=b).first().pk,
        "conversation_id": world.conv_b.pk,
        "pool_id": ComputePool.objects.first().pk,  # operators' only: no tenant's at all
        "article_id": (Article.objects.filter(tenant=b).first() or article_of(b)).pk,
        "offline_id": (OfflineMessage.objects.filter(tenant=b).first() or OfflineMessage.objects.create(
            tenant=b, conversation=world.conv_b, email="b@example.test", text="hello")).pk,
        # B's invitation to someone else: neither A's owner's to revoke nor theirs to answer.
        "invitation_id": (Invitation.objects.filter(tenant=b).first() or invitations.invitation_create(
            tenant=b, identifier="someone.else@example.test", role="viewer")[0]).pk,
        "token": "not-an-invitation-token",  # a link token: only its holder has it
        "source_id": b_source(b).pk,
        "file_id": (SourceFile.objects.filter(source__tenant=b).first() or SourceFile.objects.create(
            source=b_source(b), name="b.txt", data=b"B's", size=3, sha256="0" * 64)).pk,
        "endpoint_id": b_delivery(b).endpoint_id,
        "delivery_id": b_delivery(b).pk,
        "saved_reply_id": b_saved_reply(b).pk,
        **action_ids(b, world.conv_b),  # B's action and a call of it awaiting approval
        "label_id": b_label(b).pk,
        **eval_ids(b, world.owner_b),  # B's case, run and trial reply
    }


def b_saved_reply(b):
    """B's saved reply, made once."""
    from tandem.saved_replies import services
    from tandem.saved_replies.models import SavedReply

    return SavedReply.objects.filter(tenant=b).first() or services.saved_reply_create(
        tenant=b, shortcut="b-only", text="B's")


def b_label(b):
    """B's inbox label, made once."""
    from tandem.labels import services
    from tandem.labels.models import Label

    return Label.objects.filter(tenant=b).first() or services.label_create(tenant=b, name="B only")


def b_delivery(b):
    """B's webhook endpoint's one delivery (a test event), made once."""
    from tandem.webhooks.models import Delivery

    found = Delivery.objects.filter(endpoint__tenant=b).first()
    if found is None:
        endpoint = webhooks.endpoint_create(tenant=b, url="https://hooks.example.com/", events=["reply.failed"])
        found = webhooks.endpoint_test(endpoint=endpoint.endpoint)
    return found


def urls_for_b(world, route: str, names: list[str]) -> list[str]:
    b_values = other_tenants_values(world)
    unknown = set(names) - set(b_values)
    assert not unknown, f"the IDOR sweep does not know how to fill {unknown} in {route}: teach it"

    def fill(values):
        path = route
        for name in names:
            path = path.replace(f"<{_converter(route, name)}{name}>", str(values[name]))
        assert "<" not in path, path
        return "/" + path

    urls = [fill(b_values)]
    if "slug" in names and len(names) > 1:
        urls.append(fill({**b_values, "slug": world.a.tenant.slug}))  # A's tenant, B's object
    return urls


def _converter(route: str, name: str) -> str:
    start = route.index(name + ">")
    opening = route.rindex("<", 0, start)
    return route[opening + 1:start]


@pytest.mark.parametrize("role", ["owner", "agent"])
def test_an_owner_or_agent_of_one_tenant_gets_404_for_every_object_of_another(client, world, role):
    if role == "agent":  # the inbox's own role: B's conversations are missing to it as well
        agent = world.viewer_a
        Membership.objects.filter(user=agent).update(role=Membership.Role.AGENT)
        client.force_login(agent)
    else:
        client.force_login(world.owner_a)
    swept = 0
    for name, route, names in console_patterns():
        if not names:
            continue
        for url in urls_for_b(world, route, names):
            for method in ("get", "post"):
                response = getattr(client, method)(url)
                assert response.status_code == 404, (name, method, url, response.status_code)
                swept += 1
    assert swept >= 40


def test_a_missing_object_is_the_same_404(client, world):
    client.force_login(world.owner_a)
    a = world.a.tenant.slug
    for url in [f"/console/t/{a}/keys/999999/revoke/", f"/console/t/{a}/members/999999/role/",
                f"/console/t/{a}/conversations/{uuid.uuid4()}/", f"/console/t/{a}/knowledge/{uuid.uuid4()}/",
                f"/console/t/{a}/knowledge/{uuid.uuid4()}/delete/", "/console/t/no-such-tenant/quotas/"]:
        assert client.post(url).status_code == 404, url


def test_the_same_urls_work_for_the_tenants_own_objects(client, world):
    """The sweep's 404s are about tenancy, not broken URLs: A's owner reaches A's."""
    client.force_login(world.owner_a)
    a = world.a.tenant
    assert client.get(f"/console/t/{a.slug}/conversations/{world.conv_a.pk}/").status_code == 200
    key = ApiKey.objects.filter(tenant=a, kind="secret").first()
    assert client.post(f"/console/t/{a.slug}/keys/{key.pk}/revoke/").status_code == 302
    key.refresh_from_db()
    assert key.revoked_at is not None
    article = article_of(a)
    assert client.get(f"/console/t/{a.slug}/knowledge/{article.pk}/").status_code == 200
    assert client.post(f"/console/t/{a.slug}/knowledge/{article.pk}/delete/").status_code == 302
    assert not Article.objects.filter(pk=article.pk).exists()
