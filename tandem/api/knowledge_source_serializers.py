"""Request and response shapes of the knowledge-source endpoints (docs/api.md,
docs/knowledge.md). Types are checked here; ranges and URLs by `knowledge.sources`,
which names the field it refuses."""

from __future__ import annotations

from rest_framework import serializers

from knowledge.models import Source, SourceFile


def _iso(value):
    return value.isoformat() if value else None


def source_data(s: Source, *, detail: bool = False) -> dict:
    data = {
        "id": str(s.pk), "object": "knowledge.source", "kind": s.kind, "name": s.name, "url": s.url,
        "any_host": s.any_host, "max_pages": s.max_pages, "max_depth": s.max_depth, "delay_ms": s.delay_ms,
        "sync_every_hours": s.sync_every_hours, "status": s.status, "error": s.error or None,
        "progress": {"found": s.found, "fetched": s.fetched, "changed": s.changed, "failed": s.failed},
        "created_at": _iso(s.created_at), "last_synced_at": _iso(s.last_synced_at),
        "next_sync_at": _iso(s.next_sync_at),
    }
    if hasattr(s, "article_count"):
        data["articles"] = s.article_count
    elif detail:
        data["articles"] = s.articles.count()
    if detail:
        data["errors"] = list((s.state or {}).get("errors", []))
    return data


def file_data(f: SourceFile) -> dict:
    return {"id": f.pk, "object": "knowledge.source_file", "name": f.name, "size": f.size, "sha256": f.sha256,
            "uploaded_at": _iso(f.uploaded_at)}


class ProgressSerializer(serializers.Serializer):
    found = serializers.IntegerField(help_text="pages (files) the sync has to look at so far")
    fetched = serializers.IntegerField()
    changed = serializers.IntegerField(help_text="articles added, updated or removed")
    failed = serializers.IntegerField()


class SourceErrorSerializer(serializers.Serializer):
    where = serializers.CharField(help_text="the page's URL or the file's name")
    error = serializers.CharField()


class SourceSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    object = serializers.CharField()
    kind = serializers.ChoiceField(choices=Source.Kind.values)
    name = serializers.CharField()
    url = serializers.CharField(allow_blank=True)
    any_host = serializers.BooleanField()
    max_pages = serializers.IntegerField()
    max_depth = serializers.IntegerField()
    delay_ms = serializers.IntegerField()
    sync_every_hours = serializers.IntegerField(help_text="0: only when asked")
    status = serializers.ChoiceField(choices=Source.Status.values)
    error = serializers.CharField(allow_null=True, help_text="why the last sync failed")
    progress = ProgressSerializer()
    articles = serializers.IntegerField(required=False)
    errors = SourceErrorSerializer(many=True, required=False, help_text="the last sync's per-page errors")
    created_at = serializers.DateTimeField()
    last_synced_at = serializers.DateTimeField(allow_null=True)
    next_sync_at = serializers.DateTimeField(allow_null=True)

    class Meta:
        # The schema's component name: `Source` is the citation shape of chat replies
        # (tandem.api.serializers.SourceSerializer).
        ref_name = "KnowledgeSource"


class SourceListSerializer(serializers.Serializer):
    object = serializers.CharField()
    data = SourceSerializer(many=True)
    has_more = serializers.BooleanField()


class SourceUpdateSerializer(serializers.Serializer):
    name = serializers.CharField(required=False, max_length=200)
    url = serializers.CharField(required=False, max_length=1000, help_text="website: the start page, a sitemap or an llms.txt")
    any_host = serializers.BooleanField(required=False, help_text="follow links to other hosts too")
    max_pages = serializers.IntegerField(required=False)
    max_depth = serializers.IntegerField(required=False)
    delay_ms = serializers.IntegerField(required=False, help_text="at least this long between two requests")
    sync_every_hours = serializers.IntegerField(required=False)


class SourceCreateSerializer(SourceUpdateSerializer):
    kind = serializers.ChoiceField(choices=Source.Kind.values)
    name = serializers.CharField(max_length=200)


class SourceFileSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    object = serializers.CharField()
    name = serializers.CharField()
    size = serializers.IntegerField()
    sha256 = serializers.CharField()
    uploaded_at = serializers.DateTimeField()


class SourceFileListSerializer(serializers.Serializer):
    object = serializers.CharField()
    data = SourceFileSerializer(many=True)
    has_more = serializers.BooleanField()


FILE_REQUEST = {
    "multipart/form-data": {
        "type": "object", "required": ["file"],
        "properties": {"file": {"type": "string", "format": "binary",
                                "description": "a PDF, DOCX, HTML, Markdown or text file"}},
    }
}
