import io
import json

import pytest
from django.core.management import CommandError, call_command

from tandem.evals.models import EvalCase
from tenants import services
from tenants.models import ApiKey, Tenant

pytestmark = pytest.mark.django_db


def run(*args) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_create_with_json_prints_exactly_one_object_with_working_keys():
    output = run("tenant", "create", "acme", "--name", "Acme", "--rpm", "7", "--origin",
                 "https://acme.test", "--json")
    data = json.loads(output)  # fails on anything but exactly one JSON document
    assert set(data) == {"slug", "secret_key", "widget_key"}
    assert data["slug"] == "acme"
    assert services.api_key_authenticate(plaintext=data["secret_key"], kind="secret").tenant.slug == "acme"
    widget = services.api_key_authenticate(plaintext=data["widget_key"], kind="widget")
    assert widget.allowed_origins == ["https://acme.test"]
    assert Tenant.objects.get(slug="acme").quota.requests_per_minute == 7
    assert not ApiKey.objects.filter(public_key=data["secret_key"]).exists()


def test_create_refuses_a_duplicate_slug():
    run("tenant", "create", "acme", "--name", "Acme", "--json")
    with pytest.raises(CommandError, match="already exists"):
        run("tenant", "create", "acme", "--name", "Acme again", "--json")


def test_rotate_key_issues_a_new_working_key():
    first = json.loads(run("tenant", "create", "acme", "--name", "Acme", "--json"))
    rotated = json.loads(run("tenant", "rotate-key", "acme", "--json"))
    assert rotated["secret_key"] != first["secret_key"]
    services.api_key_authenticate(plaintext=rotated["secret_key"])
    with pytest.raises(services.AuthenticationFailed):
        services.api_key_authenticate(plaintext=first["secret_key"])


def test_list_shows_every_tenant_with_its_pools():
    run("tenant", "create", "acme", "--name", "Acme", "--json")
    rows = json.loads(run("tenant", "list", "--json"))
    assert [r["slug"] for r in rows] == ["acme"]
    assert rows[0]["decode_pool"] == "decode.shared"


def test_seed_demo_is_idempotent_and_its_credentials_log_in(client):
    first = json.loads(run("seed_demo", "--json"))
    second = json.loads(run("seed_demo", "--json"))
    assert Tenant.objects.filter(slug="demo").count() == 1
    assert first["widget_key"] == second["widget_key"]
    # The evaluation harness's starter set, once, each case that names an article linked to it.
    cases = EvalCase.objects.filter(tenant__slug="demo")
    assert cases.count() == 6 and cases.exclude(expect_article=None).count() == 5
    assert client.login(username=second["admin_user"], password=second["admin_password"])
