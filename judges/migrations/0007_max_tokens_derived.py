"""max_tokens may be unset (null): the judge then derives it per trace from the
number of steps (docs/judges.md, "Max tokens").

2,048 was the form's default, so a row holding it almost always means "nobody
chose"; those rows become null, and their version goes up because their
requests change. Any other value was chosen by someone and stays. The
mechanistic judge sends no request: null too, without a new version."""

from django.core.validators import MinValueValidator
from django.db import migrations, models
from django.db.models import F

OLD_DEFAULT = 2048


def forwards(apps, schema_editor):
    JudgeConfig = apps.get_model("judges", "JudgeConfig")
    JudgeConfig.objects.filter(provider="mechanistic").update(max_tokens=None)
    JudgeConfig.objects.filter(max_tokens=OLD_DEFAULT).exclude(provider="mechanistic").update(
        max_tokens=None, version=F("version") + 1
    )


def backwards(apps, schema_editor):
    JudgeConfig = apps.get_model("judges", "JudgeConfig")
    JudgeConfig.objects.filter(max_tokens__isnull=True).update(max_tokens=OLD_DEFAULT)


class Migration(migrations.Migration):
    dependencies = [
        ("judges", "0006_drop_moved_engine_fields"),
    ]

    operations = [
        migrations.AlterField(
            model_name="judgeconfig", name="max_tokens",
            field=models.PositiveIntegerField(
                blank=True, default=None, null=True, validators=[MinValueValidator(1)],
                help_text="leave empty to derive it from each trace's number of steps (256 + 128 per step, at most "
                          "4,096)",
            ),
        ),
        migrations.RunPython(forwards, backwards),
    ]
