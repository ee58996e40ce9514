from django.apps import AppConfig


class ConsoleConfig(AppConfig):
    name = "tandem.console"

    def ready(self):
        from . import access_events

        access_events.connect_signals()
