from django.apps import AppConfig


class ChatConfig(AppConfig):
    name = "tandem.chat"
    label = "chat"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        # Every process that sets up Django (daphne, the CPU and model workers, management
        # commands) reports replies' outcomes into the web tier's rows through this sink:
        # the pipeline imports nothing of `tandem`.
        from inference.pipeline import api

        from .reply_sink import ReplyRows

        api.sink_register(ReplyRows())
