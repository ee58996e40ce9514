from django.apps import AppConfig


class SavedRepliesConfig(AppConfig):
    name = "tandem.saved_replies"
    label = "saved_replies"
    default_auto_field = "django.db.models.BigAutoField"
