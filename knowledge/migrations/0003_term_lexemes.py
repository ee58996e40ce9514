"""PostgreSQL's term counts become counts of lexemes, what its vectors hold and its
queries match, with the tenant's words beside its chunks, for BM25's average length
(`search.postgres`): rebuilt here from the chunks. SQLite keeps counting
words as questions spell them; nothing changes there."""

from django.db import migrations

REBUILD = """
DELETE FROM knowledge_term;
INSERT INTO knowledge_term (tenant_id, word, df)
SELECT c.tenant_id, v.lexeme, count(*) FROM knowledge_chunk c, unnest(tsvector_to_array(c.search_vector)) AS v(lexeme)
WHERE length(v.lexeme) <= 64 AND v.lexeme ~ '^[[:alnum:]]+$'
GROUP BY c.tenant_id, v.lexeme;
INSERT INTO knowledge_term (tenant_id, word, df)
SELECT tenant_id, '', count(*) FROM knowledge_chunk GROUP BY tenant_id;
INSERT INTO knowledge_term (tenant_id, word, df)
SELECT tenant_id, '#words', sum(n_words) FROM knowledge_chunk GROUP BY tenant_id HAVING sum(n_words) > 0;
"""


def rebuild(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(REBUILD)


class Migration(migrations.Migration):

    dependencies = [
        ("knowledge", "0002_term"),
    ]

    operations = [
        # Backwards leaves lexeme counts behind: 0002's word counts are not kept anywhere.
        migrations.RunPython(rebuild, migrations.RunPython.noop),
    ]
