"""Splitting an article's text into chunks: along its headings, then its paragraphs, a few
hundred tokens each, with the heading path and the article's title kept as context.

Sizes are counted in words (this app loads no tokenizer; English runs about 1.3 tokens a
word with SmolLM2's, so MAX_WORDS ≈ 210 tokens). A chunk never spans two sections; the
paragraphs of a section are packed together up to MAX_WORDS; a paragraph longer than
that is split at sentence ends, and a sentence longer than that at MAX_WORDS words.
Fenced code blocks stay whole paragraphs."""

from __future__ import annotations

from dataclasses import dataclass

MAX_WORDS = 160
HEADING_SEPARATOR = " › "


@dataclass(frozen=True)
class ChunkText:
    heading: str  # the heading path under the title, e.g. "Refunds › Card payments"; "" at the top
    text: str

    @property
    def n_words(self) -> int:
        return len(self.text.split())


def chunk_text(text: str, *, title: str = "", max_words: int = MAX_WORDS) -> list[ChunkText]:
    chunks: list[ChunkText] = []
    for path, paragraphs in _sections(text):
        # A first heading that repeats the title adds nothing to the context.
        if path and title and path[0].strip().lower() == title.strip().lower():
            path = path[1:]
        heading = HEADING_SEPARATOR.join(path)
        for packed in _pack(paragraphs, max_words):
            chunks.append(ChunkText(heading=heading, text=packed))
    return chunks


def _heading(line: str) -> tuple[int, str] | None:
    stripped = line.lstrip()
    if not stripped.startswith("#") or len(line) - len(stripped) > 3:
        return None
    level = len(stripped) - len(stripped.lstrip("#"))
    rest = stripped[level:]
    if level > 6 or (rest and not rest.startswith((" ", "\t"))):
        return None  # "#hashtag" is not a heading
    text = rest.strip().rstrip("#").strip()
    return (level, text) if text else None


def _sections(text: str) -> list[tuple[list[str], list[str]]]:
    """[(heading path, paragraphs)], in order; sections without text are left out."""
    sections: list[tuple[list[str], list[str]]] = []
    stack: list[tuple[int, str]] = []
    paragraphs: list[str] = []
    current: list[str] = []
    fence: str | None = None

    def end_paragraph():
        if current:
            paragraphs.append("\n".join(current).strip())
            current.clear()

    def end_section():
        end_paragraph()
        kept = [p for p in paragraphs if p]
        if kept:
            sections.append(([h for _, h in stack], kept))
        paragraphs.clear()

    for line in text.split("\n"):
        marker = line.lstrip()[:3]
        if fence is not None:
            current.append(line)
            if marker == fence:
                fence = None
                end_paragraph()
            continue
        if marker in ("```", "~~~"):
            end_paragraph()
            fence = marker
            current.append(line)
            continue
        heading = _heading(line)
        if heading:
            end_section()
            level, name = heading
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, name))
            continue
        if not line.strip():
            end_paragraph()
        else:
            current.append(line)
    end_section()
    return sections


def _pack(paragraphs: list[str], max_words: int) -> list[str]:
    pieces: list[str] = []
    for p in paragraphs:
        pieces.extend([p] if len(p.split()) <= max_words else _split_long(p, max_words))
    out: list[str] = []
    current: list[str] = []
    size = 0
    for piece in pieces:
        n = len(piece.split())
        if current and size + n > max_words:
            out.append("\n\n".join(current))
            current, size = [], 0
        current.append(piece)
        size += n
    if current:
        out.append("\n\n".join(current))
    return out


def _split_long(paragraph: str, max_words: int) -> list[str]:
    sentences: list[str] = []
    start = 0
    for i, ch in enumerate(paragraph):
        if ch in ".!?" and (i + 1 == len(paragraph) or paragraph[i + 1].isspace()):
            sentences.append(paragraph[start:i + 1].strip())
            start = i + 1
    if paragraph[start:].strip():
        sentences.append(paragraph[start:].strip())
    out: list[str] = []
    current: list[str] = []
    for sentence in sentences:
        words = sentence.split()
        while len(words) > max_words:  # one sentence longer than a chunk
            if current:
                out.append(" ".join(current))
                current = []
            out.append(" ".join(words[:max_words]))
            words = words[max_words:]
        if current and len(current) + len(words) > max_words:
            out.append(" ".join(current))
            current = []
        current.extend(words)
    if current:
        out.append(" ".join(current))
    return out
