"""llms.txt (llmstxt.org) as a crawl's list of pages, and Markdown pages as articles.

An llms.txt is a site's Markdown index written for language models: an H1 (the site's
name), an optional `> summary`, then H2 sections of list items, each a link to a page
(`- [Returns](https://help.example.com/returns.md): how to send an item back`). The
pages it lists are what the site's owner chose to give a model, often as Markdown
(`.md` twins of the HTML pages), so a website source whose URL is an llms.txt syncs
exactly those pages, as a sitemap's are synced, and a Markdown page keeps its headings
(chunks and citations follow them). The "Optional" section is synced too: a help centre
wants every answer it has, not the shortest context.

The file is tenant-supplied text read on the CPU tier: its size is capped by the fetch,
lines are cut at MAX_LINE characters before the link pattern reads them (so the pattern's
work is bounded by the file's size), and at most MAX_LINKS links are taken."""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urldefrag, urljoin, urlsplit

MAX_LINE = 2000
MAX_LINKS = 5000
# A Markdown inline link: [name](url) or [name](<url>), an optional "title" after the URL.
_LINK = re.compile(r"\[([^\[\]\n]{0,300})\]\(\s*<?([^()\[\]\s<>]{1,1000})>?(?:\s+\"[^\"\n]{0,300}\")?\s*\)")
_LIST_ITEM = re.compile(r"^\s{0,3}[-*+]\s")


@dataclass(frozen=True)
class Link:
    url: str    # absolute, without its fragment
    name: str   # the link's text: a title for a page that states none


def is_llms_txt(url: str) -> bool:
    """Whether a source URL names an llms.txt (`/llms.txt`, `/docs/llms.txt`); the
    whole-site `llms-full.txt` is a page, not a list."""
    return urlsplit(url).path.lower().rsplit("/", 1)[-1] == "llms.txt"


def llms_txt_links(text: str, *, base: str) -> list[Link]:
    """The pages an llms.txt lists, in order, each once: the first link of every list
    item (a link in the summary or in prose is not a page entry)."""
    out: list[Link] = []
    seen: set[str] = set()
    for line in text.splitlines():
        line = line[:MAX_LINE]
        if not _LIST_ITEM.match(line):
            continue
        m = _LINK.search(line)
        if m is None:
            continue
        url = _absolute(m.group(2), base)
        if url and url not in seen:
            seen.add(url)
            out.append(Link(url=url, name=" ".join(m.group(1).split())))
            if len(out) >= MAX_LINKS:
                break
    return out


def markdown_links(text: str, *, base: str) -> list[str]:
    """Every inline link of a Markdown page (absolute, without fragments): what a crawl
    that follows links follows from a Markdown page."""
    out: list[str] = []
    for line in text.splitlines():
        for m in _LINK.finditer(line[:MAX_LINE]):
            url = _absolute(m.group(2), base)
            if url and url not in out:
                out.append(url)
    return out


def markdown_title(text: str) -> str:
    """A Markdown page's own title: its first level-1 heading, else ""."""
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("# "):
            return " ".join(stripped[2:].strip().rstrip("#").split())
    return ""


def _absolute(href: str, base: str) -> str:
    href = href.strip()
    if not href or href.startswith(("#", "mailto:", "javascript:", "tel:")):
        return ""
    url = urldefrag(urljoin(base, href))[0]
    return url if urlsplit(url).scheme in ("http", "https") else ""
