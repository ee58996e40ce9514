"""Hand-over phrases as a person edits them: the built-in set (on or off), their own
plain phrases, and, behind "advanced", regular expressions. All three are stored in the
one field the CPU tier matches, `Tenant.handover_patterns` (one RE2 pattern a line,
blank for the built-in set alone, "-" for none: inference/text/handover.py), so the
matcher is unchanged:

- a phrase becomes a pattern by escaping it: its words in order, any whitespace between
  them, any case, and whole words at its ends (`\\b`, only where the phrase starts or ends
  with an ASCII letter or digit: RE2's `\\b` is ASCII-only, so "écrire" has none);
- reading a stored text back, a line that is exactly some phrase's pattern is shown as
  that phrase, the built-in set's lines (all of them) as the built-in switch, and every
  other line as an advanced expression. So nothing saved before is lost or changed."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from inference.text import handover

BUILTIN_LINES = tuple(line.strip() for line in handover.DEFAULT_PATTERNS.splitlines() if line.strip())
# What each built-in line recognises, in words people would type (tests check each
# example matches its line, so the list stays true).
BUILTIN_EXAMPLES = (
    ("talk to a person", "speak with a real human", "chat to someone", "talk to an agent"),
    ("a real person", "a live agent"),
    ("human agent", "live support"),
    ("connect me to", "connect me with"),
    ("customer service representative",),
    ("parler à un conseiller", "discuter avec une vraie personne"),
    ("parler à quelqu'un",),
)
MIN_PHRASE_CHARS = 3
_ASCII_WORD = re.compile(r"[A-Za-z0-9_]")


@dataclass
class Phrases:
    builtin: bool = True
    phrases: list[str] = field(default_factory=list)
    expressions: list[str] = field(default_factory=list)


def builtin_rules() -> list[dict]:
    """The built-in set as the console lists it: each line with what it recognises."""
    return [{"pattern": line, "examples": examples}
            for line, examples in zip(BUILTIN_LINES, BUILTIN_EXAMPLES, strict=True)]


def phrase_pattern(phrase: str) -> str:
    words = phrase.split()
    body = r"\s+".join(re.escape(w) for w in words)
    start = r"\b" if _ASCII_WORD.match(words[0][0]) else ""
    end = r"\b" if _ASCII_WORD.match(words[-1][-1]) else ""
    return f"{start}{body}{end}"


def phrase_of(line: str) -> str | None:
    """The phrase whose pattern `line` is, or None when it is any other expression."""
    body = line.removeprefix(r"\b").removesuffix(r"\b")
    if not body:
        return None
    phrase = " ".join(re.sub(r"\\(.)", r"\1", piece) for piece in body.split(r"\s+"))
    if not phrase.strip() or phrase != " ".join(phrase.split()):
        return None
    return phrase if phrase_pattern(phrase) == line else None


def read(stored: str) -> Phrases:
    text = (stored or "").strip()
    if not text:
        return Phrases()
    if text == handover.OFF:
        return Phrases(builtin=False)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    builtin = all(line in lines for line in BUILTIN_LINES)
    out = Phrases(builtin=builtin)
    for line in lines:
        if builtin and line in BUILTIN_LINES:
            continue
        phrase = phrase_of(line)
        (out.phrases if phrase is not None else out.expressions).append(phrase if phrase is not None else line)
    return out


def lines_of(text: str) -> list[str]:
    return [" ".join(line.split()) for line in (text or "").splitlines() if line.strip()]


def write(p: Phrases) -> str:
    """The stored text: blank when the built-in set alone, "-" when nothing at all."""
    if p.builtin and not p.phrases and not p.expressions:
        return ""
    lines = [*(BUILTIN_LINES if p.builtin else ()), *(phrase_pattern(x) for x in p.phrases), *p.expressions]
    return "\n".join(lines) if lines else handover.OFF
