"""What a case checks of one reply: pure functions of the case's expectations and what
the reply was, so the rules are tested without a model."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Reply:
    text: str
    status: str  # done, failed, timeout
    cited_articles: list[str]  # article ids, by rank
    handed_over: bool


def repetition_share(text: str, n: int = 3) -> float:
    """The share of the reply's word n-grams that repeat an earlier one (0: none; a
    model stuck in a loop tends to 1)."""
    words = text.lower().split()
    grams = [tuple(words[i:i + n]) for i in range(len(words) - n + 1)]
    return 0.0 if not grams else 1 - len(set(grams)) / len(grams)


def case_checks(*, expect_article: str | None, must_include: list[str], must_not_include: list[str],
                expect_handover: bool | None, reply: Reply) -> dict[str, bool]:
    """{check: passed} for each expectation the case has, plus `answered`."""
    text = reply.text.lower()
    checks = {"answered": reply.status == "done"}
    if expect_article:
        checks["retrieval_hit"] = expect_article in reply.cited_articles
        checks["citation_first"] = bool(reply.cited_articles) and reply.cited_articles[0] == expect_article
    for phrase in must_include:
        checks[f"includes: {phrase}"] = phrase.lower() in text
    for phrase in must_not_include:
        checks[f"excludes: {phrase}"] = phrase.lower() not in text
    if expect_handover is not None:
        checks["handover"] = reply.handed_over == expect_handover
    return checks
