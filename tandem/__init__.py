"""Tandem's Django project: settings, routing, the Celery app, and the surfaces people
touch (chat websocket, REST API, widget, console)."""
