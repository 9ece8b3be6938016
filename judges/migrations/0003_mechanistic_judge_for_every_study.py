"""Every study has the built-in mechanistic judge (new studies get it from a
post_save receiver); it becomes the primary judge where none is set."""

from django.db import migrations


def forwards(apps, schema_editor):
    Study = apps.get_model("annotation", "Study")
    JudgeConfig = apps.get_model("judges", "JudgeConfig")
    for study in Study.objects.all():
        judge, _ = JudgeConfig.objects.get_or_create(
            study=study, name="mechanistic",
            defaults={"provider": "mechanistic", "mode": "skeleton", "prompt_version": "", "concurrency": 1},
        )
        if study.primary_judge_id is None:
            Study.objects.filter(pk=study.pk).update(primary_judge=judge)


class Migration(migrations.Migration):
    dependencies = [
        ("judges", "0002_runs_prompts_results_cache"),
        ("annotation", "0002_initial"),
    ]

    operations = [migrations.RunPython(forwards, migrations.RunPython.noop)]
