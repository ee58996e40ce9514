from django.apps import AppConfig


class LabelsConfig(AppConfig):
    name = "tandem.labels"
    label = "labels"
    default_auto_field = "django.db.models.BigAutoField"
