"""Defaults (issue 19, findings 6, 7 and 8): seed_demo keeps the demo secret key out of
production logs, the API docs load Swagger UI from the package and are staff-only in
production, and passwords pass Django's full set of validators."""

from __future__ import annotations

import io
import stat

import pytest
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.management import call_command

from tenants.models import ApiKey

pytestmark = pytest.mark.django_db


def test_seed_demo_in_production_writes_the_secret_key_to_an_owner_only_file_not_the_log(settings, tmp_path):
    settings.PRODUCTION, settings.VAR_DIR = True, tmp_path
    out = io.StringIO()
    call_command("seed_demo", "--admin-password", "a-long-Unusual-passphrase-42", stdout=out)
    secret = (tmp_path / "demo-secret-key").read_text().strip()
    assert secret.startswith("sk_") and ApiKey.objects.filter(kind="secret").exists()
    assert secret not in out.getvalue() and "demo-secret-key" in out.getvalue()
    assert stat.S_IMODE((tmp_path / "demo-secret-key").stat().st_mode) == 0o600


def test_swagger_ui_is_served_from_the_package_not_a_cdn(client, settings):
    page = client.get("/api/docs/").content.decode()
    assert "cdn.jsdelivr.net" not in page and "@latest" not in page
    assert "drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js" in page


def test_api_docs_are_staff_only_in_production(client, settings, django_user_model):
    settings.TANDEM_API_DOCS_PUBLIC = False
    assert client.get("/api/docs/").status_code in (302, 403)
    assert client.get("/api/schema/").status_code in (302, 403)
    staff = django_user_model.objects.create_user("ops", password="x", is_staff=True)
    client.force_login(staff)
    assert client.get("/api/docs/").status_code == 200


@pytest.mark.parametrize("password", ["password123", "12345678901", "tandem"])
def test_weak_passwords_are_refused(password):
    with pytest.raises(ValidationError):
        validate_password(password)
