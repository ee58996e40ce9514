"""Nobody becomes a member of a tenant without saying yes, and inviting tells nobody
whether an account exists (issue 27, finding 5): an owner invites; the person accepts
from their own session or the link (a new person sets a password there); invitations
expire, can be revoked, and are audited."""

from __future__ import annotations

import re
from datetime import timedelta
from urllib.parse import urlsplit

import pytest
from django.core import mail
from django.utils import timezone

from tenants.models import AuditLog, Invitation, Membership
from tests.console.conftest import PASSWORD, user

pytestmark = pytest.mark.django_db
MEMBERS = "/console/t/alpha/members/"


def _invite(client, identifier: str, role: str = "viewer"):
    return client.post(MEMBERS, {"user": identifier, "role": role})


def _link(response) -> str:
    """The link's path, from the one page that shows it."""
    return urlsplit(re.search(r'id="invitation-link">(https?://[^<]+)<', response.content.decode()).group(1)).path


def _shown(response, identifier: str) -> str:
    """What the owner is told (or the link page shows), less what differs by design: the
    name, the link, the CSRF token and the expiry time."""
    html = response.content.decode()
    if 'id="invited"' in html:  # the members page: its answer to this invitation
        html = html[html.index('id="invited"'):html.index('<div class="table-wrap">', html.index('id="invited"'))]
    html = html.replace(identifier, "<who>")
    html = re.sub(r"/console/invite/[^<\"]+", "<link>", html)
    html = re.sub(r'name="csrfmiddlewaretoken" value="[^"]+"', "", html)
    html = re.sub(r'"X-CSRFToken": "[^"]+"', "", html)
    html = re.sub(r"\d{4}-\d\d-\d\d \d\d:\d\d", "<time>", html)
    return re.sub(r'id="invitation-\d+"', "", html)


def test_an_owner_cannot_make_another_tenants_owner_or_the_operator_a_member_without_their_yes(client, world):
    client.force_login(world.owner_a)
    for person in (world.owner_b, world.staff):
        assert _invite(client, person.username, "admin").status_code == 201
        assert not Membership.objects.filter(tenant=world.a.tenant, user=person).exists()
    # Their own session shows the invitation; only their Accept makes them members.
    client.force_login(world.owner_b)
    page = client.get("/console/invitations/")
    assert "Alpha" in page.content.decode() or "alpha" in page.content.decode()
    invitation = Invitation.objects.get(tenant=world.a.tenant, identifier=world.owner_b.username)
    assert client.post(f"/console/invitations/{invitation.pk}/decline/").status_code == 302
    assert not Membership.objects.filter(tenant=world.a.tenant, user=world.owner_b).exists()
    # Someone else cannot answer it for them.
    staff_invitation = Invitation.objects.get(tenant=world.a.tenant, identifier=world.staff.username)
    assert client.post(f"/console/invitations/{staff_invitation.pk}/accept/").status_code == 404
    client.force_login(world.staff)
    assert client.post(f"/console/invitations/{staff_invitation.pk}/accept/").status_code == 302
    assert Membership.objects.get(tenant=world.a.tenant, user=world.staff).role == "admin"


def test_the_owners_answer_and_the_email_are_the_same_whether_or_not_the_account_exists(
        client, world, django_capture_on_commit_callbacks):
    user(username="existing-person", email="existing@example.test")
    client.force_login(world.owner_a)
    answers = {}
    for identifier in ("existing-person", "no-such-person", "existing@example.test", "nobody@example.test"):
        with django_capture_on_commit_callbacks(execute=True):  # the e-mail goes after the commit
            response = _invite(client, identifier)
        answers[identifier] = (response.status_code, _shown(response, identifier))
    assert answers["existing-person"] == answers["no-such-person"]
    assert answers["existing@example.test"] == answers["nobody@example.test"]
    assert answers["existing-person"][0] == 201
    # Both addresses get the same message (less the link), whatever is behind them.
    sent = {m.to[0]: re.sub(r"/console/invite/\S+", "<link>", m.body) for m in mail.outbox}
    assert set(sent) == {"existing@example.test", "nobody@example.test"}
    assert sent["existing@example.test"] == sent["nobody@example.test"]
    # The anonymous link page is the same too: sign in, or create an account.
    client.logout()
    pages = [_shown(client.get(_link_of(identifier)), identifier)
             for identifier in ("existing@example.test", "nobody@example.test")]
    assert pages[0] == pages[1] and "Sign in to accept" in pages[0] and "Create account and accept" in pages[0]


def _link_of(identifier: str) -> str:
    body = next(m.body for m in mail.outbox if m.to == [identifier])
    return re.search(r"https?://\S+(/console/invite/\S+)", body).group(1)


def test_a_new_person_accepts_through_the_link_by_setting_a_password_and_the_link_then_stops_working(client, world):
    client.force_login(world.owner_a)
    link = _link(_invite(client, "newcomer@example.test", "agent"))
    client.logout()
    weak = client.post(link, {"username": "newcomer", "password1": "123", "password2": "123"})
    assert weak.status_code == 400 and 'class="errorlist"' in weak.content.decode()
    joined = client.post(link, {"username": "newcomer", "password1": PASSWORD, "password2": PASSWORD})
    assert joined.status_code == 302 and joined["Location"] == "/console/t/alpha/"
    m = Membership.objects.get(tenant=world.a.tenant, user__username="newcomer")
    assert m.role == "agent" and m.user.check_password(PASSWORD)
    assert m.user.email == ""  # the link proves nothing about the address: the owner saw it too
    assert client.get("/console/t/alpha/").status_code == 200  # signed in as the new person
    client.logout()
    used = client.get(link)
    assert used.status_code == 404 and "not valid" in used.content.decode()
    assert client.post(link, {"username": "another", "password1": PASSWORD, "password2": PASSWORD}).status_code == 404


def test_an_existing_person_signs_in_from_the_link_and_accepts_as_themselves(client, world):
    client.force_login(world.owner_a)
    link = _link(_invite(client, world.owner_b.username, "viewer"))
    client.logout()
    page = client.get(link).content.decode()
    assert f'/console/login/?next={link}' in page
    client.force_login(world.owner_b)
    assert f"Accept as {world.owner_b.username}" in client.get(link).content.decode()
    assert client.post(link).status_code == 302
    assert Membership.objects.get(tenant=world.a.tenant, user=world.owner_b).role == "viewer"


def test_revoked_or_expired_invitations_cannot_be_accepted_and_every_step_is_audited(client, world):
    client.force_login(world.owner_a)
    revoked_link = _link(_invite(client, world.owner_b.username))
    revoked = Invitation.objects.get(tenant=world.a.tenant, identifier=world.owner_b.username)
    assert client.post(f"{MEMBERS}invitations/{revoked.pk}/revoke/").status_code == 302
    expired_link = _link(_invite(client, "late@example.test"))
    Invitation.objects.filter(identifier="late@example.test").update(expires_at=timezone.now() - timedelta(seconds=1))
    members_page = client.get(MEMBERS).content.decode()
    assert "late@example.test" not in members_page and "No pending invitations" in members_page
    client.force_login(world.owner_b)
    assert world.a.tenant.name not in client.get("/console/invitations/").content.decode()
    assert client.post(f"/console/invitations/{revoked.pk}/accept/").status_code == 404
    for link in (revoked_link, expired_link):
        assert client.post(link).status_code == 404
    assert not Membership.objects.filter(tenant=world.a.tenant, user=world.owner_b).exists()
    # Invited, revoked: each in the tenant's audit log, by whom.
    log = AuditLog.objects.filter(tenant=world.a.tenant, entity="invitation")
    assert set(log.values_list("action", "actor")) == {("create", world.owner_a.pk), ("revoke", world.owner_a.pk)}
    # A fresh invitation, accepted: the acceptance and the membership are logged as the person's.
    client.force_login(world.owner_a)
    _invite(client, world.owner_b.username)
    client.force_login(world.owner_b)
    fresh = Invitation.objects.get(identifier=world.owner_b.username, status="pending")
    client.post(f"/console/invitations/{fresh.pk}/accept/")
    assert set(AuditLog.objects.filter(tenant=world.a.tenant, actor=world.owner_b).values_list(
        "entity", "action")) == {("invitation", "accept"), ("membership", "create")}
