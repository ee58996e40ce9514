from django.contrib import admin

from .models import Label


@admin.register(Label)
class LabelAdmin(admin.ModelAdmin):
    list_display = ("name", "color", "tenant", "created_at")
    list_filter = ("tenant",)
    search_fields = ("name",)
    filter_horizontal = ()
    raw_id_fields = ("conversations",)
