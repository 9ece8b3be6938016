"""Eval logs through the upload path (REST API, run as a Celery job): an Inspect log imports from
the stored upload; lm-eval is refused up front, since its results JSON cannot come along."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from annotation.models import Job, Trace
from tests.evallogs.conftest import INSPECT_LOG, LM_EVAL_SAMPLES
from tests.test_import_api import assert_error_shape, client_for, post_import

pytestmark = pytest.mark.django_db


def test_an_uploaded_inspect_log_is_imported_by_the_job(owner, study, django_capture_on_commit_callbacks):
    upload = SimpleUploadedFile("run.eval", INSPECT_LOG.read_bytes(), content_type="application/zip")
    with django_capture_on_commit_callbacks(execute=True):
        response = post_import(client_for(owner), study, file=upload, format="inspect")
    assert response.status_code == 202, response.content
    job = Job.objects.get(pk=response.json()["id"])
    assert job.status == Job.Status.SUCCEEDED, job.error
    assert job.result["traces_created"] == 8
    assert Trace.objects.filter(study=study).exclude(regime={}).count() == 8


def test_an_lm_eval_upload_is_400_naming_format(owner, study):
    upload = SimpleUploadedFile(LM_EVAL_SAMPLES.name, LM_EVAL_SAMPLES.read_bytes())
    body = assert_error_shape(post_import(client_for(owner), study, file=upload, format="lm-eval"), 400)
    assert body["errors"] == [{"field": "format", "message": "\"lm-eval\" is not a valid choice."}]
    assert not Job.objects.exists()
