"""The stored disagreement steps carry their step's trace and index (the adjudication page's order, issue 33):
added nullable, copied from the steps, then required."""

import django.db.models.deletion
from django.db import migrations, models


def copy_trace_and_index(apps, schema_editor) -> None:
    SummaryDisagreement = apps.get_model("annotation", "SummaryDisagreement")
    Step = apps.get_model("annotation", "Step")
    SummaryDisagreement.objects.update(
        trace=models.Subquery(Step.objects.filter(pk=models.OuterRef("step")).values("trace")[:1]),
        index=models.Subquery(Step.objects.filter(pk=models.OuterRef("step")).values("index")[:1]),
    )
    # A stored step deleted since (its study's summary is then stale anyway): nothing to order it by.
    SummaryDisagreement.objects.filter(models.Q(trace__isnull=True) | models.Q(index__isnull=True)).delete()


class Migration(migrations.Migration):

    dependencies = [
        ('annotation', '0014_trace_claims'),
    ]

    operations = [
        migrations.AlterField(
            model_name='summarydisagreement',
            name='step',
            field=models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.DO_NOTHING, related_name='summary_disagreements', to='annotation.step'),
        ),
        migrations.AddField(
            model_name='summarydisagreement',
            name='trace',
            field=models.ForeignKey(null=True, db_constraint=False, db_index=False, on_delete=django.db.models.deletion.DO_NOTHING, related_name='+', to='annotation.trace'),
        ),
        migrations.AddField(
            model_name='summarydisagreement',
            name='index',
            field=models.PositiveIntegerField(null=True),
        ),
        migrations.RunPython(copy_trace_and_index, migrations.RunPython.noop),
        migrations.AlterField(
            model_name='summarydisagreement',
            name='trace',
            field=models.ForeignKey(db_constraint=False, db_index=False, on_delete=django.db.models.deletion.DO_NOTHING, related_name='+', to='annotation.trace'),
        ),
        migrations.AlterField(
            model_name='summarydisagreement',
            name='index',
            field=models.PositiveIntegerField(),
        ),
        migrations.AddIndex(
            model_name='summarydisagreement',
            index=models.Index(fields=['study', 'trace', 'index'], name='summary_disagreement_order'),
        ),
    ]
