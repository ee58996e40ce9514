from django.apps import AppConfig


class RepetitionConfig(AppConfig):
    name = "tandem.repetition"
    label = "repetition"
    default_auto_field = "django.db.models.BigAutoField"
