"""The score job's writer of the study summary (annotation.study_summary holds what pages read of it):
the counts of every trace and label and the disagreement steps, stored in one transaction. It sits
apart from the readers because it takes the disagreement steps from the adjudication's own query
(annotation.review.adjudication), which itself reads the stored ones."""

from __future__ import annotations

from django.core.exceptions import EmptyResultSet
from django.db import connection, transaction
from django.utils import timezone

from annotation.jobs import recompute_pending
from annotation.models import Job, Step, Study, StudySummary, SummaryDisagreement
from annotation.review.adjudication import disagreement_step_ids
from annotation.study_summary import (
    DISAGREEMENT_STEPS,
    STORED,
    by_model,
    by_model_and_domain,
    count,
    disagreement_steps_by_model,
    judge_counts,
    reviewer_ids,
)


def _insert_disagreements(study: Study) -> None:
    """The study's disagreement steps written by the database from the adjudication's own query (INSERT ...
    SELECT): a large study's steps never pass through this process (issue 33: 1 GB at 1M traces)."""
    try:
        sub_sql, params = disagreement_step_ids(study, open_only=False).query.sql_with_params()
    except EmptyResultSet:  # a query Django knows to be empty has no SQL
        return
    q = connection.ops.quote_name
    meta, steps = SummaryDisagreement._meta, Step._meta
    columns = ", ".join(q(meta.get_field(name).column) for name in ("study", "step", "trace", "index"))
    sql = (f"INSERT INTO {q(meta.db_table)} ({columns}) "
           f"SELECT %s, s.{q(steps.pk.column)}, s.{q(steps.get_field('trace').column)}, s.{q(steps.get_field('index').column)} "
           f"FROM {q(steps.db_table)} s WHERE s.{q(steps.pk.column)} IN ({sub_sql})")  # a values("step") query
    with connection.cursor() as cursor:
        cursor.execute(sql, [study.pk, *params])


def store(study: Study, job: Job | None = None) -> dict[str, int]:
    """Count and store the study's summary. Stale as soon as written when the data changed while it was
    counted (the change marked the old row, or queued another score job): that job writes it anew."""
    read_at = timezone.now()
    counted = count([study.pk], disagreements=False)[study.pk]  # the open ones are counted when read
    counts: dict = {**{key: counted[key] for key in STORED}, "by_model_and_domain": by_model_and_domain(study),
                    "by_model": by_model(study), "judges": judge_counts(study), "reviewers": reviewer_ids(study)}
    with transaction.atomic():
        current = StudySummary.objects.select_for_update().filter(study=study).values_list("marked_at", flat=True)
        marked = next(iter(current), None)
        stale = (marked is not None and marked >= read_at) or recompute_pending(study.pk, job, read_at)
        SummaryDisagreement.objects.filter(study=study).delete()
        _insert_disagreements(study)
        counts[DISAGREEMENT_STEPS] = disagreement_steps_by_model(study)
        # A new time on every write: agreement.data.data_version keys its cache by it.
        StudySummary.objects.update_or_create(study=study, defaults={
            "counts": counts, "computed_at": timezone.now(), "stale": stale, "marked_at": marked if stale else None})
    return counts


def refresh(study: Study, job: Job | None, whole: bool) -> None:
    """The score job's hook (scoring.hooks.register_summary): a job that recomputes every
    profile (each change of the data queues one) stores anew; one for some profiles only (the
    data unchanged) stores when nothing is stored."""
    if whole or not StudySummary.objects.filter(study=study).exists():
        store(study, job)
