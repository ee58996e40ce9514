"""Whether an assistant reply's request was offered the tenant's actions
(tandem.actions.offer), recorded with the reply rather than beside it in Redis. Rows
written before it read False: a REST reply still in flight across the deploy that starts
with a call stays text rather than running an action."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('chat', '0009_conversation_visitor_context_fts'),
    ]

    operations = [
        migrations.AddField(
            model_name='message',
            name='offered_actions',
            field=models.BooleanField(default=False),
        ),
    ]
