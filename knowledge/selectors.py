"""Knowledge reads: articles by id and by page (through `tenants.access`), a tenant's
retrieval settings as the request spec carries them, retrieval itself (the CPU tier's one
database read: a single indexed query scoped to the tenant), and the sources replies
cited."""

from __future__ import annotations

from collections.abc import Iterable

from tenants.access import access_list, access_owned
from tenants.models import Tenant

from . import embedding, fusion
from .models import Article, Citation, KnowledgeSettings, Source, SourceFile
from .search import Hit, backend_for, query_terms

# Words of the previous user message added to the newest message's: enough for a
# follow-up ("and how long does that take?") to keep its subject.
CONTEXT_TERMS = 8


def article_get(*, tenant: Tenant, article_id) -> Article:
    """Raises tenants.access.NotFound("article") for another tenant's id, like a missing one."""
    return access_owned(Article, "article", tenant=tenant, pk=article_id)


def article_list(*, tenant: Tenant, limit: int, offset: int = 0) -> tuple[list[Article], bool]:
    """A page of the tenant's articles, most recently changed first, and whether more follow."""
    rows = list(access_list(Article, tenant=tenant).defer("body", "text")[offset:offset + limit + 1])
    return rows[:limit], len(rows) > limit


def article_search(*, tenant: Tenant, q: str = "", limit: int = 200) -> tuple[list[Article], bool]:
    """The tenant's articles whose title, URL, tags or text hold `q` (case-insensitive;
    all of them when blank), most recently changed first, and whether more matched."""
    from django.db.models import Q

    rows = access_list(Article, tenant=tenant).defer("body", "text")
    q = (q or "").strip()
    if q:
        rows = rows.filter(Q(title__icontains=q) | Q(url__icontains=q) | Q(tags__icontains=q) | Q(text__icontains=q))
    found = list(rows[:limit + 1])
    return found[:limit], len(found) > limit


def articles_pending(*, tenant: Tenant) -> bool:
    return access_list(Article, tenant=tenant).filter(status=Article.Status.PENDING).exists()


def settings_for(tenant: Tenant) -> KnowledgeSettings:
    """The tenant's settings (an unsaved default row when it has none). Read through the
    tenant's relation, so an instance asks the database once."""
    try:
        return tenant.knowledge_settings
    except KnowledgeSettings.DoesNotExist:
        return KnowledgeSettings(tenant=tenant)


def retrieval_spec(tenant: Tenant) -> dict:
    """What the request spec carries for the CPU tier: {"k", "min_score", "language"};
    {} when the tenant switched retrieval off, or never had an article indexed (its
    settings row is made with its first): its prompts stay as they were, and the CPU
    tier reads no database for them."""
    try:
        s = tenant.knowledge_settings
    except KnowledgeSettings.DoesNotExist:
        return {}
    if not s.enabled:
        return {}
    return {"k": s.top_k, "min_score": s.min_score, "language": s.language, "mode": s.mode}


def retrieve(*, tenant_id: int, message: str, context: str = "", k: int, min_score: float = 0.0,
             language: str = "english", mode: str = "hybrid") -> list[Hit]:
    """The tenant's top `k` chunks for `message` (plus a few words of `context`, the
    previous user message), best first. `bm25`: one full-text query, the tenant inside
    it. `hybrid` (when an embedding model is installed): that query's top FUSE_DEPTH
    and the tenant's FUSE_DEPTH nearest chunks by vector, fused (`fusion`)."""
    terms = query_terms(message, language=language)
    for term in query_terms(context, language=language)[:CONTEXT_TERMS]:
        if term not in terms:
            terms.append(term)
    backend = backend_for()
    if mode not in ("hybrid", "dense") or not embedding.available():
        return backend.search(tenant_id=tenant_id, terms=terms, k=k, min_score=min_score, language=language)
    # "dense" (the vectors alone) is for measuring: no setting selects it.
    return fusion.hybrid_search(backend=backend, tenant_id=tenant_id, terms=terms if mode == "hybrid" else [],
                                question=message, k=k, min_score=min_score, language=language)


def passage(hit: Hit) -> str:
    """How a chunk reads in a prompt: its title (and heading) as context, then its text."""
    where = f"{hit.title} › {hit.heading}" if hit.heading else hit.title
    return f"{where}\n{hit.text}"


def sources_of(hits: Iterable[Hit]) -> list[dict]:
    """The articles behind `hits`, once each, in the order of their best chunk."""
    out: dict[str, dict] = {}
    for h in hits:
        if h.article_id not in out:
            out[h.article_id] = {"article_id": h.article_id, "title": h.title, "url": h.url, "section": h.heading,
                                 "score": h.score}
    return list(out.values())


def citations_for(*, tenant: Tenant, message_ids: Iterable) -> dict[str, list[dict]]:
    """{message id: its sources, by rank} for those of `message_ids` that cited any."""
    out: dict[str, list[dict]] = {}
    ids = list(message_ids)
    if not ids:
        return out
    for c in access_list(Citation, tenant=tenant).filter(message_id__in=ids).order_by("message_id", "rank"):
        out.setdefault(str(c.message_id), []).append(c.as_source())
    return out


def source_get(*, tenant: Tenant, source_id) -> Source:
    """Raises tenants.access.NotFound("source") for another tenant's id, like a missing one."""
    return access_owned(Source, "source", tenant=tenant, pk=source_id)


def source_list(*, tenant: Tenant) -> list[Source]:
    """The tenant's sources, oldest first, with how many articles each holds."""
    from django.db.models import Count

    return list(access_list(Source, tenant=tenant).defer("state").annotate(article_count=Count("articles")))


def source_files(*, source: Source) -> list[SourceFile]:
    """A files source's files, by name, without their bytes."""
    return list(source.files.defer("data"))


def source_errors(source: Source) -> list[dict]:
    """The last sync's per-page (per-file) errors: [{"where", "error"}]."""
    return list((source.state or {}).get("errors", []))


def manual_article_count(*, tenant: Tenant) -> int:
    """Articles typed in or imported (no source)."""
    return access_list(Article, tenant=tenant).filter(origin__isnull=True).count()
