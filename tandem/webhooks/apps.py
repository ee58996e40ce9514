from django.apps import AppConfig


class WebhooksConfig(AppConfig):
    name = "tandem.webhooks"
    label = "webhooks"
    default_auto_field = "django.db.models.BigAutoField"
