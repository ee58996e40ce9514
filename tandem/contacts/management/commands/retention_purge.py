"""`manage.py retention_purge`: the daily retention purge, now (docs/privacy.md)."""

from django.core.management.base import BaseCommand

from tandem.contacts.services import retention_purge


class Command(BaseCommand):
    help = "Delete every tenant's conversations idle longer than its retention period (audited)."

    def handle(self, *args, **options):
        done = retention_purge()
        for slug, count in sorted(done.items()):
            self.stdout.write(f"{slug}: {count} conversations deleted")
        if not done:
            self.stdout.write("No tenant has a retention period.")
