"""What an uploaded file is, decided from its first bytes: the client's file name and
Content-Type are not trusted (a page could call an HTML file `cat.png`). Each kind is a
group a tenant allows or not (`AttachmentPolicy.kinds`); only raster images are ever
shown inline, everything else is served as a download (`Content-Disposition:
attachment`). SVG is not an image here: it can carry script."""

from __future__ import annotations

from dataclasses import dataclass

IMAGE, PDF, TEXT = "image", "pdf", "text"
KINDS = {IMAGE: "Images (PNG, JPEG, GIF, WebP)", PDF: "PDF documents", TEXT: "Plain text (.txt, .csv, .log)"}
DEFAULT_KINDS = [IMAGE, PDF, TEXT]
INLINE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
TEXT_SUFFIXES = {".txt": "text/plain", ".log": "text/plain", ".md": "text/plain", ".csv": "text/csv"}


@dataclass(frozen=True)
class Sniffed:
    kind: str
    content_type: str

    @property
    def inline(self) -> bool:
        return self.content_type in INLINE_TYPES


def sniff(head: bytes, *, name: str, whole: bytes | None = None) -> Sniffed | None:
    """The file's kind from its first bytes (`head`, 16+ bytes), or None when it is none
    of the kinds Tandem serves. Text is text only when all of it (`whole`) is UTF-8 with
    no NUL, and its name ends in a text suffix."""
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return Sniffed(IMAGE, "image/png")
    if head.startswith(b"\xff\xd8\xff"):
        return Sniffed(IMAGE, "image/jpeg")
    if head[:6] in (b"GIF87a", b"GIF89a"):
        return Sniffed(IMAGE, "image/gif")
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return Sniffed(IMAGE, "image/webp")
    if head.startswith(b"%PDF-"):
        return Sniffed(PDF, "application/pdf")
    suffix = "." + name.rsplit(".", 1)[-1].lower() if "." in name else ""
    if suffix in TEXT_SUFFIXES and whole is not None and b"\x00" not in whole:
        try:
            whole.decode("utf-8")
        except UnicodeDecodeError:
            return None
        return Sniffed(TEXT, TEXT_SUFFIXES[suffix])
    return None


def served_type(content_type: str) -> str:
    """The Content-Type a stored file is served with."""
    return f"{content_type}; charset=utf-8" if content_type.startswith("text/") else content_type
