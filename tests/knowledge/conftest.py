"""Knowledge test helpers: the demo help centre (the fixture seed_demo loads), imported and
indexed in-process (what the Celery task runs, called directly: no eager Celery)."""

from __future__ import annotations

from pathlib import Path

from knowledge import importing, services
from knowledge.models import Article

HELP_CENTRE = Path(__file__).resolve().parents[2] / "knowledge" / "fixtures" / "demo-help-centre"


def import_help_centre(tenant) -> dict[str, Article]:
    """{source path: article}, every one indexed."""
    result = services.articles_import(tenant=tenant, items=importing.parse_folder(HELP_CENTRE), index="inline")
    return {a.source: a for a in result.articles}


def run_sync(source):
    """Run a source's sync to its end in-process, step by step as the chain of Celery
    tasks would (what each task calls, called directly: no eager Celery). The source,
    refreshed."""
    from knowledge import syncing

    source.refresh_from_db()
    for _ in range(10_000):
        if source.status not in ("queued", "syncing"):
            return source
        syncing.sync_step(source_id=source.pk, run=str(source.run), step=source.state.get("step", 0))
        source.refresh_from_db()
    raise AssertionError("the sync did not end")
