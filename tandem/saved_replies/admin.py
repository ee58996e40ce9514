"""Raw CRUD for operators, as for every model (the console is where tenants manage them)."""

from django.contrib import admin

from .models import SavedReply


@admin.register(SavedReply)
class SavedReplyAdmin(admin.ModelAdmin):
    list_display = ("shortcut", "tenant", "created_by", "created_at")
    list_filter = ("tenant",)
    search_fields = ("shortcut", "text")
