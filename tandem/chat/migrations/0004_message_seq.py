"""Message.seq: each message's place in its conversation, numbered for the rows that
exist in the order they were read until now (created_at; the id on a tie, as good a
guess as any for rows that tied)."""

from django.conf import settings
from django.db import migrations, models


def number_messages(apps, schema_editor):
    Conversation = apps.get_model("chat", "Conversation")
    Message = apps.get_model("chat", "Message")
    for cid in Conversation.objects.values_list("pk", flat=True).iterator():
        rows = list(Message.objects.filter(conversation_id=cid).order_by("created_at", "pk").only("pk"))
        for n, m in enumerate(rows, 1):
            m.seq = n
        Message.objects.bulk_update(rows, ["seq"], batch_size=500)
        Conversation.objects.filter(pk=cid).update(message_seq=len(rows))


class Migration(migrations.Migration):

    dependencies = [
        ('chat', '0003_conversation_handoff'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AlterModelOptions(
            name='message',
            options={'ordering': ['seq']},
        ),
        migrations.AddField(
            model_name='conversation',
            name='message_seq',
            field=models.PositiveBigIntegerField(default=0, editable=False),
        ),
        migrations.AddField(
            model_name='message',
            name='seq',
            field=models.PositiveBigIntegerField(default=0, editable=False),
        ),
        migrations.AddIndex(
            model_name='message',
            index=models.Index(fields=['conversation', 'seq'], name='chat_messag_convers_c897c6_idx'),
        ),
        migrations.RunPython(number_messages, migrations.RunPython.noop),
    ]
