"""`manage.py tenant add-member`: the console's member rules, for scripts."""

from __future__ import annotations

import io
import subprocess
import sys

import pytest
from django.contrib.auth import authenticate, get_user_model
from django.core.management import CommandError, call_command

from tenants.models import AuditLog, Membership
from tests.factories import make_tenant

pytestmark = pytest.mark.django_db


def run(*args, stdin: str | None = None) -> str:
    out = io.StringIO()
    call_command("tenant", "add-member", *args, stdout=out, **({"stdin": io.StringIO(stdin)} if stdin else {}))
    return out.getvalue()


def test_add_member_creates_the_user_with_the_password_from_stdin_and_the_role():
    tenant = make_tenant(slug="cmd-t").tenant
    out = run("cmd-t", "dana", "--role", "admin", "--password-stdin", stdin="a long enough password\n")
    assert "dana is admin of cmd-t (user created)" in out
    user = authenticate(username="dana", password="a long enough password")
    assert user is not None
    assert Membership.objects.get(user=user, tenant=tenant).role == "admin"
    assert AuditLog.objects.get(entity="membership", action="create").source == "command"


def test_add_member_gives_an_existing_user_a_role_and_never_changes_their_password():
    make_tenant(slug="cmd-u")
    user = get_user_model().objects.create_user("erin", password="erins own password")
    out = run("cmd-u", "erin", "--role", "viewer", "--password-stdin", stdin="something else entirely\n")
    assert "password left unchanged" in out
    assert authenticate(username="erin", password="erins own password") == user


@pytest.mark.parametrize("args, message", [
    (("no-such", "x", "--role", "viewer"), "no tenant"),
    (("cmd-v", "frank", "--role", "viewer", "--password-stdin"), "no password"),
])
def test_add_member_refuses_clearly(args, message):
    make_tenant(slug="cmd-v")
    with pytest.raises(CommandError, match=message):
        run(*args, stdin="\n" if "--password-stdin" in args else None)


def test_add_member_twice_is_an_error_naming_the_member():
    make_tenant(slug="cmd-w")
    run("cmd-w", "gus", "--role", "owner")
    with pytest.raises(CommandError, match="already a member"):
        run("cmd-w", "gus", "--role", "viewer")


def test_an_unknown_role_is_refused_by_the_parser():
    done = subprocess.run([sys.executable, "manage.py", "tenant", "add-member", "x", "y", "--role", "superhero"],
                          capture_output=True, text=True)
    assert done.returncode != 0 and "invalid choice: 'superhero'" in done.stderr
