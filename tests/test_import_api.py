"""Import over the REST API (docs/api.md, docs/import-format.md): ``POST studies/{id}/imports/``
queues a job that runs after commit (eagerly in the test settings),
``GET imports/{id}/`` reports it, ``DELETE jobs/{id}/`` cancels a queued one."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

from annotation.models import Job, Problem, Step, Study, Trace
from tests.conftest import jsonl

pytestmark = pytest.mark.django_db

GOOD = jsonl(
    {"kind": "problem", "problem_id": "p1", "statement": "2+2?", "gold_answer": "4"},
    {"kind": "trace", "problem_id": "p1", "model": "m", "trace_id": "t1", "raw": "2+2 = 4\nA: 4"},
    {"kind": "trace", "problem_id": "p1", "model": "m", "trace_id": "t2", "steps": ["2+2 = 5", "so 5"], "answer": "5"},
)
BAD = jsonl(
    {"kind": "problem", "problem_id": "p1", "statement": "2+2?", "gold_answer": "4"},
    {"kind": "trace", "problem_id": "p1", "model": "m", "steps": ["2+2 = 4"]},
    {"kind": "trace", "problem_id": "p1", "model": "m"},
    "[1, 2]",
)


def client_for(user=None) -> APIClient:
    client = APIClient()
    if user is not None:
        client.force_authenticate(user)
    return client


def upload(data: bytes = GOOD, name: str = "traces.jsonl") -> SimpleUploadedFile:
    return SimpleUploadedFile(name, data, content_type="application/jsonl")


def post_import(client: APIClient, study: Study, **fields):
    return client.post(f"/api/v1/studies/{study.pk}/imports/", fields, format="multipart")


def assert_error_shape(response, status: int) -> dict:
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"detail", "errors"}
    assert isinstance(body["detail"], str) and body["detail"]
    return body


def test_the_owner_uploads_a_file_and_the_job_runs_after_commit(owner, study, django_capture_on_commit_callbacks):
    client = client_for(owner)
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        response = post_import(client, study, file=upload(), format="reasonaudit")
        assert response.status_code == 202, response.content
        job = response.json()
        # Answered before the transaction committed: the import has not run yet.
        assert job["status"] == "queued"
        assert Trace.objects.count() == 0
    assert len(callbacks) == 2  # the import, then the score recompute it triggers
    assert job["kind"] == "import" and job["study"] == study.pk
    assert job["params"]["format"] == "reasonaudit" and job["params"]["skip_invalid"] is False
    assert job["html_url"].endswith(f"/jobs/{job['id']}/")

    response = client.get(f"/api/v1/imports/{job['id']}/")
    assert response.status_code == 200
    done = response.json()
    assert done["status"] == "succeeded"
    assert done["error"] == ""
    assert done["result"]["read"] == 3
    assert (done["result"]["problems_created"], done["result"]["traces_created"], done["result"]["steps_created"]) == (
        1,
        2,
        3,
    )
    assert done["result"]["rejected"] == [] and done["result"]["committed"] is True
    assert done["progress"]["done"] == done["progress"]["total"] == 3
    assert done["started_at"] and done["finished_at"]
    assert Trace.objects.filter(study=study).count() == 2
    assert Job.objects.get(pk=job["id"]).created_by == owner


def test_an_uploaded_file_in_another_format(owner, study, django_capture_on_commit_callbacks):
    rows = jsonl({"prompt": "1+1?", "completions": ["1+1 = 2", "So 2."], "labels": [True, False]})
    with django_capture_on_commit_callbacks(execute=True):
        response = post_import(client_for(owner), study, file=upload(rows), format="trl-stepwise")
    assert response.status_code == 202
    job = Job.objects.get(pk=response.json()["id"])
    assert job.status == Job.Status.SUCCEEDED
    assert job.result["traces_created"] == 1 and job.result["labels_created"] == 2


def test_a_bad_file_fails_the_job_with_every_rejected_line(owner, study, django_capture_on_commit_callbacks):
    client = client_for(owner)
    with django_capture_on_commit_callbacks(execute=True):
        response = post_import(client, study, file=upload(BAD))
    assert response.status_code == 202
    job = client.get(f"/api/v1/imports/{response.json()['id']}/").json()
    assert job["status"] == "failed"
    assert [r["line"] for r in job["result"]["rejected"]] == [3, 4]
    assert '"raw"' in job["result"]["rejected"][0]["reason"]
    assert "JSON object" in job["result"]["rejected"][1]["reason"]
    assert job["result"]["committed"] is False
    assert "2 line(s) rejected" in job["error"]
    assert (Problem.objects.count(), Trace.objects.count(), Step.objects.count()) == (0, 0, 0)


def test_skip_invalid_keeps_the_good_lines(owner, study, django_capture_on_commit_callbacks):
    client = client_for(owner)
    with django_capture_on_commit_callbacks(execute=True):
        response = post_import(client, study, file=upload(BAD), skip_invalid="true")
    assert response.status_code == 202
    assert response.json()["params"]["skip_invalid"] is True
    job = client.get(f"/api/v1/imports/{response.json()['id']}/").json()
    assert job["status"] == "partial"  # issue 23: rejected lines were skipped, not a green "succeeded"
    assert "2 line(s) rejected and skipped" in job["error"]
    assert [r["line"] for r in job["result"]["rejected"]] == [3, 4]
    assert job["result"]["traces_created"] == 1
    assert (Problem.objects.count(), Trace.objects.count()) == (1, 1)


def test_an_annotator_may_not_import(member, study, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        response = post_import(client_for(member), study, file=upload())
    body = assert_error_shape(response, 403)
    assert body["errors"] == []
    assert "owner" in body["detail"]
    assert Job.objects.count() == 0 and Trace.objects.count() == 0


def test_an_outsider_gets_404(outsider, study):
    response = post_import(client_for(outsider), study, file=upload())
    body = assert_error_shape(response, 404)
    assert body["errors"] == []
    assert Job.objects.count() == 0


def test_an_unknown_study_is_404(owner, study):
    response = client_for(owner).post("/api/v1/studies/999999/imports/", {"file": upload()}, format="multipart")
    assert_error_shape(response, 404)


def test_anonymous_requests_are_refused(study):
    response = post_import(client_for(), study, file=upload())
    assert response.status_code in (401, 403)
    assert set(response.json()) == {"detail", "errors"}
    assert Job.objects.count() == 0


def test_a_missing_file_field_is_400_naming_file(owner, study):
    response = post_import(client_for(owner), study, format="reasonaudit")
    body = assert_error_shape(response, 400)
    assert [e["field"] for e in body["errors"]] == ["file"]
    assert body["detail"].startswith("file:")
    assert Job.objects.count() == 0


def test_an_unknown_format_is_400_naming_format(owner, study):
    response = post_import(client_for(owner), study, file=upload(), format="csv")
    body = assert_error_shape(response, 400)
    assert [e["field"] for e in body["errors"]] == ["format"]
    assert "csv" in body["errors"][0]["message"]
    assert Job.objects.count() == 0


def test_a_json_body_is_415(owner, study):
    response = client_for(owner).post(f"/api/v1/studies/{study.pk}/imports/", {"format": "gsm8k"}, format="json")
    assert_error_shape(response, 415)


def test_import_jobs_are_visible_to_members_only(owner, member, outsider, study, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        job_id = post_import(client_for(owner), study, file=upload()).json()["id"]
    assert client_for(member).get(f"/api/v1/imports/{job_id}/").status_code == 200
    assert_error_shape(client_for(outsider).get(f"/api/v1/imports/{job_id}/"), 404)
    assert client_for().get(f"/api/v1/imports/{job_id}/").status_code in (401, 403)


def test_imports_detail_shows_only_import_jobs_and_cannot_delete(owner, study):
    other = Job.objects.create(study=study, kind=Job.Kind.SCORE, created_by=owner)
    assert_error_shape(client_for(owner).get(f"/api/v1/imports/{other.pk}/"), 404)
    assert client_for(owner).get(f"/api/v1/jobs/{other.pk}/").status_code == 200
    job = Job.objects.create(study=study, kind=Job.Kind.IMPORT, created_by=owner)
    assert client_for(owner).delete(f"/api/v1/imports/{job.pk}/").status_code == 405
    job.refresh_from_db()
    assert job.status == Job.Status.QUEUED


def test_deleting_a_queued_job_cancels_it_and_it_never_runs(owner, study, django_capture_on_commit_callbacks):
    client = client_for(owner)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        job_id = post_import(client, study, file=upload()).json()["id"]
    assert Job.objects.get(pk=job_id).status == Job.Status.QUEUED

    response = client.delete(f"/api/v1/jobs/{job_id}/")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "cancelled" and body["cancel_requested"] is True
    assert body["finished_at"]

    # The task is delivered later (here: the captured on-commit callback).
    for callback in callbacks:
        callback()
    job = Job.objects.get(pk=job_id)
    assert job.status == Job.Status.CANCELLED
    assert job.result == {}
    assert Trace.objects.count() == 0


def test_an_annotator_cannot_cancel_the_owners_job(owner, member, study, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):
        job_id = post_import(client_for(owner), study, file=upload()).json()["id"]
    body = assert_error_shape(client_for(member).delete(f"/api/v1/jobs/{job_id}/"), 403)
    assert body["errors"] == []
    assert Job.objects.get(pk=job_id).status == Job.Status.QUEUED


def test_cancelling_a_finished_job_changes_nothing(owner, study, django_capture_on_commit_callbacks):
    client = client_for(owner)
    with django_capture_on_commit_callbacks(execute=True):
        job_id = post_import(client, study, file=upload()).json()["id"]
    response = client.delete(f"/api/v1/jobs/{job_id}/")
    assert response.status_code == 200
    assert response.json()["status"] == "succeeded"
    assert Trace.objects.count() == 2


def test_a_file_over_the_size_limit_is_refused_before_a_job_exists(owner, study, settings):
    # Refused at once, before the upload is stored (issue 20; tests/test_upload_limits.py).
    settings.IMPORT_MAX_BYTES = 100
    response = post_import(client_for(owner), study, file=upload())
    body = assert_error_shape(response, 400)
    assert "over the import limit of 100 bytes" in str(body)
    assert not Job.objects.exists()
    assert Trace.objects.count() == 0


THOUGHT = jsonl(
    {"kind": "problem", "problem_id": "p1", "statement": "2+2?", "gold_answer": "4"},
    {"kind": "trace", "problem_id": "p1", "model": "m", "trace_id": "t1",
     "reasoning_content": "We add 2 and 2. Wait, that is 4. Done.", "raw": "The answer is 4."},
)


def test_an_import_chooses_its_thought_segmenter(owner, study, django_capture_on_commit_callbacks):
    assert study.thought_segmenter == "moves"  # a new study's default
    with django_capture_on_commit_callbacks(execute=True):
        response = post_import(client_for(owner), study, file=upload(THOUGHT), thought_segmenter="paragraphs")
    assert response.status_code == 202, response.content
    assert response.json()["params"]["thought_segmenter"] == "paragraphs"
    trace = Trace.objects.get(trace_id="t1")
    # One paragraph, not the three moves the study's setting would give.
    assert trace.n_thought_steps == 1
    study.refresh_from_db()
    assert study.thought_segmenter == "moves"  # the study's setting is untouched


def test_an_unknown_thought_segmenter_is_400(owner, study):
    response = post_import(client_for(owner), study, file=upload(THOUGHT), thought_segmenter="words")
    body = assert_error_shape(response, 400)
    assert [e["field"] for e in body["errors"]] == ["thought_segmenter"]


def test_the_upload_form_chooses_the_thought_segmenter(owner, study, django_capture_on_commit_callbacks):
    from django.urls import reverse

    from tests.conftest import signed_in

    client = signed_in(owner)
    assert "Split thoughts into steps by" in client.get(reverse("study", args=[study.pk])).content.decode()
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("study-import", args=[study.pk]),
                               {"file": upload(THOUGHT), "format": "reasonaudit", "thought_segmenter": "sentences"})
    assert response.status_code == 302, response.content
    assert Job.objects.filter(kind=Job.Kind.IMPORT).latest("pk").params["thought_segmenter"] == "sentences"
    assert Trace.objects.get(trace_id="t1").n_thought_steps == 3
