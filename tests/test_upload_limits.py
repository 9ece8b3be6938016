"""Issue 20, "the REST import saves an oversize upload before refusing it and never deletes uploads":
an upload over the limit is refused before anything is written, an upload is deleted once its import
ends (its size and sha256 stay in the job), and every request body is capped before it is read."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.core.exceptions import RequestDataTooBig

from annotation.models import Job, Trace
from reasonaudit.limits import UploadLimitHandler
from tests.test_import_api import GOOD, client_for, post_import, upload

pytestmark = pytest.mark.django_db


def stored_uploads() -> list[Path]:
    root = Path(django_settings.MEDIA_ROOT) / "uploads"
    return [p for p in root.rglob("*") if p.is_file()] if root.exists() else []


def test_an_oversize_upload_is_refused_before_anything_is_written(owner, study, settings):
    settings.IMPORT_MAX_BYTES = 100
    before = stored_uploads()
    response = post_import(client_for(owner), study, file=upload(GOOD), format="reasonaudit")
    assert response.status_code == 400
    assert f"the file is {len(GOOD):,} bytes, over the import limit of 100 bytes" in response.content.decode()
    assert not Job.objects.filter(kind=Job.Kind.IMPORT).exists()
    assert stored_uploads() == before


def test_an_upload_is_deleted_when_its_import_ends_and_its_hash_kept(owner, study,
                                                                      django_capture_on_commit_callbacks):
    before = set(stored_uploads())
    with django_capture_on_commit_callbacks(execute=True):
        response = post_import(client_for(owner), study, file=upload(GOOD), format="reasonaudit")
    assert response.status_code == 202
    job = Job.objects.get(pk=response.json()["id"])
    assert job.status == Job.Status.SUCCEEDED and Trace.objects.filter(study=study).count() == 2
    assert not job.input_file and set(stored_uploads()) == before
    assert job.params["sha256"] == hashlib.sha256(GOOD).hexdigest() and job.params["size"] == len(GOOD)


def test_a_failed_import_deletes_its_upload_too(owner, study, django_capture_on_commit_callbacks):
    before = set(stored_uploads())
    with django_capture_on_commit_callbacks(execute=True):
        response = post_import(client_for(owner), study, file=upload(b"not json\n"), format="reasonaudit")
    job = Job.objects.get(pk=response.json()["id"])
    assert job.status == Job.Status.FAILED and set(stored_uploads()) == before and not job.input_file


def test_a_request_body_over_the_cap_is_413_before_it_is_read(owner, study, settings, client):
    settings.REQUEST_MAX_BYTES = 1000
    response = post_import(client_for(owner), study, file=upload(GOOD * 10), format="reasonaudit")
    assert response.status_code == 413
    assert "over the limit of 1,000 bytes" in response.json()["detail"]
    assert client.post("/accounts/login/", {"username": "x" * 2000}).status_code == 413
    assert not Job.objects.exists()


def test_a_body_without_a_length_is_stopped_at_the_cap(settings):
    settings.REQUEST_MAX_BYTES = 1000
    handler = UploadLimitHandler()
    assert handler.receive_data_chunk(b"x" * 600, 0) == b"x" * 600
    with pytest.raises(RequestDataTooBig):
        handler.receive_data_chunk(b"x" * 600, 600)
