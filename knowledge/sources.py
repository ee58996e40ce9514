"""Knowledge sources: creating, changing and deleting a tenant's websites and file
sets, adding and removing files, and asking for a sync (now, or when one is due).

A sync never runs here: asking marks the source `queued` with a new run id and, once
the transaction commits, sends the first step of `knowledge.sync_step` to the CPU
tier's queue (`syncing`). Every input error is a `KnowledgeInputError` naming its field."""

from __future__ import annotations

import hashlib
import logging
import uuid
from datetime import timedelta

from celery import current_app
from django.db import transaction
from django.utils import timezone

from tenants.models import Tenant

from .extraction import FILE_TYPES, MAX_FILE_BYTES
from .models import Article, Source, SourceFile
from .services import INDEX_PRIORITY, INDEX_QUEUE, KnowledgeInputError, _clean_url, storable

log = logging.getLogger(__name__)

SYNC_TASK = "knowledge.sync_step"
MAX_SOURCES = 50
MAX_FILES = 500
LIMITS = {"max_pages": (1, 5000), "max_depth": (0, 10), "delay_ms": (0, 10_000), "sync_every_hours": (0, 24 * 30)}
EDITABLE = ("name", "url", "any_host", *LIMITS)
# A sync that has not moved for this long lost its chain of steps (a worker died with
# one): the scheduler starts it again.
STALLED_AFTER = timedelta(minutes=15)


def _clean(kind: str, changes: dict) -> dict:
    out: dict = {}
    for name, value in changes.items():
        if name not in EDITABLE:
            raise KnowledgeInputError(name, f"{name} is not a source field; the fields are {', '.join(EDITABLE)}.")
        if name == "name":
            if not isinstance(value, str) or not storable(value).strip() or len(value) > 200:
                raise KnowledgeInputError("name", "name must be a non-empty string of at most 200 characters.")
            out["name"] = " ".join(storable(value).split())
        elif name == "url":
            if kind != Source.Kind.WEBSITE:
                raise KnowledgeInputError("url", "only a website source has a url.")
            out["url"] = _clean_url(value, "")
            if not out["url"]:
                raise KnowledgeInputError("url", "a website source needs its start page or sitemap URL.")
        elif name == "any_host":
            if not isinstance(value, bool):
                raise KnowledgeInputError("any_host", "any_host must be true or false.")
            out["any_host"] = value
        else:
            low, high = LIMITS[name]
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise KnowledgeInputError(name, f"{name} must be an integer from {low} to {high}.")
            out[name] = value
    return out


def source_create(*, tenant: Tenant, kind: str, name: str, **fields) -> Source:
    """A new source; a website's first sync is asked for at once, a files source's when
    its first file comes."""
    if kind not in Source.Kind.values:
        raise KnowledgeInputError("kind", f"kind must be one of {', '.join(Source.Kind.values)}.")
    data = _clean(kind, {"name": name, **fields})
    if kind == Source.Kind.WEBSITE and not data.get("url"):
        raise KnowledgeInputError("url", "a website source needs its start page or sitemap URL.")
    with transaction.atomic():
        if Source.objects.filter(tenant=tenant).count() >= MAX_SOURCES:
            raise KnowledgeInputError("kind", f"a tenant may have at most {MAX_SOURCES} sources.")
        source = Source.objects.create(tenant=tenant, kind=kind, **data)
        if kind == Source.Kind.WEBSITE:
            source_sync_request(source=source)
    return source


def source_update(*, source: Source, **changes) -> Source:
    data = _clean(source.kind, changes)
    for k, v in data.items():
        setattr(source, k, v)
    if "sync_every_hours" in data:
        source.next_sync_at = _next_due(source)
    source.save()
    return source


def source_delete(*, source: Source) -> None:
    """The source, its files and its articles (and so their chunks), in one transaction."""
    from .services import article_delete

    with transaction.atomic():
        for article in Article.objects.filter(origin=source).only("pk", "tenant_id"):
            article_delete(article=article)
        source.delete()


def source_file_add(*, source: Source, name: str, data: bytes) -> SourceFile:
    """Keep an uploaded file (replacing one of the same name) and ask for a sync: the
    file is parsed there, on the CPU tier. The type and size are checked here."""
    if source.kind != Source.Kind.FILES:
        raise KnowledgeInputError("file", "files are added to a files source.")
    name = storable((name or "").replace("\\", "/").rsplit("/", 1)[-1]).strip()
    if not name or len(name) > 255:
        raise KnowledgeInputError("file", "the file needs a name of at most 255 characters.")
    suffix = "." + name.rsplit(".", 1)[-1].lower() if "." in name else ""
    if suffix not in FILE_TYPES:
        raise KnowledgeInputError("file", f"{name}: upload a PDF, DOCX, HTML, Markdown or text file "
                                          f"({', '.join(sorted(FILE_TYPES))}).")
    if len(data) > MAX_FILE_BYTES:
        raise KnowledgeInputError("file", f"{name} is over {MAX_FILE_BYTES // 2**20} MiB.")
    if not data:
        raise KnowledgeInputError("file", f"{name} is empty.")
    with transaction.atomic():
        if not source.files.filter(name=name).exists() and source.files.count() >= MAX_FILES:
            raise KnowledgeInputError("file", f"a source may hold at most {MAX_FILES} files.")
        f, _ = SourceFile.objects.update_or_create(
            source=source, name=name,
            defaults={"data": data, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()})
        source_sync_request(source=source, force=True)
    return f


def source_file_remove(*, source: Source, file_id) -> None:
    """`file_id` as a client sent it: anything that is not one of the source's file ids
    is not found, like a missing one."""
    from tenants.access import NotFound

    if not str(file_id).isdigit():
        raise NotFound("file")
    with transaction.atomic():
        deleted, _ = SourceFile.objects.filter(source=source, pk=file_id).delete()
        if not deleted:
            raise NotFound("file")
        source_sync_request(source=source, force=True)


class SyncInProgress(Exception):
    pass


def source_sync_request(*, source: Source, force: bool = False) -> Source:
    """Ask for a sync: the source turns `queued` with a new run and its counts reset;
    its first step goes to the CPU tier once the transaction commits. While one runs,
    asking again raises SyncInProgress, unless `force` (new files: the running sync
    may have listed the files before they came), which starts over."""
    with transaction.atomic():
        locked = Source.objects.select_for_update().get(pk=source.pk)
        if locked.status in (Source.Status.QUEUED, Source.Status.SYNCING) and not force:
            raise SyncInProgress(f"{locked.name} is syncing already.")
        run = uuid.uuid4()
        Source.objects.filter(pk=source.pk).update(
            status=Source.Status.QUEUED, run=run, error="", found=0, fetched=0, changed=0, failed=0,
            state={}, sync_started_at=timezone.now(), progressed_at=timezone.now())
        source.refresh_from_db()
        sync_step_send(source_id=source.pk, run=run, step=0)
    return source


def sync_step_send(*, source_id, run, step: int, countdown: float = 0) -> None:
    """Send a sync's next step after the current transaction commits, at the lowest
    priority of the CPU queue: a chat request waiting there goes first."""
    args = [str(source_id), str(run), step]

    def send():
        try:
            current_app.send_task(SYNC_TASK, args=args, queue=INDEX_QUEUE, priority=INDEX_PRIORITY,
                                  countdown=countdown or None)
        except Exception:
            # The source stays queued; the scheduler starts stalled syncs again.
            log.exception("could not enqueue sync step %s of source %s", step, source_id)

    transaction.on_commit(send)


def _next_due(source: Source):
    if not source.sync_every_hours:
        return None
    base = source.last_synced_at or timezone.now()
    return base + timedelta(hours=source.sync_every_hours)


def sources_start_due(*, now=None) -> int:
    """Ask for a sync of every source whose schedule says it is due, and again for
    every sync that stalled; how many were asked for. Any CPU worker may run this at
    the same time as another: each source is taken under its row lock, skipping those
    another holds."""
    now = now or timezone.now()
    started = 0
    due = (Source.objects.filter(sync_every_hours__gt=0, next_sync_at__lte=now)
           .exclude(status__in=[Source.Status.QUEUED, Source.Status.SYNCING]))
    stalled = Source.objects.filter(status__in=[Source.Status.QUEUED, Source.Status.SYNCING],
                                    progressed_at__lt=now - STALLED_AFTER)
    for source_id in list(due.values_list("pk", flat=True)[:100]) + list(stalled.values_list("pk", flat=True)[:100]):
        with transaction.atomic():
            source = Source.objects.select_for_update(skip_locked=True).filter(pk=source_id).first()
            if source is None:
                continue
            source_sync_request(source=source, force=True)
            started += 1
    return started
