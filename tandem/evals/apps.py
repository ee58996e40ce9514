from django.apps import AppConfig


class EvalsConfig(AppConfig):
    name = "tandem.evals"
    label = "evals"
    default_auto_field = "django.db.models.BigAutoField"
