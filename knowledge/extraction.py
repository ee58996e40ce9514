"""Turning what a sync fetched or a person uploaded into an article's Markdown: a web
page's main text (trafilatura: navigation, footers and boilerplate dropped; headings
kept as Markdown headings), its title, canonical URL and links; a PDF's pages (pypdf),
each under a `# Page N` heading; a DOCX's text (mammoth), its heading styles as
Markdown headings, its lists and tables kept; HTML, Markdown and text files.

Headings matter beyond reading: chunks follow them (`chunking`), and a citation names the
passage's heading path, so an answer can point to "Warranty.pdf › Page 3" or a page's
section. Parsing runs on the CPU tier only (a sync's task). Every refusal is an
`ExtractionError` whose message says what to change."""

from __future__ import annotations

import io
import zipfile
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from urllib.parse import urldefrag, urljoin, urlsplit

import trafilatura
from lxml import html as lxml_html

from .cleaning import UnsafeHtml, body_to_text, html_to_text
from .llms_txt import markdown_links, markdown_title

MAX_FILE_BYTES = 10 * 1024 * 1024
MAX_PDF_PAGES = 500
# A DOCX is a zip: what its members unpack to, and how much larger than the file they
# may be, are checked before anything is inflated (a zip bomb is refused unread).
MAX_UNPACKED_BYTES = 50 * 1024 * 1024
MAX_RATIO = 100
# mammoth maps Heading 1-6 itself; a document's Title style is its top heading.
DOCX_STYLES = "p[style-name='Title'] => h1:fresh"
FILE_TYPES = {".pdf": "pdf", ".docx": "docx", ".html": "html", ".htm": "html", ".md": "markdown",
              ".markdown": "markdown", ".txt": "text"}


class ExtractionError(ValueError):
    pass


@dataclass
class Page:
    title: str
    text: str                   # Markdown
    canonical: str = ""         # <link rel=canonical>, when the page states one
    links: list[str] = field(default_factory=list)


def html_page(body: str, *, url: str) -> Page:
    """A web page's main text, title, canonical URL and the links it holds (absolute,
    without fragments)."""
    text = trafilatura.extract(body, url=url, output_format="markdown", include_formatting=True,
                               include_links=False, include_tables=True, favor_recall=True) or ""
    meta = trafilatura.extract_metadata(body, default_url=url)
    title = (meta.title if meta else "") or ""
    canonical = ""
    links: list[str] = []
    try:
        tree = lxml_html.fromstring(body)
    except (ValueError, lxml_html.etree.ParserError):
        tree = None
    if tree is not None:
        for el in tree.iter("link"):
            if (el.get("rel") or "").lower() == "canonical" and el.get("href"):
                canonical = urldefrag(urljoin(url, el.get("href").strip()))[0]
                break
        seen: set[str] = set()
        for el in tree.iter("a"):
            href = (el.get("href") or "").strip()
            if not href or href.startswith(("mailto:", "javascript:", "tel:", "#")):
                continue
            link = urldefrag(urljoin(url, href))[0]
            if link not in seen:
                seen.add(link)
                links.append(link)
    if not title:
        title = _first_heading(text) or url
    return Page(title=" ".join(title.split())[:300], text=text, canonical=canonical, links=links)


def markdown_page(body: str, *, url: str, name: str = "") -> Page:
    """A Markdown (or plain text) page as it is: its headings stay headings. Its title is
    its first `# ` heading, else `name` (the link text an llms.txt gave it), else the
    URL's last path segment."""
    title = markdown_title(body) or name or urlsplit(url).path.rstrip("/").rsplit("/", 1)[-1] or url
    return Page(title=" ".join(title.split())[:300], text=body, links=markdown_links(body, base=url))


def file_page(name: str, data: bytes) -> Page:
    """An uploaded file's article: its title (the name, or the document's own) and text."""
    kind = FILE_TYPES.get(PurePosixPath(name.lower()).suffix)
    if kind is None:
        raise ExtractionError(f"{name}: upload a PDF, DOCX, HTML, Markdown or text file "
                              f"({', '.join(sorted(FILE_TYPES))}).")
    if len(data) > MAX_FILE_BYTES:
        raise ExtractionError(f"{name} is {len(data)} bytes; the limit is {MAX_FILE_BYTES // 2**20} MiB.")
    if kind == "pdf":
        text = pdf_text(data, name=name)
    elif kind == "docx":
        text = docx_text(data, name=name)
    else:
        try:
            decoded = data.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise ExtractionError(f"{name} is not UTF-8 text.") from None
        text = html_page(decoded, url="").text if kind == "html" else body_to_text(decoded, kind)
    if not text.strip():
        raise ExtractionError(f"{name} has no text to index (a scanned PDF needs text recognition first).")
    return Page(title=name, text=text)


def pdf_text(data: bytes, *, name: str) -> str:
    from pypdf import PdfReader
    from pypdf.errors import PyPdfError

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            raise ExtractionError(f"{name} is encrypted.")
        n = len(reader.pages)
        if n > MAX_PDF_PAGES:
            raise ExtractionError(f"{name} has {n} pages; the limit is {MAX_PDF_PAGES}.")
        parts = []
        for i, page in enumerate(reader.pages, 1):
            text = (page.extract_text() or "").strip()
            if text:
                parts.append(f"# Page {i}\n\n{_paragraphs(text)}")
    except PyPdfError as exc:
        raise ExtractionError(f"{name} is not a readable PDF ({exc}).") from None
    return "\n\n".join(parts)


def docx_text(data: bytes, *, name: str) -> str:
    """A DOCX as Markdown through mammoth (what markitdown itself uses for DOCX, without
    markitdown's file-type model): its heading styles become headings, and its lists and
    tables are kept, which python-docx's paragraphs leave out. Images are not read."""
    import mammoth

    _check_zip(data, name=name)
    try:
        result = mammoth.convert_to_html(io.BytesIO(data), style_map=DOCX_STYLES,
                                         convert_image=mammoth.images.img_element(lambda image: {}))
    except Exception as exc:  # mammoth raises several kinds for a damaged file
        raise ExtractionError(f"{name} is not a readable DOCX ({exc.__class__.__name__}).") from None
    try:
        return html_to_text(result.value)
    except UnsafeHtml as exc:
        raise ExtractionError(f"{name}: {exc}") from None


def _check_zip(data: bytes, *, name: str) -> None:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            unpacked = sum(i.file_size for i in z.infolist())
    except zipfile.BadZipFile:
        raise ExtractionError(f"{name} is not a readable DOCX (not a zip).") from None
    if unpacked > MAX_UNPACKED_BYTES or unpacked > MAX_RATIO * max(len(data), 1):
        raise ExtractionError(f"{name} unpacks to {unpacked} bytes; refused (the limit is "
                              f"{MAX_UNPACKED_BYTES // 2**20} MiB, {MAX_RATIO}× the file).")


def _paragraphs(text: str) -> str:
    """PDF text as paragraphs: pypdf ends every line; a blank line stays a break."""
    return "\n".join(line.rstrip() for line in text.splitlines())


def _first_heading(text: str) -> str:
    for line in text.splitlines():
        if line.startswith("#"):
            return line.lstrip("#").strip()
    return ""
