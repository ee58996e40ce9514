"""What both retrieval backends share: the hit, the query's words, the score scale.

Ranked full-text retrieval over chunks: one interface, a backend per database.

- PostgreSQL (`postgres.py`): each chunk's `search_vector` (title weight A, heading B,
  text C, in the tenant's text-search configuration, written through
  `django.contrib.postgres.search`), a GIN index over (tenant_id, search_vector)
  (btree_gin), ranked BM25-like: each word's IDF in the tenant times its `ts_rank_cd`.
- SQLite (`sqlite.py`): an FTS5 table kept equal to the chunk rows by triggers, ranked by
  `bm25()`.

Both take the tenant inside the one query that ranks (PostgreSQL: the composite index;
FTS5: a tenant token the MATCH requires, and the chunk row's tenant_id again), so no
other tenant's chunk can come back whatever the words. Both match an OR of the
question's words (a question rarely shares every word with its answer), less those most
of the tenant's chunks hold (below), and report a score in [0, 1): raw / (raw + 1) of the backend's own relevance, higher is better. The
two backends' scores are not on the same scale; a tenant's `min_score` is read against
the backend it runs on."""

from __future__ import annotations

import unicodedata
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

# Words a question contributes to its query, the newest message's first.
MAX_QUERY_TERMS = 32
# `models.Term`'s row for the tenant's chunk count: no index term is empty.
CHUNKS = ""

# Both backends read the tenant's own word counts (`models.Term`) inside the statement
# that ranks, so that a word most chunks hold ("order" in a shop's help centre) neither
# decides the ranking nor makes the query rank most of the tenant's chunks.
#
# SQLite: such a word is left out of the MATCH (Elasticsearch's old `cutoff_frequency`):
# one more than COMMON_FRACTION of the tenant's chunks hold, past COMMON_FLOOR chunks (a
# small help centre keeps every word), and never all of a question's words; bm25 ranks
# only the words the MATCH holds, and of those only the rarest that CANDIDATES bounds.
COMMON_FRACTION = 0.1
COMMON_FLOOR = 200
# PostgreSQL: every word ranks, weighted by its rarity, but only chunks holding the
# question's rarest words are ranked (Elasticsearch's `common` terms query): the rarest
# words whose counts add up to at most CANDIDATES chunks, ORed; when even the rarest is
# in more, the chunks holding all of the rarest few (ANDed until, were the words
# independent, CANDIDATES chunks would hold them all). At most MAX_RANKED of those are
# ranked, whatever the words: the bound on a query's work. A caller may ask for fewer
# (hybrid retrieval: knowledge.fusion.LEXICAL_CANDIDATES).
CANDIDATES = 1000
MAX_RANKED = 1000

# English stop words, left out of a query before it reaches either backend: PostgreSQL's
# `english` configuration drops them itself, SQLite's FTS5 has no stop-word list, and
# "how do I" matches every article. (PostgreSQL's english.stop, the Snowball list.)
ENGLISH_STOP_WORDS = frozenset("""
i me my myself we our ours ourselves you your yours yourself yourselves he him his himself she
her hers herself it its itself they them their theirs themselves what which who whom this that
these those am is are was were be been being have has had having do does did doing a an the and
but if or because as until while of at by for with about against between into through during
before after above below to from up down in out on off over under again further then once here
there when where why how all any both each few more most other some such no nor not only own
same so than too very s t can will just don should now ll re ve d m o y ain aren couldn didn
doesn hadn hasn haven isn ma mightn mustn needn shan shouldn wasn weren won wouldn
""".split())
STOP_WORDS = {"english": ENGLISH_STOP_WORDS}


@dataclass(frozen=True)
class Hit:
    chunk_id: int
    article_id: str
    title: str
    heading: str
    text: str
    url: str
    score: float  # 0..1, higher is better (see the module docstring)


class SearchBackend(Protocol):
    vendor: str

    def index_article(self, *, article_id, language: str) -> None:
        """Make the article's chunk rows (just written) searchable. Runs inside the
        transaction that wrote them."""

    def search(self, *, tenant_id: int, terms: list[str], k: int, min_score: float,
               language: str, candidates: int = CANDIDATES) -> list[Hit]:
        """The tenant's top `k` chunks for `terms`, best first, in one query, ranking at
        most about `candidates` chunks (see CANDIDATES)."""

    def term_counts(self, *, article_id) -> Counter:
        """{index term: the article's chunks holding it, CHUNKS: its chunks}, as
        `models.Term` counts them on this backend: the chunks as they are now (indexed)."""


def query_terms(*texts: str, limit: int = MAX_QUERY_TERMS, language: str = "english") -> list[str]:
    """The distinct words of `texts` (in order, lower-cased, letters and digits only, the
    language's stop words left out) that a query ORs together: the first text's first, at
    most `limit`. Nothing else of the text reaches either database's query syntax, so no
    word can act as an operator."""
    stop = STOP_WORDS.get(language, frozenset())
    seen: dict[str, None] = {}
    for text in texts:
        word: list[str] = []
        for ch in unicodedata.normalize("NFKC", text or "").lower() + " ":
            if ch.isalnum():
                word.append(ch)
                continue
            if 1 < len(word) <= 64 and "".join(word) not in stop:
                seen.setdefault("".join(word), None)
                if len(seen) >= limit:
                    return list(seen)
            word = []
    return list(seen)


def word_counts(chunks: Iterable[tuple[str, str, str]]) -> Counter:
    """{word: chunks holding it, CHUNKS: chunks} for (title, heading, text) triples, the
    words spelt as `query_terms` spells them."""
    total: Counter = Counter()
    for title, heading, text in chunks:
        total.update(set(query_terms(title, heading, text, limit=1 << 30)))
        total[CHUNKS] += 1
    return total


def squash(raw: float) -> float:
    """A backend's relevance (>= 0, unbounded) as a score in [0, 1)."""
    raw = max(0.0, float(raw))
    return raw / (raw + 1.0)


def unsquash(score: float) -> float:
    """The raw relevance a score in [0, 1) corresponds to (for filtering inside SQL)."""
    score = min(max(0.0, score), 0.999999)
    return score / (1.0 - score)
