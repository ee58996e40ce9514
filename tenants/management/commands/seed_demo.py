"""`manage.py seed_demo`: default pools, a demo tenant and an admin user. Idempotent:
a second run changes nothing except that it issues fresh demo keys when asked."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

from django.apps import apps
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand
from django.db import transaction

from tenants import selectors, services
from tenants.models import Membership

DEMO_SLUG = "demo"
DEMO_ORIGINS = ["http://127.0.0.1:8000", "http://localhost:8000"]


class Command(BaseCommand):
    help = "Create the default pools, a demo tenant and an admin user (idempotent)."

    def add_arguments(self, parser):
        parser.add_argument("--admin-user", default=os.environ.get("TANDEM_ADMIN_USER", "admin"))
        parser.add_argument("--admin-password", default=os.environ.get("TANDEM_ADMIN_PASSWORD", "tandem-admin"))
        parser.add_argument("--json", action="store_true")

    @transaction.atomic
    def handle(self, *args, admin_user, admin_password, **opts):
        services.pools_ensure_defaults()
        tenant = selectors.tenant_get(slug=DEMO_SLUG)
        secret_plaintext = None
        if tenant is None:
            created = services.tenant_create(
                slug=DEMO_SLUG, name="Demo Co.", allowed_origins=DEMO_ORIGINS,
                system_prompt="You are the friendly support assistant of Demo Co. Answer briefly.",
            )
            tenant, secret_plaintext = created.tenant, created.secret_key.plaintext
        widget = selectors.widget_key_get(tenant=tenant)
        User = get_user_model()
        user, made = User.objects.get_or_create(
            username=admin_user, defaults={"is_staff": True, "is_superuser": True}
        )
        # Keep the printed credentials true: reset the password if it was changed.
        if made or not user.check_password(admin_password):
            user.set_password(admin_password)
            user.save()
        Membership.objects.get_or_create(user=user, tenant=tenant, defaults={"role": Membership.Role.OWNER})
        # The demo answers from a small help centre (unchanged articles are left as they are).
        help_centre = Path(apps.get_app_config("knowledge").path) / "fixtures" / "demo-help-centre"
        call_command("knowledge", "import", tenant.slug, str(help_centre), stdout=io.StringIO())
        # And the evaluation harness's starter cases for it (questions it already has are kept).
        call_command("assistant", "load-cases", tenant.slug, stdout=io.StringIO())
        if secret_plaintext and settings.PRODUCTION:
            secret_plaintext = _secret_to_file(secret_plaintext)
        info = {
            "admin_url": "http://127.0.0.1:8000/admin/",
            "admin_user": admin_user,
            # In production the operator chose it (TANDEM_ADMIN_PASSWORD): not for the logs.
            "admin_password": "(TANDEM_ADMIN_PASSWORD)" if settings.PRODUCTION else admin_password,
            "tenant": tenant.slug,
            "help_centre": f"{help_centre.name} (python manage.py knowledge search {tenant.slug} <words>)",
            "widget_key": widget.public_key if widget else None,
            "secret_key": secret_plaintext or "(issued at the first seed; `manage.py tenant rotate-key demo` makes a new one)",
        }
        if opts.get("json"):
            self.stdout.write(json.dumps(info))
            return
        for k, v in info.items():
            self.stdout.write(f"  {k:<15} {v}")


def _secret_to_file(plaintext: str) -> str:
    """In production the secret key never reaches the logs: it is written to a file only
    its owner can read, and the output says where (with the key's first characters)."""
    path = settings.VAR_DIR / "demo-secret-key"
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        os.fchmod(f.fileno(), 0o600)
        f.write(plaintext + "\n")
    return f"{plaintext[:7]}… (written to {path}, mode 0600)"
