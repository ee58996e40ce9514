"""Request and response shapes of the knowledge endpoints (docs/api.md, docs/knowledge.md).
Types are checked here; what an article may hold (sizes, scripts, URLs) is checked by
`knowledge.services`, which names the field it refuses."""

from __future__ import annotations

from rest_framework import serializers

from knowledge.models import LANGUAGES, MAX_TOP_K, MODES, Article


def article_data(a: Article, *, body: bool = False) -> dict:
    data = {
        "id": str(a.pk), "object": "knowledge.article", "title": a.title, "url": a.url, "tags": a.tags,
        "format": a.format, "source": a.source, "status": a.status, "chunks": a.chunk_count,
        "error": a.error or None, "created_at": a.created_at.isoformat(), "updated_at": a.updated_at.isoformat(),
        "indexed_at": a.indexed_at.isoformat() if a.indexed_at else None,
    }
    if body:
        data["body"] = a.body
    return data


class ArticleSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    object = serializers.CharField()
    title = serializers.CharField()
    url = serializers.CharField(allow_blank=True)
    tags = serializers.ListField(child=serializers.CharField())
    format = serializers.ChoiceField(choices=Article.Format.values)
    source = serializers.CharField(allow_blank=True, help_text="the path an import found it at")
    status = serializers.ChoiceField(choices=Article.Status.values)
    chunks = serializers.IntegerField(help_text="how many chunks it is indexed as")
    error = serializers.CharField(allow_null=True, help_text="why indexing failed")
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()
    indexed_at = serializers.DateTimeField(allow_null=True)


class ArticleDetailSerializer(ArticleSerializer):
    body = serializers.CharField(allow_blank=True)


class ArticleListSerializer(serializers.Serializer):
    object = serializers.CharField()
    data = ArticleSerializer(many=True)
    has_more = serializers.BooleanField()


class ArticleCreateSerializer(serializers.Serializer):
    title = serializers.CharField(trim_whitespace=False)
    body = serializers.CharField(trim_whitespace=False, allow_blank=True,
                                 help_text="Markdown, plain text or HTML (see format)")
    format = serializers.ChoiceField(choices=Article.Format.values, required=False, default="markdown")
    url = serializers.CharField(required=False, allow_blank=True, default="", trim_whitespace=False)
    tags = serializers.ListField(child=serializers.CharField(trim_whitespace=False), required=False, default=list)


class ArticleUpdateSerializer(serializers.Serializer):
    title = serializers.CharField(required=False, trim_whitespace=False)
    body = serializers.CharField(required=False, trim_whitespace=False, allow_blank=True)
    format = serializers.ChoiceField(choices=Article.Format.values, required=False)
    url = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False)
    tags = serializers.ListField(child=serializers.CharField(trim_whitespace=False), required=False)


class ArticleListQuerySerializer(serializers.Serializer):
    limit = serializers.IntegerField(required=False, min_value=1, max_value=100, default=20)
    offset = serializers.IntegerField(required=False, min_value=0, default=0)


class ImportResultSerializer(serializers.Serializer):
    object = serializers.CharField()
    created = serializers.IntegerField()
    updated = serializers.IntegerField()
    unchanged = serializers.IntegerField()
    data = ArticleSerializer(many=True)


IMPORT_REQUEST = {
    "multipart/form-data": {
        "type": "object", "required": ["file"],
        "properties": {"file": {"type": "string", "format": "binary",
                                "description": "a .jsonl file (one article a line) or a .zip of .md/.txt/.html files"}},
    }
}


class KnowledgeSettingsSerializer(serializers.Serializer):
    object = serializers.CharField()
    enabled = serializers.BooleanField()
    top_k = serializers.IntegerField(min_value=1, max_value=MAX_TOP_K)
    min_score = serializers.FloatField(min_value=0, max_value=1)
    language = serializers.ChoiceField(choices=LANGUAGES)
    mode = serializers.ChoiceField(choices=MODES, help_text="hybrid: full-text and dense vectors fused; bm25: "
                                                            "full-text alone")


class KnowledgeSettingsUpdateSerializer(serializers.Serializer):
    enabled = serializers.BooleanField(required=False)
    top_k = serializers.IntegerField(required=False, min_value=1, max_value=MAX_TOP_K)
    min_score = serializers.FloatField(required=False, min_value=0, max_value=1)
    language = serializers.ChoiceField(choices=LANGUAGES, required=False)
    mode = serializers.ChoiceField(choices=MODES, required=False)
