"""Tenant → Knowledge: the tenant's articles (search, create, edit, delete, import a
JSONL or zip file), their indexing state (the table polls while any is pending) and the
retrieval settings. The knowledge app parses, checks and stores (`knowledge.services`,
`knowledge.importing`); its `KnowledgeInputError` is shown beside the field it names.
Viewers read; admins and owners edit (Can.MANAGE)."""

from __future__ import annotations

from django.contrib import messages
from django.shortcuts import redirect

from knowledge import importing, selectors
from knowledge import services as knowledge_services
from knowledge.models import Article
from knowledge.services import KnowledgeInputError
from tenants.membership import Can

from ..forms import ArticleForm, ArticleImportForm, KnowledgeSettingsForm
from .base import Obj, render_page, tenant_page

ARTICLE = {"article_id": Obj("article", Article.objects.all(), "article")}
LIST_LIMIT = 200


def _field_error(form, exc: KnowledgeInputError) -> None:
    """The knowledge app names a field (`title`, `file[3].body`); the form's own field
    when it has one, else the file field for an import's record, else the form."""
    name = exc.field.split("[")[0].split(".")[0]
    label = "" if name in form.fields and exc.field == name else f"{exc.field}: "
    form.add_error(name if name in form.fields else None, f"{label}{exc}")


def _rows_context(request, access) -> dict:
    q = request.GET.get("q", "")[:200]
    articles, more = selectors.article_search(tenant=access.tenant, q=q, limit=LIST_LIMIT)
    return {"articles": articles, "more": more, "q": q,
            "pending": any(a.status == Article.Status.PENDING for a in articles)
            or selectors.articles_pending(tenant=access.tenant)}


def _page(request, access, *, import_form=None, settings_form=None, status=200):
    s = selectors.settings_for(access.tenant)
    if access.can_manage:
        import_form = import_form or ArticleImportForm()
        settings_form = settings_form or KnowledgeSettingsForm(
            initial={"enabled": s.enabled, "top_k": s.top_k, "min_score": s.min_score})
    return render_page(request, "console/knowledge.html",
                       {**_rows_context(request, access), "settings": s,
                        "import_form": import_form if access.can_manage else None,
                        "settings_form": settings_form if access.can_manage else None},
                       access=access, nav="knowledge", status=status)


@tenant_page(methods=("GET",))
def knowledge(request, access):
    return _page(request, access)




@tenant_page(methods=("GET",))
def knowledge_rows(request, access):
    """The table alone: what htmx polls while an article is pending."""
    return render_page(request, "console/partials/knowledge_rows.html", _rows_context(request, access),
                       access=access)


def _article_page(request, access, form, article=None, status=200):
    return render_page(request, "console/article_form.html", {"form": form, "article": article},
                       access=access, nav="knowledge", status=status)


@tenant_page(write=Can.MANAGE)
def article_create(request, access):
    access.require(Can.MANAGE)
    # ?title= pre-fills the form: the Outcomes page's "Write an article" for a knowledge gap.
    form = ArticleForm(request.POST or None, initial={"title": request.GET.get("title", "")[:300]})
    if request.method == "POST" and form.is_valid():
        try:
            article = knowledge_services.article_create(tenant=access.tenant, **form.cleaned_data)
        except KnowledgeInputError as exc:
            _field_error(form, exc)
        else:
            messages.success(request, f"Added “{article.title}”: it is indexed in a moment.")
            return redirect("console:knowledge", slug=access.tenant.slug)
    return _article_page(request, access, form, status=400 if form.errors else 200)


@tenant_page(write=Can.MANAGE, objects=ARTICLE)
def article_edit(request, access, article):
    if request.method == "POST":
        form = ArticleForm(request.POST)
        if form.is_valid():
            try:
                knowledge_services.article_update(article=article, **form.cleaned_data)
            except KnowledgeInputError as exc:
                _field_error(form, exc)
            else:
                messages.success(request, f"Saved “{article.title}”.")
                return redirect("console:knowledge", slug=access.tenant.slug)
        return _article_page(request, access, form, article, status=400)
    form = ArticleForm(initial=ArticleForm.initial_for(article)) if access.can_manage else None
    return _article_page(request, access, form, article)


@tenant_page(write=Can.MANAGE, methods=("POST",), objects=ARTICLE)
def article_delete(request, access, article):
    title = article.title
    knowledge_services.article_delete(article=article)
    messages.success(request, f"Deleted “{title}”: replies no longer draw on it.")
    return redirect("console:knowledge", slug=access.tenant.slug)


@tenant_page(write=Can.MANAGE, methods=("POST",))
def article_import(request, access):
    form = ArticleImportForm(request.POST, request.FILES)
    if form.is_valid():
        upload = form.cleaned_data["file"]
        name = (upload.name or "").lower()
        try:
            if upload.size > importing.MAX_UPLOAD_BYTES:
                raise KnowledgeInputError("file", f"the file is over {importing.MAX_UPLOAD_BYTES // 2**20} MiB.")
            data = upload.read()
            if name.endswith(".zip"):
                items = importing.parse_zip(data)
            elif name.endswith((".jsonl", ".json", ".ndjson")):
                items = importing.parse_jsonl(data)
            else:
                raise KnowledgeInputError("file", "upload a .jsonl or a .zip file.")
            result = knowledge_services.articles_import(tenant=access.tenant, items=items)
        except KnowledgeInputError as exc:
            _field_error(form, exc)
        else:
            messages.success(request, f"Imported {upload.name}: {result.created} added, {result.updated} updated, "
                                      f"{result.unchanged} unchanged.")
            return redirect("console:knowledge", slug=access.tenant.slug)
    return _page(request, access, import_form=form, status=400)


@tenant_page(write=Can.MANAGE, methods=("POST",))
def knowledge_settings(request, access):
    form = KnowledgeSettingsForm(request.POST)
    if form.is_valid():
        try:
            knowledge_services.settings_update(tenant=access.tenant, **form.cleaned_data)
        except KnowledgeInputError as exc:
            _field_error(form, exc)
        else:
            messages.success(request, "Saved the retrieval settings: they apply from the next message on.")
            return redirect("console:knowledge", slug=access.tenant.slug)
    return _page(request, access, settings_form=form, status=400)
