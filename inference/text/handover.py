"""Does a visitor's message ask for a person? A pattern set the tenant can edit
(`Tenant.handover_patterns`, one case-insensitive regular expression a line), carried to
the CPU tier in the request's spec and matched there, before the prompt is built: a
match costs no model call. The CPU tier then ends the request with finish reason
"handover" through `pipeline.outcomes.request_handover`, which writes the reply and
moves the conversation to `pending_human` (docs/handoff.md).

Cheap and predictable on purpose: a tenant can read and fix every rule, and the patterns
run on RE2 (google-re2), whose matching time is linear in the message's length whatever
the pattern. The CPU worker serves every tenant, so a backtracking engine would let one
tenant's `(a+)+$` and one visitor's message stall everyone's replies (docs/security.md);
what RE2 cannot run (back-references, look-arounds) is refused when it is saved."""

from __future__ import annotations

import functools
import logging

import re2

log = logging.getLogger(__name__)

OFF = "-"  # patterns that turn the check off (the REST API, or a tenant that wants none)
DEFAULT_TEXT = "I'll connect you with a person from our team. Someone will reply here shortly."
MAX_PATTERNS, MAX_PATTERN_CHARS = 100, 300
# RE2's memory cap for one compiled pattern: a pattern whose automaton would need more
# (nested counted repeats) is refused at save rather than grown on the shared worker.
MAX_PATTERN_MEMORY = 1 << 20

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


def _options() -> re2.Options:
    options = re2.Options()
    options.case_sensitive = False
    options.log_errors = False  # a refusal is the form's error, not a line on stderr
    options.max_mem = MAX_PATTERN_MEMORY
    return options


def parse(patterns: str) -> tuple:
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
            out.append(re2.compile(line, _options()))
        except re2.error as exc:
            raise BadPattern(f"Line {n}: {_reason(exc)}.") from None
    return tuple(out)


def _reason(exc: re2.error) -> str:
    """RE2's message (bytes), plus what to do when it is a feature RE2 leaves out."""
    reason = exc.args[0] if exc.args else "not a valid pattern"
    if isinstance(reason, bytes):
        reason = reason.decode("utf-8", "replace")
    backreference = reason.partition("escape sequence: \\")[2][:1].isdigit()
    if "perl operator" in reason or backreference:
        reason += " (look-arounds and back-references are not supported: they can take exponential time)"
    elif "too large" in reason or "repetition size" in reason:
        reason += " (the pattern is too large: use fewer or smaller counted repeats)"
    return reason


@functools.lru_cache(maxsize=256)
def _compiled(patterns: str) -> tuple:
    try:
        return parse(patterns)
    except BadPattern as exc:
        # Saved before this engine's rules (RE2) applied: never fail a request over it,
        # but say so once per pattern set (the console's form shows the line to fix).
        log.warning("hand-over patterns not run: %s", exc)
        return ()


def asks_for_person(text: str, patterns: str) -> bool:
    """True when `text` (the visitor's newest message) matches one of `patterns`."""
    return any(p.search(text) for p in _compiled(patterns or ""))
