from django.contrib import admin

from .models import Article, Citation, KnowledgeSettings


@admin.register(KnowledgeSettings)
class KnowledgeSettingsAdmin(admin.ModelAdmin):
    list_display = ("tenant", "enabled", "top_k", "min_score", "language", "updated_at")


@admin.register(Article)
class ArticleAdmin(admin.ModelAdmin):
    list_display = ("title", "tenant", "status", "chunk_count", "updated_at")
    list_filter = ("status", "tenant")
    search_fields = ("title", "source")
    readonly_fields = ("text", "status", "error", "chunk_count", "indexed_hash", "indexed_at")


@admin.register(Citation)
class CitationAdmin(admin.ModelAdmin):
    list_display = ("message_id", "rank", "title", "score", "tenant")
