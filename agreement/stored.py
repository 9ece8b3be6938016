"""Stored agreement reports (agreement.models.StoredReport): what the *Judge vs reference* page shows for
its default selection and what the Annotators page shows for the whole study, written by the score job.

Computing either reads every label of the study and bootstraps a thousand resamples: seconds at 100,000
traces, on a request that could not wait for it. The score job, which every change of the data queues
(annotation.signals.data_changed), writes both after the scores they read (``refresh``, registered with
``scoring.hooks.register_summary`` by agreement.apps). The same signal marks them ``stale``
(``invalidate``) instead of deleting them: a page then shows the stored figures, says when they were
computed and that a recompute is under way, and the job replaces them. Selections other than the
default (another source, profile, seed or a calibration sample) are computed on request and cached per
data version (agreement.services).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from agreement.models import StoredDisagreementChunk, StoredReport
from annotation.jobs import recompute_pending
from annotation.models import Job, Study


def pair_key(reference: str, candidate: str, profile_pk: int, profile_version: int, seed: int) -> str:
    """What a *Judge vs reference* report is of: two sources, a profile at a version, a seed."""
    return "\x1f".join([reference, candidate, str(profile_pk), str(profile_version), str(seed)])


ANNOTATORS_KEY = "study"


def read(study: Study, kind: str, key: str) -> StoredReport | None:
    """The stored report of ``kind`` and ``key``, stale or not, or None when none was stored; its
    disagreements are in chunks apart (``Rows`` reads the slice a page shows)."""
    return StoredReport.objects.filter(study=study, kind=kind, key=key).first()


class Rows(Sequence):
    """A stored report's disagreements as the sequence a Paginator pages: its length is stored, and a slice
    is read from the database (one query of the chunks that hold it), not the whole list."""

    def __init__(self, row: StoredReport) -> None:
        self.pk, self.n = row.pk, row.n_disagreements

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index):
        if isinstance(index, slice):
            start, stop, step = index.indices(self.n)
            if step != 1:
                return list(self)[index]
            return self._read(start, stop) if start < stop else []
        if index < 0:
            index += self.n
        if not 0 <= index < self.n:
            raise IndexError(index)
        return self._read(index, index + 1)[0]

    def _read(self, start: int, stop: int) -> list[list]:
        # The chunks (StoredDisagreementChunk) that hold rows start .. stop - 1: one or two for a page.
        size = StoredDisagreementChunk.CHUNK_ROWS
        first, last = start // size, (stop - 1) // size
        rows: list[list] = []
        for text in (StoredDisagreementChunk.objects.filter(report_id=self.pk, number__range=(first, last))
                     .order_by("number").values_list("rows", flat=True)):
            rows.extend(text)
        return rows[start - first * size:stop - first * size]


def status(row: StoredReport) -> dict[str, Any]:
    """What a page says of a stored report: when it was computed, and whether the data changed since."""
    return {"computed_at": row.computed_at, "stale": row.stale}


def write(study: Study, kind: str, key: str, data: dict[str, Any], *, read_at: datetime,
          job: Job | None, disagreements: Collection[list] | None = None) -> StoredReport:
    """Store ``data`` as the one report of ``kind`` for the study (older keys go: another profile
    version, another primary judge), and its disagreements (rows ``[trace pk, step, reference verdict,
    candidate verdict, confidence]``, in order) as chunks. ``read_at``: when the job began to read the data
    it is computed from; a change of the data since then (``invalidate`` marked the row, or a score job was
    queued that has not run) leaves it stale, so the page never shows it as current."""
    rows = disagreements if disagreements is not None else []
    with transaction.atomic():
        current = StoredReport.objects.select_for_update().filter(study=study, kind=kind, key=key) \
            .only("marked_at").first()
        changed = current is not None and current.marked_at is not None and current.marked_at >= read_at
        stale = changed or recompute_pending(study.pk, job, read_at)
        StoredReport.objects.filter(study=study, kind=kind).exclude(key=key).delete()
        row, _ = StoredReport.objects.update_or_create(
            study=study, kind=kind, key=key,
            defaults={"data": data, "n_disagreements": len(rows), "computed_at": timezone.now(), "stale": stale})
        write_chunks(row.pk, rows)
    return row


#: Chunks written per INSERT: 100 of 500 rows, a few MB of JSON.
_CHUNKS_PER_INSERT = 100


def write_chunks(report_pk: int, rows: Iterable[list]) -> None:
    """The report's disagreements as StoredDisagreementChunk rows (the old ones go), ``CHUNK_ROWS`` to a
    chunk, inserted a hundred chunks at a time: the rows are read from ``rows`` as they are written, so a
    report of a million traces (1.8M disagreements, from agreement.streamed's packed arrays) is never one
    list or one JSON text in this process."""
    size = StoredDisagreementChunk.CHUNK_ROWS
    StoredDisagreementChunk.objects.filter(report_id=report_pk).delete()
    pending: list[StoredDisagreementChunk] = []
    chunk: list[list] = []
    number = 0

    def close() -> None:
        nonlocal chunk, number
        pending.append(StoredDisagreementChunk(report_id=report_pk, number=number, rows=chunk))
        chunk, number = [], number + 1
        if len(pending) >= _CHUNKS_PER_INSERT:
            StoredDisagreementChunk.objects.bulk_create(pending)
            pending.clear()

    for row in rows:
        chunk.append(row)
        if len(chunk) == size:
            close()
    if chunk:
        close()
    if pending:
        StoredDisagreementChunk.objects.bulk_create(pending)


def invalidate(sender, study: Study, **kwargs) -> None:
    """Receiver of annotation.signals.data_changed: the stored reports describe older data. They stay,
    marked, until the score job that the same change queued replaces them."""
    StoredReport.objects.filter(study=study).update(stale=True, marked_at=timezone.now())
