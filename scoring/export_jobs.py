"""Export jobs (``Job`` kind ``export``), beside the registry of export kinds (scoring.exports) whose
kinds they build: ``do_queue_export`` validates and queues, ``run_export_job`` (Celery,
``scoring.tasks.run_export``) writes the file and its manifest into the media storage, ``check_download``
guards the download and ``open_download`` opens it. Any app's kind runs through here.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
from django.core.files import File
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import InterfaceError, OperationalError, transaction
from django.urls import reverse

from annotation import access, jobs
from annotation.models import Job, Membership, Study
from reasonlib.refusals import Conflicting
from scoring import exports
from scoring.exports import ExportError, ExportRequest, Table

TRANSIENT_ERRORS = (OperationalError, InterfaceError)


#: How often (rows) a running export job reports progress and looks for a cancel.
PROGRESS_EVERY = 20_000


class JobCancelled(Exception):
    pass


PARAM_KEYS = ("what", "format", "source", "reference", "candidate", "profile", "model", "domain", "calibration",
              "cohort", "group", "seed")


def request_from_params(study: Study, params, membership: Membership | None) -> tuple[ExportRequest, str]:
    """(request, format) from API/form parameters; ExportError on bad input."""
    def get(key: str) -> str:
        value = params.get(key)
        return "" if value is None else str(value).strip()

    fmt = get("format") or "jsonl"
    if fmt not in exports.FORMATS:
        raise ExportError(f"format: choose one of {', '.join(exports.FORMATS)}")
    what = get("what")
    if not what:
        raise ExportError(f"what: choose one of {', '.join(exports.kinds())}")
    extra = {"group": get("group") or "model"}
    for key in ("calibration", "cohort", "seed"):
        if get(key):
            extra[key] = get(key)
    return ExportRequest(study=study, what=what, source=get("source") or None, profile=get("profile") or None,
                         reference=get("reference") or None, candidate=get("candidate") or None, model=get("model"),
                         domain=get("domain"), membership=membership, extra=extra), fmt


def do_queue_export(study: Study, membership: Membership, params, *, user, base_url: str = "") -> Job:
    """Validate an export request and queue it as a job (after commit).
    Raises ExportError / ExportForbidden before anything is written."""
    request, fmt = request_from_params(study, params, membership)
    exports.check(request)
    clean = {k: str(params.get(k)).strip() for k in PARAM_KEYS if params.get(k) not in (None, "")}
    clean["format"] = fmt
    clean["base_url"] = base_url
    with transaction.atomic():
        job = Job.objects.create(study=study, kind=Job.Kind.EXPORT, created_by=user, params=clean)
        transaction.on_commit(lambda: _enqueue(job.pk))
    return job


def _enqueue(job_id: int) -> None:
    from kombu.exceptions import OperationalError as BrokerError

    try:
        jobs.queue_task("scoring.tasks.run_export", job_id)  # by name: scoring.tasks imports this module
    except BrokerError:
        jobs.finish(job_id, status=Job.Status.FAILED, error="the task queue is not reachable")
        raise


def download_path(job: Job, *, manifest: bool = False) -> str:
    url = reverse("api-export-download", args=[job.pk])
    return url + ("?manifest=1" if manifest else "")


def _counted(table: Table, job_id: int, total: int) -> Iterator[dict[str, Any]]:
    n = 0
    for row in table.records():
        yield row
        n += 1
        if n % PROGRESS_EVERY == 0:
            jobs.report_progress(job_id, n, max(total, n))
            if Job.objects.filter(pk=job_id, cancel_requested=True).exists():
                raise JobCancelled()


def run_export_job(job_id: int, *, final_attempt: bool = True) -> dict[str, Any] | None:
    """The body of every export job: build, write to a temporary file, store
    it and its manifest with the job. Safe to run twice: a finished job is
    never claimed again; a re-run after a crash writes the file anew."""
    if not jobs.claim(job_id):
        return None
    job = Job.objects.select_related("study", "created_by").get(pk=job_id)
    study = job.study
    try:
        membership = None
        if job.created_by_id is not None:
            membership = Membership.objects.filter(study=study, user_id=job.created_by_id).first()
            if membership is None:
                raise ExportError("the user who asked for this export is no longer a member of the study")
        request, fmt = request_from_params(study, job.params, membership)
        table = exports.build(request)
        total = int(table.meta.get("expected_rows") or 0)
        jobs.report_progress(job_id, 0, total)
        if not isinstance(table.rows, pd.DataFrame):
            table = Table(table.columns, _counted(table, job_id, total), schema=table.schema, meta=table.meta,
                          lines=table.lines)
        safe = "".join(ch if ch.isalnum() or ch in "-_" else "-" for ch in study.name)[:60]
        name = f"{safe}-{request.what}-{job.pk}.{fmt}"
        with tempfile.TemporaryDirectory(prefix="reasonaudit-export-") as tmp:
            path = Path(tmp) / name
            info = exports.write_file(table, fmt, path, request)
            with path.open("rb") as fh:
                job.output_file.save(name, File(fh), save=False)
            size = path.stat().st_size
        Job.objects.filter(pk=job_id).update(output_file=job.output_file.name)
        info["export"]["file"] = Path(job.output_file.name).name
        default_storage.save(job.output_file.name + ".manifest.json",
                             ContentFile(json.dumps(info, indent=2).encode()))
    except JobCancelled:
        jobs.finish(job_id, status=Job.Status.CANCELLED, error="cancelled")
        return None
    except (ExportError, access.AccessDenied) as exc:  # a creator who lost the role: refused, not retried
        jobs.finish(job_id, status=Job.Status.FAILED, error=str(exc))
        return None
    except TRANSIENT_ERRORS:
        if final_attempt:
            jobs.finish(job_id, status=Job.Status.FAILED, error="the database was not reachable; gave up")
        raise
    except Exception as exc:
        jobs.finish(job_id, status=Job.Status.FAILED, error=f"{type(exc).__name__}: {exc}")
        raise
    base = job.params.get("base_url", "").rstrip("/")
    rows = info["counts"]["rows"]
    result = {
        "what": request.what, "format": fmt, "rows": rows, "bytes": size, "filename": info["export"]["file"],
        "download_url": base + download_path(job), "manifest_url": base + download_path(job, manifest=True),
        "manifest": info,
    }
    jobs.finish(job_id, status=Job.Status.SUCCEEDED, result=result, done=rows, total=rows)
    return result


class NotReady(Conflicting):
    """The export job has not (successfully) finished."""


def check_download(user, job_id: int) -> Job:
    """The finished export job ``job_id`` if ``user`` may download it: a
    member of its study, with the role its kind needs (annotation.access
    refusals otherwise); NotReady while it runs or when it failed."""
    job, membership = access.check_object(user, Job.objects.filter(kind=Job.Kind.EXPORT).only(
        "pk", "study_id", "status", "params", "output_file", "result"), job_id, study_path="study_id", what="export")
    what = job.params.get("what", "")
    try:
        restricted = exports.kind(what).restricted
    except ExportError:
        restricted = True
    if restricted and not access.can_adjudicate(membership):
        raise access.AccessDenied(f"{what} exports are for owners and adjudicators; you are {membership.role}")
    if job.status != Job.Status.SUCCEEDED or not job.output_file:
        raise NotReady(f"the export is {job.status}")
    return job


def open_download(job: Job, *, manifest: bool = False):
    """(file object, filename, content type) of a finished export job."""
    name = job.output_file.name + (".manifest.json" if manifest else "")
    fmt = job.params.get("format", "jsonl")
    ctype = "application/json" if manifest else exports.CONTENT_TYPES.get(fmt, "application/octet-stream")
    return default_storage.open(name, "rb"), Path(name).name, ctype
