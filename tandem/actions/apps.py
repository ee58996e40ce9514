from django.apps import AppConfig


class ActionsConfig(AppConfig):
    name = "tandem.actions"
    label = "actions"
    default_auto_field = "django.db.models.BigAutoField"
