"""Tenant → Knowledge → Sources: the tenant's websites and file sets, each with its
status, last sync, counts and errors; adding one, its settings, "Sync now", a files
source's files. While a sync runs the progress (found, fetched, changed, failed) polls
every two seconds, as the article table does while an article is pending. Syncing
itself runs on the CPU tier (`knowledge.syncing`), never here. Viewers read; admins and
owners change (Can.MANAGE)."""

from __future__ import annotations

from django.contrib import messages
from django.shortcuts import redirect

from knowledge import selectors, sources
from knowledge.models import Article, Source
from knowledge.services import KnowledgeInputError
from tenants.access import NotFound
from tenants.membership import Can

from ..knowledge_source_forms import FilesSourceForm, SourceFileForm, SourceSettingsForm
from .base import Obj, render_page, tenant_page
from .knowledge import _field_error

SOURCE = {"source_id": Obj("source", Source.objects.all(), "source")}
RUNNING = (Source.Status.QUEUED, Source.Status.SYNCING)
ARTICLE_LIMIT = 200


def _list_context(access) -> dict:
    rows = selectors.source_list(tenant=access.tenant)
    return {"sources": rows, "running": any(s.status in RUNNING for s in rows),
            "manual_count": selectors.manual_article_count(tenant=access.tenant)}


def _list_page(request, access, *, website_form=None, files_form=None, status=200):
    ctx = _list_context(access)
    if access.can_manage:
        ctx["website_form"] = website_form or SourceSettingsForm(
            initial={"max_pages": 200, "max_depth": 3, "delay_ms": 250, "sync_every_hours": 24})
        ctx["files_form"] = files_form or FilesSourceForm()
    return render_page(request, "console/knowledge_sources.html", ctx, access=access, nav="knowledge", status=status)


@tenant_page(methods=("GET",))
def source_list(request, access):
    return _list_page(request, access)


@tenant_page(methods=("GET",))
def source_list_rows(request, access):
    """The table alone: what htmx polls while a sync runs."""
    return render_page(request, "console/partials/knowledge_source_rows.html", _list_context(access), access=access)


@tenant_page(write=Can.MANAGE, methods=("POST",))
def website_create(request, access):
    return _create(request, access, SourceSettingsForm, Source.Kind.WEBSITE, form_name="website_form",
                   added="its first sync has started.")


@tenant_page(write=Can.MANAGE, methods=("POST",))
def files_create(request, access):
    return _create(request, access, FilesSourceForm, Source.Kind.FILES, form_name="files_form",
                   added="add its files below.")


def _create(request, access, form_class, kind, *, form_name: str, added: str):
    """Both kinds of source are made the same way: the form, the service, its refusal
    shown on the form's field, or the new source's page."""
    form = form_class(request.POST)
    if form.is_valid():
        try:
            source = sources.source_create(tenant=access.tenant, kind=kind, **form.cleaned_data)
        except KnowledgeInputError as exc:
            _field_error(form, exc)
        else:
            messages.success(request, f"Added “{source.name}”: {added}")
            return redirect("console:knowledge_source", slug=access.tenant.slug, source_id=source.pk)
    return _list_page(request, access, **{form_name: form}, status=400)


def _detail_context(access, source) -> dict:
    return {"source": source, "running": source.status in RUNNING, "errors": selectors.source_errors(source),
            "article_count": Article.objects.filter(origin=source).count()}


def _detail_page(request, access, source, *, settings_form=None, file_form=None, status=200):
    ctx = _detail_context(access, source)
    ctx["articles"] = list(Article.objects.filter(origin=source).defer("body", "text").order_by("title")[:ARTICLE_LIMIT])
    if source.kind == Source.Kind.FILES:
        ctx["files"] = selectors.source_files(source=source)
    if access.can_manage:
        if source.kind == Source.Kind.WEBSITE:
            ctx["settings_form"] = settings_form or SourceSettingsForm(initial=SourceSettingsForm.initial_for(source))
        else:
            ctx["file_form"] = file_form or SourceFileForm()
    return render_page(request, "console/knowledge_source.html", ctx, access=access, nav="knowledge", status=status)


@tenant_page(write=Can.MANAGE, objects=SOURCE)
def source_detail(request, access, source):
    if request.method == "POST":
        if source.kind != Source.Kind.WEBSITE:
            return _detail_page(request, access, source, status=400)
        form = SourceSettingsForm(request.POST)
        if form.is_valid():
            try:
                sources.source_update(source=source, **form.cleaned_data)
            except KnowledgeInputError as exc:
                _field_error(form, exc)
            else:
                messages.success(request, f"Saved “{source.name}”: the next sync uses these settings.")
                return redirect("console:knowledge_source", slug=access.tenant.slug, source_id=source.pk)
        return _detail_page(request, access, source, settings_form=form, status=400)
    return _detail_page(request, access, source)


@tenant_page(methods=("GET",), objects=SOURCE)
def source_progress(request, access, source):
    """The status panel alone: what htmx polls while the sync runs."""
    return render_page(request, "console/partials/knowledge_source_status.html", _detail_context(access, source),
                       access=access)


@tenant_page(write=Can.MANAGE, methods=("POST",), objects=SOURCE)
def source_sync(request, access, source):
    try:
        sources.source_sync_request(source=source)
    except sources.SyncInProgress:
        messages.info(request, f"“{source.name}” is syncing already.")
    else:
        messages.success(request, f"Syncing “{source.name}”: the progress shows below.")
    return redirect("console:knowledge_source", slug=access.tenant.slug, source_id=source.pk)


@tenant_page(write=Can.MANAGE, methods=("POST",), objects=SOURCE)
def source_delete(request, access, source):
    name = source.name
    sources.source_delete(source=source)
    messages.success(request, f"Deleted “{name}” and its articles: replies no longer draw on them.")
    return redirect("console:knowledge_sources", slug=access.tenant.slug)


@tenant_page(write=Can.MANAGE, methods=("POST",), objects=SOURCE)
def source_file_add(request, access, source):
    form = SourceFileForm(request.POST, request.FILES)
    if form.is_valid():
        upload = form.cleaned_data["file"]
        try:
            if upload.size > sources.MAX_FILE_BYTES:
                raise KnowledgeInputError("file", f"{upload.name} is over {sources.MAX_FILE_BYTES // 2**20} MiB.")
            sources.source_file_add(source=source, name=upload.name or "", data=upload.read())
        except KnowledgeInputError as exc:
            _field_error(form, exc)
        else:
            messages.success(request, f"Added {upload.name}: it is read and indexed by the sync that started.")
            return redirect("console:knowledge_source", slug=access.tenant.slug, source_id=source.pk)
    return _detail_page(request, access, source, file_form=form, status=400)


@tenant_page(write=Can.MANAGE, methods=("POST",), objects=SOURCE)
def source_file_remove(request, access, source, file_id):
    try:
        sources.source_file_remove(source=source, file_id=file_id)
    except NotFound:
        messages.error(request, "That file is gone already.")
    else:
        messages.success(request, "Removed the file: the sync that started removes its article.")
    return redirect("console:knowledge_source", slug=access.tenant.slug, source_id=source.pk)
