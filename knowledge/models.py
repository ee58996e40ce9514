"""Knowledge records: a tenant's retrieval settings, its articles, their chunks (what
retrieval ranks), and the sources each reply cited.

The full-text index lives beside the chunk rows and depends on the database
(`knowledge.search`): on PostgreSQL the `search_vector` column with a GIN index over
(tenant, vector); on SQLite an FTS5 table that triggers keep equal to the chunk rows.
Both are created by this app's migrations."""

from __future__ import annotations

import uuid

from django.contrib.postgres.search import SearchVectorField
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

MAX_TOP_K = 16
MODES = ("hybrid", "bm25")

# PostgreSQL's built-in text-search configurations (`\dF`): the tenant's language picks
# the stemmer and stop words its chunks are indexed and queried with.
LANGUAGES = [
    "simple", "arabic", "danish", "dutch", "english", "finnish", "french", "german", "greek",
    "hungarian", "indonesian", "irish", "italian", "lithuanian", "nepali", "norwegian",
    "portuguese", "romanian", "russian", "spanish", "swedish", "tamil", "turkish",
]


DEFAULT_MIN_SCORE = 0.2


class KnowledgeSettings(models.Model):
    """Retrieval for one tenant. A tenant without a row has the defaults."""

    tenant = models.OneToOneField("tenants.Tenant", on_delete=models.CASCADE, primary_key=True,
                                  related_name="knowledge_settings")
    enabled = models.BooleanField(default=True, help_text="Ground replies in the tenant's articles.")
    top_k = models.PositiveSmallIntegerField(
        default=3, validators=[MinValueValidator(1), MaxValueValidator(MAX_TOP_K)],
        help_text="Passages retrieved for each message (those that fit the prompt are kept).")
    # Set by measurement (`python -m benchmarks knowledge`, docs/knowledge.md "The minimum
    # score"): the highest floor that keeps every right answer of the shipped question
    # sets in hybrid mode (a score there is about the chunk's cosine with the question),
    # while most off-topic questions stop citing anything; in BM25 mode it drops nothing.
    min_score = models.FloatField(
        default=DEFAULT_MIN_SCORE, validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="Passages scoring below this (0..1) are left out.")
    language = models.CharField(max_length=16, default="english", choices=[(x, x) for x in LANGUAGES],
                                help_text="The text-search configuration (stemming, stop words).")
    mode = models.CharField(max_length=8, default="hybrid", choices=[(x, x) for x in MODES],
                            help_text="hybrid: full-text and dense vectors fused; bm25: full-text alone.")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "knowledge settings"

    def __str__(self) -> str:
        return f"knowledge settings({self.tenant_id})"


class Source(models.Model):
    """Where some of a tenant's articles come from, kept in step by syncs
    (`knowledge.syncing`): a website (a start page or a sitemap, crawled) or uploaded
    files. Articles typed in or imported have no source ("manual"). A sync's progress
    and outcome live on the row, so the console and the API read one row."""

    class Kind(models.TextChoices):
        WEBSITE = "website"
        FILES = "files"

    class Status(models.TextChoices):
        IDLE = "idle"          # never synced
        QUEUED = "queued"      # a sync is asked for; a CPU worker takes it next
        SYNCING = "syncing"
        SYNCED = "synced"
        FAILED = "failed"      # the last sync could not finish (`error` says why)

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="knowledge_sources")
    kind = models.CharField(max_length=8, choices=Kind.choices)
    name = models.CharField(max_length=200)
    url = models.URLField(max_length=1000, blank=True, default="",
                          help_text="Website: the start page, or a sitemap (.xml).")
    any_host = models.BooleanField(default=False, help_text="Follow links to other hosts too.")
    max_pages = models.PositiveIntegerField(default=200)
    max_depth = models.PositiveSmallIntegerField(default=3)
    delay_ms = models.PositiveIntegerField(default=250, help_text="At least this long between two requests.")
    sync_every_hours = models.PositiveIntegerField(default=24, help_text="0: only when asked.")
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.IDLE)
    error = models.TextField(blank=True, default="")
    # The current (or last) sync: pages found, fetched, changed (added, updated or
    # removed articles) and failed; `state` is its crawl frontier between steps.
    found = models.PositiveIntegerField(default=0)
    fetched = models.PositiveIntegerField(default=0)
    changed = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0)
    state = models.JSONField(default=dict, blank=True)
    run = models.UUIDField(null=True, blank=True, help_text="The sync in progress; steps of another run stop.")
    sync_started_at = models.DateTimeField(null=True, blank=True)
    progressed_at = models.DateTimeField(null=True, blank=True, help_text="The sync's last step.")
    last_synced_at = models.DateTimeField(null=True, blank=True)
    next_sync_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at"]
        indexes = [models.Index(fields=["next_sync_at"], name="knowledge_source_due")]

    def __str__(self) -> str:
        return f"source {self.name!r} ({self.tenant_id})"


class SourceFile(models.Model):
    """An uploaded file of a files source, kept as uploaded: parsing runs in the sync on
    the CPU tier, never on the web request that received it."""

    TENANT_PATH = "source__tenant"

    source = models.ForeignKey(Source, on_delete=models.CASCADE, related_name="files")
    name = models.CharField(max_length=255)
    data = models.BinaryField()
    size = models.PositiveIntegerField()
    sha256 = models.CharField(max_length=64)
    uploaded_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["source", "name"], name="uniq_source_file_name")]


class Article(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending"
        INDEXED = "indexed"
        FAILED = "failed"

    class Format(models.TextChoices):
        MARKDOWN = "markdown"
        TEXT = "text"
        HTML = "html"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="articles")
    title = models.CharField(max_length=300)
    url = models.URLField(max_length=1000, blank=True, default="")
    tags = models.JSONField(default=list, blank=True)
    format = models.CharField(max_length=8, choices=Format.choices, default=Format.MARKDOWN)
    body = models.TextField(help_text="As submitted (Markdown, plain text or HTML).")
    text = models.TextField(blank=True, default="", help_text="The body as text: what is chunked.")
    # Where an import found it (a file's path in a zip or folder, a JSONL record's
    # `source`): importing the same source again updates the article instead of adding one.
    source = models.CharField(max_length=500, blank=True, default="")
    # A synced article: its source, and where in it (the page's canonical URL, or the
    # file's name). What the last fetch said about it decides whether the next re-reads it.
    origin = models.ForeignKey(Source, null=True, blank=True, on_delete=models.CASCADE, related_name="articles")
    locator = models.CharField(max_length=1000, blank=True, default="")
    etag = models.CharField(max_length=200, blank=True, default="")
    last_modified = models.CharField(max_length=64, blank=True, default="")
    content_hash = models.CharField(max_length=64, blank=True, default="")
    links = models.JSONField(default=list, blank=True, help_text="A synced page's links: a re-sync that "
                             "finds the page unchanged (304) still follows them.")
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.PENDING)
    error = models.TextField(blank=True, default="")
    chunk_count = models.PositiveIntegerField(default=0)
    # What the current chunks were built from (title, url, text, language): indexing the
    # same again is skipped, so a redelivered task does nothing.
    indexed_hash = models.CharField(max_length=64, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    indexed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-updated_at"]
        indexes = [models.Index(fields=["tenant", "-updated_at"])]
        constraints = [models.UniqueConstraint(fields=["tenant", "source"], condition=~models.Q(source=""),
                                               name="uniq_article_source"),
                       models.UniqueConstraint(fields=["origin", "locator"], condition=models.Q(origin__isnull=False),
                                               name="uniq_article_origin_locator")]

    def __str__(self) -> str:
        return f"article {self.title!r} ({self.tenant_id})"


class Chunk(models.Model):
    """A passage of an article: a few hundred tokens under one heading, with the
    article's title kept as context. `tenant` is the article's, copied so that retrieval
    filters on it inside the indexed query."""

    # No index of its own: on PostgreSQL the GIN index over (tenant_id, search_vector) is
    # the tenant's index, so a tenant-scoped search can only go through it.
    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="+", db_index=False)
    article = models.ForeignKey(Article, on_delete=models.CASCADE, related_name="chunks")
    ordinal = models.PositiveIntegerField()
    title = models.CharField(max_length=300)
    heading = models.CharField(max_length=600, blank=True, default="")
    text = models.TextField()
    n_words = models.PositiveIntegerField(default=0)
    # PostgreSQL only (the SQLite backend indexes into its FTS5 table instead).
    search_vector = SearchVectorField(null=True, editable=False)
    # The chunk's dense vector (`knowledge.embedding`: float16, unit length), or null when
    # no embedding model is installed; scored in the CPU worker's memory (`knowledge.dense`).
    embedding = models.BinaryField(null=True, editable=False)

    class Meta:
        ordering = ["article", "ordinal"]
        constraints = [models.UniqueConstraint(fields=["article", "ordinal"], name="uniq_chunk_ordinal")]

    def __str__(self) -> str:
        return f"chunk {self.article_id}#{self.ordinal}"


class Term(models.Model):
    """How many of a tenant's chunks hold a word (as `search.query_terms` spells it); the
    row with the empty word holds the tenant's chunk count. Kept by indexing, read
    inside the retrieval query to leave out words most chunks hold (`search.base`)."""

    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="+", db_index=False)
    word = models.CharField(max_length=64, blank=True)
    df = models.IntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tenant", "word"], name="uniq_term_word")]


class Citation(models.Model):
    """A source one reply was grounded in: what the prompt held, by rank. Title and URL
    are copied, so a transcript still names a source after its article is deleted."""

    TENANT_PATH = "tenant"

    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="+")
    message_id = models.UUIDField(help_text="The assistant message (request id).")
    rank = models.PositiveSmallIntegerField()
    article_id = models.UUIDField(null=True, blank=True)  # not a foreign key: kept after a delete
    title = models.CharField(max_length=300)
    url = models.URLField(max_length=1000, blank=True, default="")
    # Where in the article: the passage's heading path ("Page 3" for a PDF's page).
    section = models.CharField(max_length=600, blank=True, default="")
    score = models.FloatField()

    class Meta:
        ordering = ["message_id", "rank"]
        constraints = [models.UniqueConstraint(fields=["message_id", "rank"], name="uniq_citation_rank")]

    def as_source(self) -> dict:
        return {"article_id": str(self.article_id) if self.article_id else None, "title": self.title,
                "url": self.url, "section": self.section, "score": self.score}
