"""Second half of the engine's move to the runs app (0005 copied the rows):
drop the fields and tables that now live in runs."""

from django.db import migrations, models

ENGINE_FIELDS = ("force", "budget_usd", "config", "requests", "cache_hits", "prompt_tokens", "completion_tokens",
                 "cost_usd", "warnings", "stop_reason")


class Migration(migrations.Migration):
    dependencies = [
        ("judges", "0005_copy_runs_to_engine"),
    ]

    operations = [
        *[migrations.RemoveField(model_name="judgerun", name=name) for name in ENGINE_FIELDS],
        migrations.AlterField(
            model_name="judgerun", name="run",
            field=models.OneToOneField(on_delete=models.deletion.CASCADE, related_name="judge_run", to="runs.run"),
        ),
        migrations.DeleteModel(name="JudgeCall"),
        migrations.DeleteModel(name="JudgeRunChunk"),
        migrations.DeleteModel(name="ResponseCache"),
    ]
