"""Knowledge rules: creating, editing, deleting and importing articles, indexing them,
a tenant's retrieval settings, and recording the sources a reply cited.

Writes index asynchronously: an article is saved `pending`, and once its transaction
commits the Celery task `knowledge.index_article` (queue `cpu`, lowest priority, so chat
requests go first) chunks and indexes it (`article_index`). Editing the title, URL or
body re-indexes; deleting removes the chunks in the same transaction (and with them the
full-text rows: the column on PostgreSQL, the FTS5 triggers on SQLite). Every input
error is a `KnowledgeInputError` naming its field."""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from celery import current_app
from django.core.exceptions import ValidationError
from django.core.validators import URLValidator
from django.db import transaction
from django.utils import timezone

from tenants.access import access_list
from tenants.models import Tenant

from . import dense, embedding
from .chunking import chunk_text
from .cleaning import UnsafeHtml, body_to_text
from .models import LANGUAGES, MAX_TOP_K, MODES, Article, Chunk, Citation, KnowledgeSettings
from .search import backend_for
from .selectors import settings_for
from .terms import terms_adjust

log = logging.getLogger(__name__)

INDEX_TASK = "knowledge.index_article"
INDEX_QUEUE = "cpu"
INDEX_PRIORITY = 9  # the broker's last step: a chat request on the same queue goes first
# Part of what an index was built from: bump to re-chunk everything. 2: chunks carry
# dense vectors (`embedding`).
CHUNKER_VERSION = "2"

MAX_TITLE_CHARS = 300
MAX_BODY_CHARS = 200_000
MAX_URL_CHARS = 1000
MAX_TAGS, MAX_TAG_CHARS = 20, 50
FORMATS = tuple(Article.Format.values)
_url_ok = URLValidator(schemes=["http", "https"])


class KnowledgeInputError(ValueError):
    """Input that cannot be stored, and the field it came in (`file[3].body` for the
    fourth record of an import)."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


@dataclass
class ArticleInput:
    title: str
    body: str
    format: str = Article.Format.MARKDOWN
    url: str = ""
    tags: list[str] = field(default_factory=list)
    source: str = ""


@dataclass
class ImportResult:
    articles: list[Article]
    created: int = 0
    updated: int = 0
    unchanged: int = 0


# -- validation -------------------------------------------------------------------------


def storable(text: str) -> str:
    """`text` without what no database column can hold: NUL characters (PostgreSQL
    refuses them) and lone surrogates (not encodable as UTF-8)."""
    if "\x00" in text:
        text = text.replace("\x00", "")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "ignore").decode("utf-8")
    return text


def _clean_title(title, prefix: str) -> str:
    if not isinstance(title, str) or not storable(title).strip():
        raise KnowledgeInputError(f"{prefix}title", "title must be a non-empty string.")
    title = " ".join("".join(ch for ch in storable(title) if ch.isprintable() or ch.isspace()).split())
    if len(title) > MAX_TITLE_CHARS:
        raise KnowledgeInputError(f"{prefix}title", f"title is {len(title)} characters; the limit is {MAX_TITLE_CHARS}.")
    return title


def _clean_url(url, prefix: str) -> str:
    if url is None or url == "":
        return ""
    if not isinstance(url, str) or len(url) > MAX_URL_CHARS:
        raise KnowledgeInputError(f"{prefix}url", f"url must be an http(s) URL of at most {MAX_URL_CHARS} characters.")
    try:
        _url_ok(url.strip())
    except ValidationError:
        raise KnowledgeInputError(f"{prefix}url", "url must be an http(s) URL.") from None
    return url.strip()


def _clean_tags(tags, prefix: str) -> list[str]:
    if tags is None:
        return []
    if not isinstance(tags, list) or len(tags) > MAX_TAGS or not all(isinstance(t, str) for t in tags):
        raise KnowledgeInputError(f"{prefix}tags", f"tags must be a list of at most {MAX_TAGS} strings.")
    cleaned = []
    for t in tags:
        t = " ".join(storable(t).split())
        if not t or len(t) > MAX_TAG_CHARS:
            raise KnowledgeInputError(f"{prefix}tags", f"each tag must have 1 to {MAX_TAG_CHARS} characters.")
        if t not in cleaned:
            cleaned.append(t)
    return cleaned


def _clean_body(body, fmt, prefix: str) -> tuple[str, str]:
    """(format, body, text) for a body; raises for an empty, oversize or scripted one."""
    if fmt not in FORMATS:
        raise KnowledgeInputError(f"{prefix}format", f"format must be one of {', '.join(FORMATS)}.")
    if not isinstance(body, str) or not body.strip():
        raise KnowledgeInputError(f"{prefix}body", "body must be a non-empty string.")
    body = storable(body)
    if len(body) > MAX_BODY_CHARS:
        raise KnowledgeInputError(f"{prefix}body", f"body is {len(body)} characters; the limit is {MAX_BODY_CHARS}.")
    try:
        text = body_to_text(body, fmt)
    except UnsafeHtml as exc:
        raise KnowledgeInputError(f"{prefix}body", str(exc)) from None
    if not text.strip():
        raise KnowledgeInputError(f"{prefix}body", "body has no text once its markup is removed.")
    return fmt, body, text


def article_input_clean(data: ArticleInput, *, prefix: str = "") -> tuple[ArticleInput, str]:
    """The input with every field checked and normalised, and the body's text."""
    title = _clean_title(data.title, prefix)
    fmt, body, text = _clean_body(data.body, data.format, prefix)
    source = storable(data.source) if isinstance(data.source, str) else ""
    if len(source) > 500:
        raise KnowledgeInputError(f"{prefix}source", "source must have at most 500 characters.")
    cleaned = ArticleInput(title=title, body=body, format=fmt, url=_clean_url(data.url, prefix),
                           tags=_clean_tags(data.tags, prefix), source=source)
    return cleaned, text


# -- articles ---------------------------------------------------------------------------


def article_create(*, tenant: Tenant, title: str, body: str, format: str = Article.Format.MARKDOWN,
                   url: str = "", tags: Sequence[str] | None = None, source: str = "") -> Article:
    data, text = article_input_clean(ArticleInput(title=title, body=body, format=format, url=url,
                                                  tags=list(tags) if tags is not None else [], source=source))
    with transaction.atomic():
        article = Article.objects.create(tenant=tenant, title=data.title, body=data.body, format=data.format,
                                         text=text, url=data.url, tags=data.tags, source=data.source)
        _index_on_commit([article.pk])
    return article


UPDATABLE = ("title", "body", "format", "url", "tags")


def article_update(*, article: Article, **changes) -> Article:
    """Change some of title, body, format, url, tags; a change to what is indexed marks
    the article pending and re-indexes it."""
    unknown = set(changes) - set(UPDATABLE)
    if unknown:
        name = sorted(unknown)[0]
        raise KnowledgeInputError(name, f"{name} cannot be changed; the fields are {', '.join(UPDATABLE)}.")
    fields: dict = {}
    if "title" in changes:
        fields["title"] = _clean_title(changes["title"], "")
    if "url" in changes:
        fields["url"] = _clean_url(changes["url"], "")
    if "tags" in changes:
        fields["tags"] = _clean_tags(changes["tags"], "")
    if "body" in changes or "format" in changes:
        body = changes.get("body", article.body)
        fmt, body, text = _clean_body(body, changes.get("format", article.format), "")
        fields.update(body=body, format=fmt, text=text)
    reindex = any(fields.get(k, getattr(article, k)) != getattr(article, k) for k in ("title", "url", "text"))
    for k, v in fields.items():
        setattr(article, k, v)
    with transaction.atomic():
        if reindex:
            article.status, article.error = Article.Status.PENDING, ""
        article.save()
        if reindex:
            _index_on_commit([article.pk])
    return article


def article_delete(*, article: Article) -> None:
    """Delete the article; its chunks (and their full-text rows) go in the same
    transaction, so retrieval never returns them again."""
    with transaction.atomic():
        terms_adjust(tenant_id=article.tenant_id, removed=backend_for().term_counts(article_id=article.pk))
        Chunk.objects.filter(article_id=article.pk).delete()
        dense.revision_bump(tenant_id=article.tenant_id)
        article.delete()


def articles_import(*, tenant: Tenant, items: Iterable[ArticleInput], index: str = "async",
                    progress: Callable[[int, int, Article, str], None] | None = None,
                    field_prefix: str = "file") -> ImportResult:
    """Create or update many articles at once, all or none: every item is checked before
    anything is written (an error names `<field_prefix>[<source or index>].<field>`). An item with a
    `source` that the tenant already has updates that article (unchanged content is left
    as it is, indexed). `index`: "async" (a Celery task per article, after the commit)
    or "inline" (indexed here, one transaction per article, `progress` after each)."""
    cleaned = []
    seen_sources: set[str] = set()
    for i, item in enumerate(items):
        label = f"{field_prefix}[{item.source or i}]" if isinstance(item.source, str) else f"{field_prefix}[{i}]"
        data, text = article_input_clean(item, prefix=f"{label}.")
        if data.source:
            if data.source in seen_sources:
                raise KnowledgeInputError(f"{label}.source", f"source {data.source!r} appears twice.")
            seen_sources.add(data.source)
        cleaned.append((data, text))
    if not cleaned:
        raise KnowledgeInputError(field_prefix, "the import holds no articles.")
    result = ImportResult(articles=[])
    actions: list[str] = []
    with transaction.atomic():
        existing = {a.source: a for a in access_list(Article, tenant=tenant).filter(source__in=seen_sources)}
        to_index = []
        for data, text in cleaned:
            article = existing.get(data.source) if data.source else None
            if article is None:
                article = Article.objects.create(tenant=tenant, title=data.title, body=data.body, format=data.format,
                                                 text=text, url=data.url, tags=data.tags, source=data.source)
                result.created += 1
                actions.append("created")
                to_index.append(article.pk)
            elif (article.title, article.body, article.format, article.url, article.tags) == (
                    data.title, data.body, data.format, data.url, data.tags) and article.status == Article.Status.INDEXED:
                result.unchanged += 1
                actions.append("unchanged")
            else:
                article.title, article.body, article.format, article.text = data.title, data.body, data.format, text
                article.url, article.tags = data.url, data.tags
                article.status, article.error = Article.Status.PENDING, ""
                article.save()
                result.updated += 1
                actions.append("updated")
                to_index.append(article.pk)
            result.articles.append(article)
        if index == "async":
            _index_on_commit(to_index)
    total = len(result.articles)
    for i, (article, action) in enumerate(zip(result.articles, actions, strict=True), 1):
        if index == "inline" and action != "unchanged":
            indexed = article_index(article_id=article.pk)
            if indexed is not None:
                result.articles[i - 1] = article = indexed
        if progress is not None:
            progress(i, total, article, action)
    return result


def _index_on_commit(article_ids: list) -> None:
    ids = [str(pk) for pk in article_ids]

    def send():
        for pk in ids:
            try:
                current_app.send_task(INDEX_TASK, args=[pk], queue=INDEX_QUEUE, priority=INDEX_PRIORITY)
            except Exception:
                # The article is saved and stays `pending`: `manage.py knowledge reindex`
                # (or its next edit) indexes it.
                log.exception("could not enqueue indexing of article %s", pk)

    if ids:
        transaction.on_commit(send)


# -- indexing ---------------------------------------------------------------------------


def _vectors(title: str, pieces) -> list[bytes | None]:
    """Each chunk's dense vector (float16 bytes), or None each without an embedding model."""
    if not embedding.available():
        return [None] * len(pieces)
    matrix = embedding.embed([embedding.chunk_text(title, p.heading, p.text) for p in pieces])
    return [embedding.to_bytes(row) for row in matrix]


def _digest(article: Article, language: str) -> str:
    # The embedding model is part of what an index was made with: after a model change,
    # indexing an article again re-embeds it instead of finding it current.
    model = embedding.MODEL if embedding.available() else ""
    raw = json.dumps([CHUNKER_VERSION, language, model, article.title, article.url, article.text])
    return hashlib.sha256(raw.encode()).hexdigest()


def article_index(*, article_id) -> Article | None:
    """Chunk and index one article (what the Celery task runs). Idempotent: an article
    already indexed from the same content is left alone; a deleted one is None. A failure
    leaves the article `failed`, with the reason in `error`."""
    try:
        with transaction.atomic():
            article = Article.objects.select_for_update().select_related("tenant").filter(pk=article_id).first()
            if article is None:
                return None
            language = settings_for(article.tenant).language
            digest = _digest(article, language)
            if article.status == Article.Status.INDEXED and article.indexed_hash == digest:
                return article
            pieces = chunk_text(article.text, title=article.title)
            backend = backend_for()
            # The counts are of what the index holds (PostgreSQL's lexemes), so the old
            # chunks are counted before they go and the new ones once indexed.
            removed = backend.term_counts(article_id=article.pk)
            Chunk.objects.filter(article_id=article.pk).delete()
            vectors = _vectors(article.title, pieces)
            Chunk.objects.bulk_create([
                Chunk(tenant_id=article.tenant_id, article_id=article.pk, ordinal=i, title=article.title,
                      heading=piece.heading[:600], text=piece.text, n_words=piece.n_words, embedding=vectors[i])
                for i, piece in enumerate(pieces)
            ])
            dense.revision_bump(tenant_id=article.tenant_id)
            backend.index_article(article_id=article.pk, language=language)
            terms_adjust(tenant_id=article.tenant_id, removed=removed, added=backend.term_counts(article_id=article.pk))
            article.status, article.error = Article.Status.INDEXED, ""
            article.chunk_count, article.indexed_hash, article.indexed_at = len(pieces), digest, timezone.now()
            article.save(update_fields=["status", "error", "chunk_count", "indexed_hash", "indexed_at"])
            # Retrieval starts with a tenant's first indexed article (selectors.retrieval_spec).
            if not KnowledgeSettings.objects.filter(tenant_id=article.tenant_id).exists():
                KnowledgeSettings.objects.create(tenant_id=article.tenant_id)
            return article
    except Exception as exc:
        log.exception("indexing article %s failed", article_id)
        Article.objects.filter(pk=article_id).update(status=Article.Status.FAILED, error=str(exc)[:1000])
        return Article.objects.filter(pk=article_id).first()


def tenant_reindex(*, tenant: Tenant, index: str = "async") -> int:
    """Index every article of the tenant again (after a change of language, or to retry
    failed ones). Returns how many."""
    ids = list(access_list(Article, tenant=tenant).values_list("pk", flat=True))
    with transaction.atomic():
        access_list(Article, tenant=tenant).update(status=Article.Status.PENDING, indexed_hash="")
        if index == "async":
            _index_on_commit(ids)
    if index == "inline":
        for pk in ids:
            article_index(article_id=pk)
    return len(ids)


# -- settings ---------------------------------------------------------------------------


def settings_update(*, tenant: Tenant, **changes) -> KnowledgeSettings:
    """Change some of enabled, top_k, min_score, language, mode. A new language
    re-indexes the tenant's articles (its stemming and stop words change)."""
    allowed = {"enabled", "top_k", "min_score", "language", "mode"}
    unknown = set(changes) - allowed
    if unknown:
        name = sorted(unknown)[0]
        raise KnowledgeInputError(name, f"{name} is not a setting; the settings are {', '.join(sorted(allowed))}.")
    if "enabled" in changes and not isinstance(changes["enabled"], bool):
        raise KnowledgeInputError("enabled", "enabled must be true or false.")
    if "top_k" in changes:
        k = changes["top_k"]
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_TOP_K:
            raise KnowledgeInputError("top_k", f"top_k must be an integer from 1 to {MAX_TOP_K}.")
    if "min_score" in changes:
        m = changes["min_score"]
        if isinstance(m, bool) or not isinstance(m, (int, float)) or not 0 <= m <= 1:
            raise KnowledgeInputError("min_score", "min_score must be a number from 0 to 1.")
        changes["min_score"] = float(m)
    if "mode" in changes and changes["mode"] not in MODES:
        raise KnowledgeInputError("mode", f"mode must be one of {', '.join(MODES)}.")
    if "language" in changes and changes["language"] not in LANGUAGES:
        raise KnowledgeInputError("language", f"language must be one of {', '.join(LANGUAGES)}.")
    with transaction.atomic():
        current, _ = KnowledgeSettings.objects.select_for_update().get_or_create(tenant=tenant)
        relanguage = "language" in changes and changes["language"] != current.language
        for k, v in changes.items():
            setattr(current, k, v)
        current.save()
        tenant.knowledge_settings = current  # the cached relation, for this instance's readers
        if relanguage:
            tenant_reindex(tenant=tenant)
    return current


# -- citations --------------------------------------------------------------------------


def citations_record(*, tenant_id: int, message_id, sources: Sequence[dict]) -> None:
    """The sources a reply's prompt held, by rank. Idempotent (a redelivered finish
    writes the same rows)."""
    if not sources:
        return
    Citation.objects.bulk_create([
        Citation(tenant_id=tenant_id, message_id=message_id, rank=i, article_id=s.get("article_id"),
                 title=str(s.get("title", ""))[:300], url=str(s.get("url") or "")[:1000],
                 section=str(s.get("section") or "")[:600], score=float(s.get("score", 0)))
        for i, s in enumerate(sources)
    ], ignore_conflicts=True)
