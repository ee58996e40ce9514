from django.contrib import admin

from .models import EvalCase, EvalResult, EvalRun


@admin.register(EvalCase)
class EvalCaseAdmin(admin.ModelAdmin):
    list_display = ("question", "tenant", "expect_article", "expect_handover", "created_at")
    list_filter = ("tenant",)
    raw_id_fields = ("expect_article",)


class EvalResultInline(admin.TabularInline):
    model = EvalResult
    extra = 0
    fields = ("question", "status", "passed", "checks", "repetition", "completion_tokens", "latency_ms")
    readonly_fields = fields


@admin.register(EvalRun)
class EvalRunAdmin(admin.ModelAdmin):
    list_display = ("id", "tenant", "started_at", "finished_at")
    list_filter = ("tenant",)
    readonly_fields = ("tenant", "started_at", "finished_at", "summary")
    inlines = [EvalResultInline]
