"""`manage.py assistant eval <tenant>`: run the tenant's test cases through the real
pipeline (workers must be running) and print one line per case and the totals.
`manage.py assistant load-cases <tenant> [--file cases.json]`: add test cases (by
default the starter set written for the demo tenant's help centre)."""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

from tandem.evals.services import STARTER, NoSecretKey, cases_load, eval_run
from tenants.models import Tenant


class Command(BaseCommand):
    help = "The assistant's evaluation: `eval <tenant>` runs its test cases."

    def add_arguments(self, parser):
        parser.add_argument("action", choices=["eval", "load-cases"])
        parser.add_argument("--file", help="load-cases: a JSON list of cases (default: the demo starter set)")
        parser.add_argument("tenant", help="the tenant's slug")
        parser.add_argument("--draft", action="store_true", help="(not yet) against a draft of the settings")

    def handle(self, *args, action, tenant, draft=False, file=None, **options):
        if draft:
            raise CommandError("Drafts of the assistant's settings are not there yet: runs use the current settings.")
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
            run = eval_run(tenant=found)
        except NoSecretKey as exc:
            raise CommandError(str(exc)) from None
        w = self.stdout.write
        w(f"{'result':6}  {'latency':>8}  {'tokens':>6}  {'repeat':>6}  question / failed checks")
        for r in run.results.all():
            failed = [name for name, ok in r.checks.items() if not ok]
            w(f"{'pass' if r.passed else 'FAIL':6}  {(r.latency_ms or 0) / 1000:7.2f}s  {r.completion_tokens:6}  "
              f"{r.repetition:6.2f}  {r.question[:60]}" + (f"  [{', '.join(failed)}]" if failed else ""))
        s = run.summary
        w(f"{s['passed']}/{s['cases']} cases passed (run {run.pk})")
        for name, (ok, of) in s["checks"].items():
            w(f"  {name}: {ok}/{of}")
