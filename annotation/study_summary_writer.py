"""The score job's writer of the study summary (annotation.study_summary holds what pages read of it):
the counts of every trace and label and the disagreement steps, stored in one transaction. It sits
apart from the readers because it takes the disagreement steps from the adjudication's own query
(annotation.review.adjudication), which itself reads the stored ones."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from annotation.models import Job, Study, StudySummary, SummaryDisagreement
from annotation.review.adjudication import disagreement_step_ids
from annotation.study_summary import by_model, by_model_and_domain, count, judge_counts


def store(study: Study) -> dict[str, int]:
    counts: dict = {**count([study.pk])[study.pk], "by_model_and_domain": by_model_and_domain(study),
                    "by_model": by_model(study), "judges": judge_counts(study)}
    steps = list(disagreement_step_ids(study, open_only=False).values_list("step", flat=True))
    with transaction.atomic():
        SummaryDisagreement.objects.filter(study=study).delete()
        SummaryDisagreement.objects.bulk_create([SummaryDisagreement(study=study, step_id=s) for s in steps],
                                                batch_size=5000)
        # A new time on every write: agreement.data.data_version keys its cache by it.
        StudySummary.objects.update_or_create(study=study, defaults={"counts": counts, "computed_at": timezone.now()})
    return counts


def refresh(study: Study, job: Job | None, whole: bool) -> None:
    """The score job's hook (scoring.hooks.register_summary): a job that recomputes every
    profile (each change of the data queues one) stores anew; one for some profiles only (the
    data unchanged) stores when nothing is stored."""
    if whole or not StudySummary.objects.filter(study=study).exists():
        store(study)


