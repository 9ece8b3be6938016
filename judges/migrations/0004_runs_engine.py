"""The run engine moved to the runs app (docs/runs.md): a JudgeRun gets its
runs.Run (0005 copies the rows, 0006 drops what moved)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("judges", "0003_mechanistic_judge_for_every_study"),
        ("runs", "0001_initial"),
    ]

    operations = [
        migrations.AddField(
            model_name="judgerun", name="run",
            field=models.OneToOneField(null=True, on_delete=models.deletion.CASCADE, related_name="judge_run",
                                       to="runs.run"),
        ),
        migrations.AddField(
            model_name="judgetraceresult", name="unknown_token_calls",
            field=models.PositiveSmallIntegerField(default=0),
        ),
    ]
