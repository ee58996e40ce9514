"""PostgreSQL: a chunk's full-text vector stays in the row, its embedding goes out of it.

A chunk row (text, search_vector, embedding: each several hundred bytes) passes
PostgreSQL's 2 kB TOAST threshold, and the toaster moved the largest value that would
not compress out of line, often the search_vector. Every candidate of a full-text query
then cost a TOAST fetch, for `@@` and again for each word's rank: most of a question's
time at 10,000 chunks. The search_vector is now MAIN (kept in the row, compressed if it
must) and the embedding EXTERNAL (out of line first, uncompressed: float16 bytes do not
compress), read only when a tenant's vectors are loaded into a worker's memory (dense.py).

SET STORAGE applies to rows written from then on; the UPDATE writes every existing row
again with a fresh value (a concatenation, so the toaster lays it out anew; an unchanged
value would keep its old pointer). SQLite has no TOAST: nothing to do there."""

from django.db import migrations

STORAGE = """
ALTER TABLE knowledge_chunk ALTER COLUMN search_vector SET STORAGE MAIN,
                            ALTER COLUMN embedding SET STORAGE EXTERNAL
"""
REWRITE = "UPDATE knowledge_chunk SET search_vector = search_vector || ''::tsvector WHERE search_vector IS NOT NULL"
BACK = """
ALTER TABLE knowledge_chunk ALTER COLUMN search_vector SET STORAGE EXTENDED,
                            ALTER COLUMN embedding SET STORAGE EXTENDED
"""


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(STORAGE)
    schema_editor.execute(REWRITE)


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(BACK)


class Migration(migrations.Migration):

    dependencies = [
        ("knowledge", "0006_min_score_default"),
    ]

    operations = [migrations.RunPython(forwards, backwards)]
