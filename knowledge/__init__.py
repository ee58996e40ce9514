"""Each tenant's knowledge: help-centre articles, their chunks, and ranked full-text
retrieval over them (PostgreSQL's tsvector + ts_rank_cd, or SQLite's FTS5 + bm25), scoped
to the tenant inside every query.

Owns articles, chunks, indexing, retrieval and which sources a reply cited. Imports
nothing from `tandem` or `inference` (an import-linter contract): the CPU tier calls
`knowledge.selectors.retrieve`, the web tier reads settings and citations from here."""
