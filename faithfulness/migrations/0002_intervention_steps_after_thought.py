"""annotation.0007 numbered the steps of a trace with a thought anew: thought steps first (1..T), the
answer steps that were there moved to T+1..T+A. An intervention names its target step by that index, so
every intervention made before on such a trace moves with its step (lossless; reversible)."""

from django.db import migrations
from django.db.models import F

LIFT = 1_000_000_000  # above every real index: the unique (frun, trace, step, kind) is checked row by row


def _shift(apps, sign: int) -> None:
    Trace = apps.get_model("annotation", "Trace")
    Intervention = apps.get_model("faithfulness", "Intervention")
    traces = Trace.objects.filter(n_thought_steps__gt=0).values_list("pk", "n_thought_steps")
    for pk, t in traces.iterator(chunk_size=500):
        rows = Intervention.objects.filter(trace_id=pk)
        if rows.exists():
            rows.update(step=F("step") + LIFT)
            rows.update(step=F("step") - LIFT + sign * t)


def forward(apps, schema_editor) -> None:
    _shift(apps, +1)


def backward(apps, schema_editor) -> None:
    _shift(apps, -1)


class Migration(migrations.Migration):

    dependencies = [
        ("faithfulness", "0001_initial"),
        ("annotation", "0007_segment_thoughts"),
    ]

    operations = [
        migrations.RunPython(forward, backward, elidable=False),
    ]
