from django.apps import AppConfig


class AttachmentsConfig(AppConfig):
    name = "tandem.attachments"
    label = "attachments"
    default_auto_field = "django.db.models.BigAutoField"
