"""Scanner answers per person (issue 29, L1): a sampled trace (ScanLabel) keeps its split, and each
person's answer is a ScanAnswer of their own, so nobody overwrites or withdraws another's. The one
answer a sampled trace had is copied to its author's row (the command line's when it had none)."""

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models


def copy_answers(apps, schema_editor):
    ScanLabel = apps.get_model("search", "ScanLabel")
    ScanAnswer = apps.get_model("search", "ScanAnswer")
    ScanAnswer.objects.bulk_create([
        ScanAnswer(label_id=pk, annotator_id=annotator, answer=answer, answered_at=at)
        for pk, annotator, answer, at in ScanLabel.objects.filter(answer__isnull=False)
        .values_list("pk", "annotator_id", "answer", "answered_at").iterator(chunk_size=2000)
        if at is not None
    ] + [
        ScanAnswer(label_id=pk, annotator_id=annotator, answer=answer)
        for pk, annotator, answer in ScanLabel.objects.filter(answer__isnull=False, answered_at__isnull=True)
        .values_list("pk", "annotator_id", "answer").iterator(chunk_size=2000)
    ], batch_size=2000)


class Migration(migrations.Migration):

    dependencies = [
        ('search', '0006_pg_filter_indexes'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='ScanAnswer',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('answer', models.BooleanField()),
                ('answered_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('annotator', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('label', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='answers', to='search.scanlabel')),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('label', 'annotator'), name='scananswer_one_per_person'), models.UniqueConstraint(condition=models.Q(('annotator__isnull', True)), fields=('label',), name='scananswer_one_by_the_command_line')],
            },
        ),
        migrations.RunPython(copy_answers, migrations.RunPython.noop),
        migrations.RemoveField(
            model_name='scanlabel',
            name='annotator',
        ),
        migrations.RemoveField(
            model_name='scanlabel',
            name='answer',
        ),
        migrations.RemoveField(
            model_name='scanlabel',
            name='answered_at',
        ),
    ]
