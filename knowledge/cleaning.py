"""An article's body as text: what is chunked, indexed and put in prompts.

HTML is parsed by Beautiful Soup (the standard library's parser underneath), never by
regular expressions: headings become Markdown headings (the chunker splits on them),
list items "- " lines, blocks paragraphs; styles, forms, frames and the like are
dropped. HTML that carries scripts (a <script> element, an on* handler attribute, a
javascript: URL) is refused rather than cleaned: an article is text for a prompt, and an
import that holds scripts is not what its author meant to publish. Markdown and plain
text pass through as they are (their headings and paragraphs are already lines), after
the same script check on any HTML they embed."""

from __future__ import annotations

import unicodedata

from bs4 import BeautifulSoup, Comment, NavigableString, Tag

DROPPED = {"style", "head", "noscript", "template", "iframe", "frame", "frameset", "object", "embed",
           "svg", "math", "canvas", "form", "button", "select", "input", "textarea", "nav", "footer"}
BLOCKS = {"p", "div", "section", "article", "main", "header", "aside", "blockquote", "pre", "table",
          "thead", "tbody", "tr", "ul", "ol", "dl", "dt", "dd", "figure", "figcaption", "hr", "address",
          "details", "summary", "body", "html"}
HEADINGS = {f"h{n}": n for n in range(1, 7)}
URL_ATTRIBUTES = {"href", "src", "action", "formaction", "data", "xlink:href"}


class UnsafeHtml(ValueError):
    """The HTML carries scripts."""


def script_problem(soup: BeautifulSoup) -> str | None:
    """What makes `soup` carry a script, or None."""
    if soup.find("script") is not None:
        return "a <script> element"
    for tag in soup.find_all(True):
        for name, value in tag.attrs.items():
            if name.lower().startswith("on"):
                return f"an {name.lower()} attribute on <{tag.name}>"
            if name.lower() in URL_ATTRIBUTES and isinstance(value, str):
                scheme = "".join(value.split()).lower()  # browsers ignore whitespace in it
                if scheme.startswith(("javascript:", "vbscript:")):
                    return f"a script URL in <{tag.name} {name}>"
    return None


def _parse(html: str) -> BeautifulSoup:
    soup = BeautifulSoup(html, "html.parser")
    problem = script_problem(soup)
    if problem:
        raise UnsafeHtml(f"HTML must not contain scripts; found {problem}.")
    return soup


def html_to_text(html: str) -> str:
    soup = _parse(html)
    for node in soup.find_all(string=lambda s: isinstance(s, Comment)):
        node.extract()
    for tag in soup.find_all(DROPPED):
        tag.decompose()
    for tag in soup.find_all(list(HEADINGS)):
        text = " ".join(tag.get_text(" ").split())
        tag.replace_with(NavigableString(f"\n\n{'#' * HEADINGS[tag.name]} {text}\n\n" if text else "\n\n"))
    for tag in soup.find_all("br"):
        tag.replace_with(NavigableString("\n"))
    for tag in soup.find_all("li"):
        tag.insert_before(NavigableString("\n- "))
        tag.insert_after(NavigableString("\n"))
    # A table row is one line, its cells' texts between " | " (a cell may hold paragraphs:
    # a DOCX's always do), so a row reads as a record in a chunk and a prompt.
    for row in soup.find_all("tr"):
        cells = [" ".join(cell.get_text(" ").split()) for cell in row.find_all(["td", "th"], recursive=False)]
        row.replace_with(NavigableString("\n\n" + " | ".join(cells) + "\n\n"))
    for tag in soup.find_all(BLOCKS):
        if isinstance(tag, Tag):
            tag.insert_before(NavigableString("\n\n"))
            tag.insert_after(NavigableString("\n\n"))
    return normalize_text(soup.get_text())


def check_embedded_html(text: str) -> None:
    """Markdown may embed HTML: refuse it on the same terms (cheap when there is none)."""
    if "<" in text:
        _parse(text)


def normalize_text(text: str) -> str:
    """Spaces within lines collapsed, at most one blank line between paragraphs, no
    control characters but newlines and tabs."""
    text = unicodedata.normalize("NFC", text.replace("\r\n", "\n").replace("\r", "\n"))
    text = "".join(ch for ch in text if ch in "\n\t" or unicodedata.category(ch)[0] != "C")
    lines, blank = [], False
    for raw in text.split("\n"):
        line = " ".join(raw.split())
        if not line:
            blank = bool(lines)
            continue
        if blank:
            lines.append("")
            blank = False
        lines.append(line)
    return "\n".join(lines)


def body_to_text(body: str, fmt: str) -> str:
    """The body of format `fmt` (markdown | text | html) as text; raises UnsafeHtml."""
    if fmt == "html":
        return html_to_text(body)
    check_embedded_html(body)
    if fmt == "markdown":
        # Keep the lines (headings, lists, code) as written; tidy only spacing and blanks.
        return normalize_markdown(body)
    return normalize_text(body)


def normalize_markdown(text: str) -> str:
    text = unicodedata.normalize("NFC", text.replace("\r\n", "\n").replace("\r", "\n"))
    text = "".join(ch for ch in text if ch in "\n\t" or unicodedata.category(ch)[0] != "C")
    out, blank = [], False
    for raw in text.split("\n"):
        line = raw.rstrip()
        if not line.strip():
            blank = bool(out)
            continue
        if blank:
            out.append("")
            blank = False
        out.append(line)
    return "\n".join(out)
