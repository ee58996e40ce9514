"""`manage.py outcomes_rollup [--tenant SLUG] [--all]`: the Outcomes page's rollup now,
rather than at the CPU workers' next round (docs/outcomes.md)."""

from __future__ import annotations

import datetime as dt

from django.core.management.base import BaseCommand, CommandError

from tandem.feedback.rollup import outcomes_rollup
from tenants.models import Tenant


class Command(BaseCommand):
    help = "Classify and cost conversations for the Outcomes page."

    def add_arguments(self, parser):
        parser.add_argument("--tenant", help="only this tenant (its slug)")
        parser.add_argument("--all", action="store_true", help="every conversation, not only those changed lately")

    def handle(self, *args, tenant=None, all=False, **options):
        tenant_id = None
        if tenant:
            tenant_id = Tenant.objects.filter(slug=tenant).values_list("pk", flat=True).first()
            if tenant_id is None:
                raise CommandError(f"No tenant {tenant!r}.")
        since = dt.datetime(1970, 1, 1, tzinfo=dt.UTC) if all else None
        n = outcomes_rollup(since=since, tenant_id=tenant_id)
        self.stdout.write(f"{n} conversation{'s' if n != 1 else ''} rolled up.")
