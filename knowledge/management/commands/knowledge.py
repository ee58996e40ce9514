"""`manage.py knowledge …`: a tenant's help articles from the command line.

    knowledge import <tenant slug> <path>    a folder of .md/.txt/.html files, a .zip, or a
                                             .jsonl file; indexed here with a progress line
                                             per article (--async: by the CPU workers)
    knowledge reindex <tenant slug>          index every article again
    knowledge search <tenant slug> <words>   what retrieval returns, with scores

Importing the same files again updates the articles they made (matched by path) and
leaves unchanged ones alone."""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from tenants.models import Tenant

from ... import importing, selectors, services


class Command(BaseCommand):
    help = "Import, re-index and search a tenant's help articles."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        imp = sub.add_parser("import", help="import a folder, a .zip or a .jsonl file")
        imp.add_argument("tenant")
        imp.add_argument("path")
        imp.add_argument("--async", dest="use_async", action="store_true",
                         help="leave the indexing to the CPU workers (Celery) instead of doing it here")
        rei = sub.add_parser("reindex", help="index every article of a tenant again")
        rei.add_argument("tenant")
        rei.add_argument("--async", dest="use_async", action="store_true")
        sea = sub.add_parser("search", help="show what retrieval returns for some words")
        sea.add_argument("tenant")
        sea.add_argument("words", nargs="+")
        sea.add_argument("-k", type=int, default=5)

    def handle(self, *args, action, tenant, **opts):
        t = Tenant.objects.filter(slug=tenant).first()
        if t is None:
            raise CommandError(f"no tenant with slug {tenant!r}")
        try:
            getattr(self, f"_{action}")(t, **opts)
        except services.KnowledgeInputError as exc:
            raise CommandError(f"{exc.field}: {exc}") from None

    def _import(self, tenant, *, path, use_async, **_):
        items = importing.parse_path(Path(path))
        self.stdout.write(f"importing {len(items)} article(s) into {tenant.slug}")

        def progress(i, total, article, action):
            detail = f"{article.chunk_count} chunks" if article.status == "indexed" else article.status
            if article.status == "failed":
                detail += f": {article.error}"
            self.stdout.write(f"  [{i}/{total}] {action:<9} {article.source or article.title} ({detail})")

        result = services.articles_import(tenant=tenant, items=items, index="async" if use_async else "inline",
                                          progress=progress, field_prefix="path")
        self.stdout.write(self.style.SUCCESS(
            f"done: {result.created} created, {result.updated} updated, {result.unchanged} unchanged"
            + (" (indexing queued)" if use_async else "")))

    def _reindex(self, tenant, *, use_async, **_):
        n = services.tenant_reindex(tenant=tenant, index="async" if use_async else "inline")
        self.stdout.write(self.style.SUCCESS(f"{'queued' if use_async else 'indexed'} {n} article(s)"))

    def _search(self, tenant, *, words, k, **_):
        s = selectors.settings_for(tenant)
        hits = selectors.retrieve(tenant_id=tenant.pk, message=" ".join(words), k=k, language=s.language)
        if not hits:
            self.stdout.write("no match")
        for rank, h in enumerate(hits, 1):
            where = f"{h.title} › {h.heading}" if h.heading else h.title
            self.stdout.write(f"{rank}. {h.score:.4f}  {where}")
