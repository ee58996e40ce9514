"""The page and browser a visitor started a conversation from (the inbox's side panel),
and the GIN index the inbox's full-text search over messages uses (tandem.chat.search):
the same expression Django writes for SearchVector("content", config="simple"), so the
planner matches it. PostgreSQL only; SQLite searches by substring without an index."""

from django.db import migrations, models

INDEX = "chat_message_content_fts"


def _on_postgres(sql):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.execute(sql)
    return run


class Migration(migrations.Migration):

    dependencies = [
        ('chat', '0008_offline_answer'),
    ]

    operations = [
        migrations.AddField(
            model_name='conversation',
            name='page_url',
            field=models.CharField(blank=True, default='', max_length=2000),
        ),
        migrations.AddField(
            model_name='conversation',
            name='user_agent',
            field=models.CharField(blank=True, default='', max_length=400),
        ),
        migrations.RunPython(
            _on_postgres(f"CREATE INDEX IF NOT EXISTS {INDEX} ON chat_message "
                         "USING gin (to_tsvector('simple'::regconfig, COALESCE(content, '')))"),
            _on_postgres(f"DROP INDEX IF EXISTS {INDEX}"),
        ),
    ]
