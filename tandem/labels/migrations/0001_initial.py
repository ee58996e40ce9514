import django.db.models.deletion
import django.db.models.functions.text
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('tenants', '0007_invitation'),
        ('chat', '0008_offline_answer'),
    ]

    operations = [
        migrations.CreateModel(
            name='Label',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.CharField(max_length=40)),
                ('color', models.CharField(choices=[('grey', 'grey'), ('blue', 'blue'), ('green', 'green'), ('amber', 'amber'), ('red', 'red'), ('purple', 'purple'), ('teal', 'teal'), ('pink', 'pink')], default='grey', max_length=16)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('conversations', models.ManyToManyField(blank=True, related_name='labels', to='chat.conversation')),
                ('tenant', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='labels', to='tenants.tenant')),
            ],
            options={
                'ordering': ['name', 'id'],
                'constraints': [models.UniqueConstraint(django.db.models.functions.text.Lower('name'), models.F('tenant'), name='label_name_unique_ci')],
            },
        ),
    ]
