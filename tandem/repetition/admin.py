from django.contrib import admin

from .models import RepetitionSettings


@admin.register(RepetitionSettings)
class RepetitionSettingsAdmin(admin.ModelAdmin):
    list_display = ("tenant", "enabled", "frequency_penalty", "presence_penalty", "repetition_penalty", "updated_at")
