"""Reading a bulk import into `services.ArticleInput`s: a JSONL file (one article per
line), a zip of `.md` / `.txt` / `.html` files, or a folder of them (the management
command). Parsing only: `services.articles_import` checks and stores them.

A file's title comes from its front matter (`title:` between `---` lines, with `url:`
and `tags:`), else its first heading (`# …`, or <title> / <h1> in HTML), else its name;
its `source` is its path, so importing the same files again updates the articles."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path, PurePosixPath

from bs4 import BeautifulSoup

from .services import MAX_BODY_CHARS, ArticleInput, KnowledgeInputError

FORMAT_OF = {".md": "markdown", ".markdown": "markdown", ".txt": "text", ".html": "html", ".htm": "html"}
MAX_UPLOAD_BYTES = 20 * 1024 * 1024
# One import's articles, whatever its format: a zip's files or a JSONL file's records.
# Checked on the parsed count, before anything is cleaned or a transaction opens.
MAX_ARTICLES = 2000
MAX_FILES = MAX_ARTICLES
MAX_UNPACKED_BYTES = 100 * 1024 * 1024
MAX_FILE_BYTES = MAX_BODY_CHARS * 4  # UTF-8: at most 4 bytes a character


def parse_jsonl(data: bytes, *, field: str = "file") -> list[ArticleInput]:
    """One JSON object a line: {"title", "body", "format"?, "url"?, "tags"?, "source"?};
    at most MAX_ARTICLES of them, counted before any line is parsed."""
    if len(data) > MAX_UPLOAD_BYTES:
        raise KnowledgeInputError(field, f"the file is over {MAX_UPLOAD_BYTES // 2**20} MiB.")
    lines = [(n, line) for n, line in enumerate(_decode(data, field).split("\n"), 1) if line.strip()]
    if len(lines) > MAX_ARTICLES:
        raise KnowledgeInputError(field, f"the file holds {len(lines)} articles; the limit is {MAX_ARTICLES}.")
    items = []
    for lineno, line in lines:
        label = f"{field}[{len(items)}]"
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError):
            raise KnowledgeInputError(label, f"line {lineno} is not valid JSON.") from None
        if not isinstance(obj, dict):
            raise KnowledgeInputError(label, f"line {lineno} must be a JSON object.")
        unknown = set(obj) - {"title", "body", "format", "url", "tags", "source"}
        if unknown:
            raise KnowledgeInputError(f"{label}.{sorted(unknown)[0]}", f"line {lineno}: unknown field.")
        source = obj.get("source", "")
        items.append(ArticleInput(title=obj.get("title"), body=obj.get("body"),
                                  format=obj.get("format", "markdown"), url=obj.get("url") or "",
                                  tags=obj.get("tags"), source=source if isinstance(source, str) else ""))
    return items


def parse_zip(data: bytes, *, field: str = "file") -> list[ArticleInput]:
    if len(data) > MAX_UPLOAD_BYTES:
        raise KnowledgeInputError(field, f"the file is over {MAX_UPLOAD_BYTES // 2**20} MiB.")
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        members = [m for m in archive.infolist() if not m.is_dir()]
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, ValueError, OSError):
        raise KnowledgeInputError(field, "the file is not a readable zip archive.") from None
    members = [m for m in members if _wanted(m.filename)]
    if not members:
        raise KnowledgeInputError(field, "the zip holds no .md, .txt or .html files.")
    if len(members) > MAX_FILES:
        raise KnowledgeInputError(field, f"the zip holds {len(members)} files; the limit is {MAX_FILES}.")
    if sum(m.file_size for m in members) > MAX_UNPACKED_BYTES:
        raise KnowledgeInputError(field, f"the zip unpacks to over {MAX_UNPACKED_BYTES // 2**20} MiB.")
    items = []
    for m in sorted(members, key=lambda m: m.filename):
        label = f"{field}[{m.filename}]"
        if m.file_size > MAX_FILE_BYTES:
            raise KnowledgeInputError(f"{label}.body", f"the file is over {MAX_FILE_BYTES} bytes.")
        try:
            with archive.open(m) as fh:
                raw = fh.read(MAX_FILE_BYTES + 1)
        except (zipfile.BadZipFile, EOFError, ValueError, OSError, NotImplementedError, RuntimeError):
            # A bad CRC, a truncated member, an encrypted one, an unknown compression.
            raise KnowledgeInputError(label, "this member of the zip cannot be read (corrupt or encrypted).") from None
        items.append(file_article(m.filename, _decode(raw, label)))
    return items


def parse_folder(path: Path) -> list[ArticleInput]:
    files = sorted(p for p in path.rglob("*") if p.is_file() and _wanted(p.relative_to(path).as_posix()))
    if not files:
        raise KnowledgeInputError("path", f"{path} holds no .md, .txt or .html files.")
    items = []
    for p in files:
        rel = p.relative_to(path).as_posix()
        if p.stat().st_size > MAX_FILE_BYTES:
            raise KnowledgeInputError(f"path[{rel}].body", f"the file is over {MAX_FILE_BYTES} bytes.")
        items.append(file_article(rel, _decode(p.read_bytes(), f"path[{rel}]")))
    return items


def parse_path(path: Path) -> list[ArticleInput]:
    """A folder of files, a zip, or a JSONL file (the management command's argument)."""
    if path.is_dir():
        return parse_folder(path)
    if not path.is_file():
        raise KnowledgeInputError("path", f"{path} is neither a folder nor a file.")
    data = path.read_bytes()
    if path.suffix.lower() == ".zip":
        return parse_zip(data, field="path")
    if path.suffix.lower() in (".jsonl", ".ndjson"):
        return parse_jsonl(data, field="path")
    if path.suffix.lower() in FORMAT_OF:
        return [file_article(path.name, _decode(data, "path"))]
    raise KnowledgeInputError("path", "expected a folder, a .zip, a .jsonl, or a .md/.txt/.html file.")


def file_article(name: str, text: str) -> ArticleInput:
    """One file as an article: front matter, title, format by extension."""
    fmt = FORMAT_OF[PurePosixPath(name).suffix.lower()]
    meta, body = _front_matter(text) if fmt != "html" else ({}, text)
    title = meta.get("title") or _first_heading(body, fmt) or _title_from_name(name)
    tags = meta.get("tags")
    tag_list = [t.strip() for t in tags.strip("[]").split(",") if t.strip()] if tags else []
    return ArticleInput(title=title, body=body, format=fmt, url=meta.get("url", ""), tags=tag_list, source=name)


def _wanted(name: str) -> bool:
    parts = PurePosixPath(name).parts
    if any(p.startswith(".") or p == "__MACOSX" for p in parts):
        return False
    return PurePosixPath(name).suffix.lower() in FORMAT_OF


def _decode(data: bytes, field: str) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise KnowledgeInputError(field, "the file is not UTF-8 text.") from None


def _front_matter(text: str) -> tuple[dict[str, str], str]:
    lines = text.lstrip("\ufeff").split("\n")
    if not lines or lines[0].strip() != "---":
        return {}, text
    for end in range(1, min(len(lines), 50)):
        if lines[end].strip() == "---":
            meta = {}
            for line in lines[1:end]:
                key, sep, value = line.partition(":")
                if sep:
                    meta[key.strip().lower()] = value.strip().strip('"').strip("'")
            return meta, "\n".join(lines[end + 1:]).lstrip("\n")
    return {}, text


def _first_heading(body: str, fmt: str) -> str:
    if fmt == "html":
        soup = BeautifulSoup(body, "html.parser")
        for tag in (soup.find("title"), soup.find("h1")):
            if tag is not None and tag.get_text(strip=True):
                return " ".join(tag.get_text(" ").split())
        return ""
    for line in body.split("\n"):
        if line.startswith("# "):
            return line[2:].strip()
        if line.strip():
            return ""
    return ""


def _title_from_name(name: str) -> str:
    stem = PurePosixPath(name).stem.replace("-", " ").replace("_", " ").strip()
    return stem[:1].upper() + stem[1:] if stem else name
