"""A source's sync, as a chain of short steps on the CPU tier's queue: each step takes
the source's row lock, works through its frontier for at most STEP_S (fetching,
extracting, indexing what changed), saves the frontier and the counts on the row (what
the console polls), and sends the next step. A chat request on the same queue waits for
one step at most, never for a whole crawl; a worker that dies mid-sync loses one step,
which the scheduler notices (`sources.sources_start_due`).

A step is idempotent: it carries the run and its number, and does nothing unless the
row's state is at that run and that number (a redelivered step, or one of a sync that
was started over, stops at once).

Websites: the start URL (or every URL of a sitemap, and of a sitemap index's sitemaps)
first; links are followed breadth-first to `max_depth`, on the start's host unless
`any_host`, never more than `max_pages` fetched; robots.txt (its rules for our user
agent, and its Crawl-delay) is respected; requests are at least `delay_ms` apart.
Every request goes through `outbound.fetch` (SSRF guard, time and size caps).

Change detection: a page already held is asked for with If-None-Match / If-Modified-Since;
a 304 costs a request and nothing else (its stored links are followed as before). A page
that comes back is hashed (title and extracted text): the same hash updates nothing. A
changed page is re-chunked and re-indexed. A page that answers 404 or 410, or that the
crawl no longer reaches, is removed when the sync ends; one that failed otherwise
(timeout, 5xx) keeps its article. Files: each file's bytes are hashed likewise."""

from __future__ import annotations

import hashlib
import logging
import time
from urllib import robotparser
from urllib.parse import urlsplit

from django.db import transaction
from django.utils import timezone
from lxml import etree

from . import llms_txt, outbound
from .extraction import ExtractionError, file_page, html_page, markdown_page
from .models import Article, Source
from .services import (
    ArticleInput,
    KnowledgeInputError,
    article_delete,
    article_index,
    article_input_clean,
)
from .sources import _next_due, sync_step_send

log = logging.getLogger(__name__)

STEP_S = 1.0
# A wait for the next request slot longer than this ends the step (the next is sent
# with a countdown) instead of sleeping on the shared worker.
MAX_SLEEP_S = 0.05
MAX_ERRORS = 20
MAX_SITEMAPS = 20
PAGE_TYPES = ("text/html", "application/xhtml+xml", "text/plain", "text/markdown", "application/pdf")
SITEMAP_TYPES = ("application/xml", "text/xml", "text/plain", "application/x-xml")
LLMS_TXT_TYPES = ("text/plain", "text/markdown", "text/x-markdown")
MAX_LLMS_TXT_BYTES = 1024 * 1024


def sync_step(*, source_id, run: str, step: int) -> None:
    with transaction.atomic():
        source = Source.objects.select_for_update().filter(pk=source_id).first()
        if source is None or str(source.run) != str(run) or source.state.get("step", 0) != step:
            return
        if source.status not in (Source.Status.QUEUED, Source.Status.SYNCING):
            return
        try:
            if step == 0:
                _start(source)
            done, wait = (_website_work if source.kind == Source.Kind.WEBSITE else _files_work)(source)
            if done:
                _finish(source)
        except outbound.FetchRefused as exc:
            # Only the start (robots.txt, the sitemap, the start page) fails a sync whole.
            done, wait = True, 0
            _fail(source, str(exc))
        except Exception as exc:
            log.exception("sync step %s of source %s failed", step, source_id)
            done, wait = True, 0
            _fail(source, f"{exc.__class__.__name__}: {exc}")
        source.state["step"] = step + 1
        source.progressed_at = timezone.now()
        source.save()
        if not done:
            sync_step_send(source_id=source.pk, run=run, step=step + 1, countdown=wait)


# -- the start and the end ---------------------------------------------------------------


def _start(source: Source) -> None:
    source.status = Source.Status.SYNCING
    state = {"step": 0, "kept": [], "errors": [], "next_at": 0.0}
    if source.kind == Source.Kind.FILES:
        state["queue"] = list(source.files.order_by("name").values_list("pk", flat=True))
        source.found = len(state["queue"])
    else:
        state.update(_website_frontier(source))
        source.found = len(state["queue"])
    source.state = state


def _finish(source: Source) -> None:
    kept = set(source.state.get("kept", []))
    removed = 0
    for article in Article.objects.filter(origin=source).only("pk", "tenant_id", "locator"):
        if article.locator not in kept:
            article_delete(article=article)
            removed += 1
    source.changed += removed
    source.status = Source.Status.SYNCED
    source.error = ""
    source.last_synced_at = timezone.now()
    source.next_sync_at = _next_due(source)
    # The frontier is done with; the errors stay for the console to show.
    source.state = {"step": source.state.get("step", 0), "errors": source.state.get("errors", [])}


def _fail(source: Source, message: str) -> None:
    source.status = Source.Status.FAILED
    source.error = message[:2000]
    source.last_synced_at = timezone.now()
    source.next_sync_at = _next_due(source)
    source.state = {"step": source.state.get("step", 0), "errors": source.state.get("errors", [])}


def _error(source: Source, where: str, message: str) -> None:
    source.failed += 1
    errors = source.state.setdefault("errors", [])
    if len(errors) < MAX_ERRORS:
        errors.append({"where": where, "error": message[:500]})


# -- websites ----------------------------------------------------------------------------


def _website_frontier(source: Source) -> dict:
    """The first frontier: robots.txt read, then the sitemap's pages or the start page."""
    parts = urlsplit(source.url)
    origin = f"{parts.scheme}://{parts.netloc}"
    robots = ""
    try:
        r = outbound.fetch(origin + "/robots.txt", accept=("text/",), max_bytes=512 * 1024)
        robots = r.text()
    except outbound.FetchRefused as exc:
        if exc.code not in ("status", "content_type"):
            raise  # an address refused or a site that does not answer: the sync fails
    state = {"host": parts.hostname, "robots": robots, "seen": [source.url]}
    if parts.path.lower().endswith(".xml"):
        urls = _sitemap_urls(source.url)
        allowed = [u for u in urls if _in_scope(source, state, u)][:source.max_pages]
        state["seen"] = allowed
        state["queue"] = [[u, 0] for u in allowed]
        state["follow"] = False
    elif llms_txt.is_llms_txt(source.url):
        links = [link for link in _llms_txt_pages(source.url) if _in_scope(source, state, link.url)]
        links = links[:source.max_pages]
        state["seen"] = [link.url for link in links]
        state["queue"] = [[link.url, 0] for link in links]
        state["names"] = {link.url: link.name for link in links}  # titles for pages that state none
        state["follow"] = False
    else:
        state["queue"] = [[source.url, 0]]
        state["follow"] = True
    return state


def _sitemap_urls(url: str) -> list[str]:
    urls: list[str] = []
    pending, visited = [url], 0
    while pending and visited < MAX_SITEMAPS:
        current = pending.pop(0)
        visited += 1
        r = outbound.fetch(current, accept=SITEMAP_TYPES)
        try:
            root = etree.fromstring(r.body, parser=etree.XMLParser(resolve_entities=False, no_network=True,
                                                                  huge_tree=False))
        except etree.XMLSyntaxError as exc:
            raise outbound.FetchRefused("content_type", f"{current} is not a sitemap ({exc}).") from None
        locs = [el.text.strip() for el in root.iter("{*}loc") if el.text and el.text.strip()]
        if etree.QName(root).localname == "sitemapindex":
            pending.extend(locs)
        else:
            urls.extend(u for u in locs if u not in urls)
    return urls


def _llms_txt_pages(url: str) -> list[llms_txt.Link]:
    """The pages an llms.txt lists; one that lists none is refused (most likely not an
    llms.txt at all), and so the sync fails with a message that says what one holds."""
    r = outbound.fetch(url, accept=LLMS_TXT_TYPES, max_bytes=MAX_LLMS_TXT_BYTES)
    links = llms_txt.llms_txt_links(r.text(), base=r.url)
    if not links:
        raise outbound.FetchRefused("content_type", f"{url} lists no pages: an llms.txt lists them as Markdown "
                                                    f"links in list items, e.g. '- [Returns](/returns.md)'.")
    return links


_parsed: dict[str, robotparser.RobotFileParser] = {}


def _robots(state: dict) -> robotparser.RobotFileParser | None:
    """The site's robots.txt, parsed once per text (a step checks every link against it)."""
    text = state.get("robots") or ""
    if not text:
        return None
    if text not in _parsed:
        parser = robotparser.RobotFileParser()
        parser.parse(text.splitlines())
        _parsed.clear()  # one site at a time is all a step needs
        _parsed[text] = parser
    return _parsed[text]


def _in_scope(source: Source, state: dict, url: str) -> bool:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        return False
    if not source.any_host and parts.hostname != state.get("host"):
        return False
    robots = _robots(state)
    return robots is None or robots.can_fetch(outbound.USER_AGENT, url)


def _website_work(source: Source) -> tuple[bool, float]:
    state = source.state
    robots = _robots(state)
    delay = source.delay_ms / 1000
    if robots is not None:
        delay = max(delay, float(robots.crawl_delay(outbound.USER_AGENT) or 0))
    deadline = time.monotonic() + STEP_S
    seen = set(state["seen"])
    while state["queue"]:
        if source.fetched >= source.max_pages:
            state["queue"] = []
            break
        wait = state.get("next_at", 0.0) - time.time()
        if wait > 0:
            if wait > MAX_SLEEP_S or time.monotonic() + wait > deadline:
                return False, wait
            time.sleep(wait)
        if time.monotonic() > deadline:
            return False, 0
        url, depth = state["queue"].pop(0)
        state["next_at"] = time.time() + delay
        links = _page_sync(source, url)
        if state.get("follow") and depth < source.max_depth:
            for link in links:
                if link not in seen and _in_scope(source, state, link):
                    seen.add(link)
                    state["queue"].append([link, depth + 1])
                    source.found += 1
        state["seen"] = list(seen)
    return True, 0


def _page_sync(source: Source, url: str) -> list[str]:
    """Fetch one page and bring its article up to date; the page's links."""
    kept = source.state["kept"]
    existing = Article.objects.filter(origin=source, locator=url).first()
    headers = {}
    if existing is not None and existing.etag:
        headers["If-None-Match"] = existing.etag
    if existing is not None and existing.last_modified:
        headers["If-Modified-Since"] = existing.last_modified
    try:
        response = outbound.fetch(url, accept=PAGE_TYPES, headers=headers)
    except outbound.FetchRefused as exc:
        source.fetched += 1
        gone = exc.code == "status" and (" 404" in str(exc) or " 410" in str(exc))
        if existing is not None and not gone:
            kept.append(existing.locator)  # a page that failed for now keeps its article
        if not gone:
            _error(source, url, str(exc))
        return []
    source.fetched += 1
    if response.status == 304 and existing is not None:
        kept.append(existing.locator)
        return list(existing.links)
    if response.content_type == "application/pdf":
        try:
            page = file_page(urlsplit(response.url).path.rsplit("/", 1)[-1] or "document.pdf", response.body)
        except ExtractionError as exc:
            _error(source, url, str(exc))
            return []
    elif "html" in response.content_type:
        page = html_page(response.text(), url=response.url)
    else:  # Markdown or plain text (an llms.txt's pages are often Markdown): headings kept
        page = markdown_page(response.text(), url=response.url, name=source.state.get("names", {}).get(url, ""))
    locator = page.canonical if page.canonical and _in_scope(source, source.state, page.canonical) else response.url
    if locator in kept:
        return page.links  # a redirect or a canonical that leads to a page already synced
    if not page.text.strip():
        return page.links  # an index page: links, nothing to answer from
    article = existing if existing is not None and existing.locator == locator else \
        Article.objects.filter(origin=source, locator=locator).first()
    _upsert(source, article, locator=locator, title=page.title, text=page.text, url=locator, links=page.links,
            etag=response.headers.get("etag", ""), last_modified=response.headers.get("last-modified", ""))
    return page.links


def _upsert(source: Source, article: Article | None, *, locator: str, title: str, text: str, url: str,
            links: list[str] | None = None, etag: str = "", last_modified: str = "") -> None:
    """Create, update or leave the article at `locator`; counts a change, or an error
    (text that cannot be stored: too long, say)."""
    digest = hashlib.sha256(f"{title}\n{text}".encode()).hexdigest()
    caching = {"etag": etag[:200], "last_modified": last_modified[:64], "links": (links or [])[:500]}
    if article is not None and article.content_hash == digest and article.status == Article.Status.INDEXED:
        Article.objects.filter(pk=article.pk).update(**caching)
        source.state["kept"].append(locator)
        return
    try:
        data, clean_text = article_input_clean(ArticleInput(title=title or locator, body=text, url=url[:1000]))
    except KnowledgeInputError as exc:
        if article is not None:
            source.state["kept"].append(locator)
        _error(source, locator, f"{exc.field}: {exc}")
        return
    fields = {"title": data.title, "body": data.body, "format": Article.Format.MARKDOWN, "text": clean_text,
              "url": data.url, "content_hash": digest, "status": Article.Status.PENDING, "error": "", **caching}
    if article is None:
        article = Article.objects.create(tenant_id=source.tenant_id, origin=source, locator=locator, **fields)
    else:
        for k, v in fields.items():
            setattr(article, k, v)
        article.save()
    article_index(article_id=article.pk)
    source.changed += 1
    source.state["kept"].append(locator)


# -- files -------------------------------------------------------------------------------


def _files_work(source: Source) -> tuple[bool, float]:
    deadline = time.monotonic() + STEP_S
    queue = source.state["queue"]
    while queue:
        if time.monotonic() > deadline:
            return False, 0
        f = source.files.filter(pk=queue.pop(0)).first()
        if f is None:
            continue
        source.fetched += 1
        article = Article.objects.filter(origin=source, locator=f.name).first()
        if article is not None and article.etag == f.sha256 and article.status == Article.Status.INDEXED:
            source.state["kept"].append(f.name)
            continue
        try:
            page = file_page(f.name, bytes(f.data))
        except ExtractionError as exc:
            _error(source, f.name, str(exc))
            continue
        _upsert(source, article, locator=f.name, title=page.title, text=page.text, url="", etag=f.sha256)
    return True, 0
