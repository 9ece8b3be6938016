"""Old traces keep their thought as one text (Trace.thought); segment it into thought steps.

Per trace with a thought and no thought step yet: the thought is segmented with the study's thought
segmenter (paragraphs, the new field's default), its T steps become indexes 1..T in channel "thought",
and the answer steps already there move to T+1..T+A -- in place, so their labels, label history and
everything else that points at a step row stay attached. ``n_steps`` counts both channels,
``n_thought_steps`` is T, and ``steps_hash`` is recomputed the way the import computes it now (thought
texts marked with their channel), so re-importing the same file is still recognised as unchanged.

Reversible: the thought steps (and any labels put on them since) are deleted and the answer steps move back.
"""

import hashlib

from django.db import migrations
from django.db.models import F

from reasonlib import segmentation

# Answer-step indexes are first lifted above every real index, then brought down to their place: two
# statements instead of one because PostgreSQL checks a non-deferrable unique constraint row by row.
LIFT = 1_000_000_000
THOUGHT_MARK = "\x1fthought\x1f"  # a frozen copy of reasonlib.thinking's channel mark in steps_hash


def _hash(thought_texts: list[str], answer_texts: list[str]) -> str:
    texts = [THOUGHT_MARK + t for t in thought_texts] + answer_texts
    return hashlib.sha256("\x1e".join(texts).encode()).hexdigest()


def segment_thoughts(apps, schema_editor) -> None:
    Trace = apps.get_model("annotation", "Trace")
    Step = apps.get_model("annotation", "Step")
    todo = (
        Trace.objects.exclude(thought="").filter(n_thought_steps=0)
        .values_list("pk", "study__thought_segmenter").order_by("pk")
    )
    for pk, method in todo.iterator(chunk_size=500):
        trace = Trace.objects.get(pk=pk)
        segments = segmentation.segment(trace.thought, method or "paragraphs")
        if not segments:
            continue  # a thought of blank lines: nothing to segment, and the text stays
        t = len(segments)
        answer = Step.objects.filter(trace_id=pk)
        answer.update(index=F("index") + LIFT)
        answer.update(index=F("index") - LIFT + t)
        Step.objects.bulk_create([
            Step(trace_id=pk, index=k, channel="thought", text=s.text, start=s.start, end=s.end)
            for k, s in enumerate(segments, start=1)
        ])
        answer_texts = list(Step.objects.filter(trace_id=pk, channel="answer").order_by("index")
                            .values_list("text", flat=True))
        meta = dict(trace.meta or {})
        # The shape reasonlib.thinking gives meta["thought"]: one block, the whole text.
        meta.setdefault("thought", {"form": "migrated",
                                    "blocks": [{"start": 0, "end": len(trace.thought), "source": "migrated"}]})
        Trace.objects.filter(pk=pk).update(
            n_thought_steps=t, n_steps=t + len(answer_texts), empty=False,
            steps_hash=_hash([s.text for s in segments], answer_texts), meta=meta,
        )


def unsegment_thoughts(apps, schema_editor) -> None:
    Trace = apps.get_model("annotation", "Trace")
    Step = apps.get_model("annotation", "Step")
    StepLabel = apps.get_model("annotation", "StepLabel")
    LabelHistory = apps.get_model("annotation", "LabelHistory")
    for pk, t in Trace.objects.filter(n_thought_steps__gt=0).values_list("pk", "n_thought_steps").iterator(chunk_size=500):
        # Labels and history on thought steps go with them; deleted level by level because the collector of
        # a historical model does not follow relations declared in other apps' states.
        ids = list(Step.objects.filter(trace_id=pk, channel="thought").values_list("pk", flat=True))
        LabelHistory.objects.filter(step_id__in=ids)._raw_delete(LabelHistory.objects.db)
        StepLabel.objects.filter(step_id__in=ids)._raw_delete(StepLabel.objects.db)
        Step.objects.filter(pk__in=ids)._raw_delete(Step.objects.db)
        answer = Step.objects.filter(trace_id=pk)
        answer.update(index=F("index") + LIFT)
        answer.update(index=F("index") - LIFT - t)
        texts = list(answer.order_by("index").values_list("text", flat=True))
        Trace.objects.filter(pk=pk).update(
            n_thought_steps=0, n_steps=len(texts), empty=not texts,
            steps_hash=hashlib.sha256("\x1e".join(texts).encode()).hexdigest(),
        )


class Migration(migrations.Migration):

    dependencies = [
        ("annotation", "0006_thinking_channel"),
    ]

    operations = [
        migrations.RunPython(segment_thoughts, unsegment_thoughts, elidable=False),
    ]
