"""Ranked full-text retrieval over chunks: one interface (`base.SearchBackend`), a
backend per database, chosen by the connection's vendor. See `base` for what the two
share and how they differ."""

from __future__ import annotations

from django.db import connections

from .base import Hit, SearchBackend, query_terms
from .postgres import PostgresBackend
from .sqlite import SqliteBackend

__all__ = ["Hit", "SearchBackend", "backend_for", "query_terms"]


def backend_for(using: str = "default") -> SearchBackend:
    vendor = connections[using].vendor
    if vendor == "postgresql":
        return PostgresBackend(using)
    if vendor == "sqlite":
        return SqliteBackend(using)
    raise NotImplementedError(f"knowledge retrieval has no backend for {vendor}")
