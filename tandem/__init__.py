"""Tandem's Django project: settings, routing, the Celery app, and the surfaces people
touch (chat websocket, REST API, widget, console)."""

from .celery import app as celery_app

__all__ = ["celery_app"]
