from django.contrib import admin

from .models import Csat, Feedback


@admin.register(Feedback)
class FeedbackAdmin(admin.ModelAdmin):
    list_display = ("message", "tenant", "rating", "rater", "updated_at")
    list_filter = ("tenant", "rating")
    readonly_fields = ("tenant", "conversation", "message", "rater", "rating", "comment", "created_at", "updated_at")


@admin.register(Csat)
class CsatAdmin(admin.ModelAdmin):
    list_display = ("conversation", "tenant", "score", "answered_by", "created_at")
    list_filter = ("tenant", "score", "answered_by")
    readonly_fields = ("tenant", "conversation", "score", "comment", "answered_by", "rater", "created_at")
