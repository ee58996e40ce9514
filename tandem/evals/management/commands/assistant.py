"""`manage.py assistant eval <tenant> [--draft]`: run the tenant's test cases through the
real pipeline (workers must be running) with the live settings or the tenant's draft,
and print one line per case and the totals (the console's run page shows the same).
`manage.py assistant load-cases <tenant> [--file cases.json]`: add test cases (by
default the starter set written for the demo tenant's help centre)."""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

from tandem.evals.models import EvalRun
from tandem.evals.report import run_table
from tandem.evals.services import STARTER, EvalInputError, cases_load, eval_run
from tenants.models import Tenant


class Command(BaseCommand):
    help = "The assistant's evaluation: `eval <tenant> [--draft]` runs its test cases."

    def add_arguments(self, parser):
        parser.add_argument("action", choices=["eval", "load-cases"])
        parser.add_argument("--file", help="load-cases: a JSON list of cases (default: the demo starter set)")
        parser.add_argument("tenant", help="the tenant's slug")
        parser.add_argument("--draft", action="store_true", help="eval: with the tenant's draft of the settings")

    def handle(self, *args, action, tenant, draft=False, file=None, **options):
        found = Tenant.objects.filter(slug=tenant).first()
        if found is None:
            raise CommandError(f"No tenant {tenant!r}.")
        if action == "load-cases":
            try:
                cases = json.loads(open(file or STARTER, encoding="utf-8").read())
                n = cases_load(tenant=found, cases=cases)
            except (OSError, ValueError, KeyError, TypeError) as exc:
                raise CommandError(f"Could not load the cases: {exc}") from None
            self.stdout.write(f"{n} case{'s' if n != 1 else ''} added.")
            return
        try:
            run = eval_run(tenant=found, settings=EvalRun.Settings.DRAFT if draft else EvalRun.Settings.LIVE)
        except EvalInputError as exc:
            raise CommandError(str(exc)) from None
        for line in run_table(run):
            self.stdout.write(line)
