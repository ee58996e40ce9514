"""What a benchmark shows and keeps: progress lines on stderr, markdown tables on stdout,
the whole result as JSON under var/bench/."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from .paths import BASE_DIR

_T0 = time.monotonic()


def say(msg: str) -> None:
    """A progress line on stderr, with the seconds since the benchmark started."""
    print(f"[{time.monotonic() - _T0:7.1f}s] {msg}", file=sys.stderr, flush=True)


def fmt(value, digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def table(headers: Sequence[str], rows: Sequence[Sequence], *, digits: int = 1) -> str:
    """A GitHub-flavoured markdown table, columns padded so it also reads in a terminal."""
    cells = [[fmt(c, digits) for c in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)]

    def line(items: Sequence[str]) -> str:
        return "| " + " | ".join(s.ljust(w) for s, w in zip(items, widths, strict=True)) + " |"

    return "\n".join([line(headers), line(["-" * w for w in widths]), *(line(r) for r in cells)])


def heading(title: str) -> None:
    """A markdown section heading on stdout, set off by blank lines."""
    print(f"\n## {title}\n")


def write_json(path: str | Path, data: dict) -> Path:
    """`data` as indented JSON at `path` (relative paths from the repository root)."""
    path = Path(path)
    if not path.is_absolute():
        path = BASE_DIR / path
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, default=_json_default) + "\n")
    return path


def _json_default(obj):
    if hasattr(obj, "__dataclass_fields__"):
        return asdict(obj)
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, set):
        return sorted(obj)
    raise TypeError(f"not JSON serializable: {type(obj).__name__}")
