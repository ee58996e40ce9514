"""Does a visitor's message ask for a person? A pattern set the tenant can edit
(`Tenant.handover_patterns`, one case-insensitive regular expression a line), carried to
the CPU tier in the request's spec and matched there, before the prompt is built: a
match costs no model call. The CPU tier then ends the request with finish reason
"handover" through `pipeline.outcomes.request_handover`, which writes the reply and
moves the conversation to `pending_human` (docs/handoff.md).

Cheap and predictable on purpose: a tenant can read and fix every rule, and a regular
expression set runs in microseconds on each message."""

from __future__ import annotations

import functools
import re

OFF = "-"  # patterns that turn the check off (the REST API, or a tenant that wants none)
DEFAULT_TEXT = "I'll connect you with a person from our team. Someone will reply here shortly."
MAX_PATTERNS, MAX_PATTERN_CHARS = 100, 300

# English and French: asking for a person, an agent, a human, someone real.
DEFAULT_PATTERNS = r"""
\b(talk|speak|chat)\s+(to|with)\s+(a|an|some|the)?\s*(real\s+|live\s+)?(person|human|agent|someone|somebody|representative|operator)\b
\b(real|live|actual)\s+(person|human|agent)\b
\b(human|live)\s+(agent|support|help)\b
\bconnect\s+me\s+(to|with)\b
\bcustomer\s+service\s+(rep|representative|agent)\b
\b(parler|discuter)\s+(à|a|avec)\s+(un|une)\s+(vrai\s+|vraie\s+)?(humain|personne|conseiller|conseillère|agent)\b
\b(parler|discuter)\s+(à|a|avec)\s+quelqu'un\b
""".strip()


class BadPattern(ValueError):
    pass


def parse(patterns: str) -> tuple[re.Pattern, ...]:
    """The compiled set; raises BadPattern (the console's form shows which line)."""
    lines = [line.strip() for line in (patterns or DEFAULT_PATTERNS).splitlines()]
    lines = [line for line in lines if line and not line.startswith("#")]
    if lines == [OFF]:
        return ()
    if len(lines) > MAX_PATTERNS:
        raise BadPattern(f"At most {MAX_PATTERNS} patterns.")
    out = []
    for n, line in enumerate(lines, 1):
        if len(line) > MAX_PATTERN_CHARS:
            raise BadPattern(f"Line {n} is longer than {MAX_PATTERN_CHARS} characters.")
        try:
            out.append(re.compile(line, re.IGNORECASE))
        except re.error as exc:
            raise BadPattern(f"Line {n}: {exc}.") from None
    return tuple(out)


@functools.lru_cache(maxsize=256)
def _compiled(patterns: str) -> tuple[re.Pattern, ...]:
    try:
        return parse(patterns)
    except BadPattern:
        return ()  # saved before validation existed: never fail a request over it


def asks_for_person(text: str, patterns: str) -> bool:
    """True when `text` (the visitor's newest message) matches one of `patterns`."""
    return any(p.search(text) for p in _compiled(patterns or ""))
