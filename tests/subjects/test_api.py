"""REST API of subject models and generation runs: who may do what,
versioning, the reachability check, runs as 202 jobs, query counts."""

from __future__ import annotations

import pytest
from django.test import Client

from annotation.models import Job, Trace
from subjects import services
from subjects.models import GenerationRun, SubjectModel
from tests.conftest import api
from tests.subjects.test_cli import closed_port_url

pytestmark = pytest.mark.django_db


def test_owners_create_and_change_members_read(study, owner, member, server):
    url = f"/api/v1/studies/{study.pk}/subject-models/"
    body = {"name": "tiny", "model": "m", "base_url": server.url, "n_samples": 4, "temperature": 0.5,
            "template": "gsm8k-8shot-cot", "stop": ["Q:"], "api_key_env": "TINY_KEY"}
    assert api(member).post(url, body, format="json").status_code == 403
    r = api(owner).post(url, body, format="json")
    assert r.status_code == 201, r.json()
    data = r.json()
    assert data["prompt_template"] == {"name": "gsm8k-8shot-cot", "version": 1, "kind": "k-shot"}
    assert (data["version"], data["n_samples"], data["stop"]) == (1, 4, ["Q:"]) and "check" not in data
    # The check is a probe job for a worker; the request contacted nobody (issue 29, L4).
    assert server.gets == [] and server.count == 0
    assert Job.objects.filter(kind="probe", params__subject_model_id=data["id"]).count() == 1
    listed = api(member).get(url).json()
    assert [s["name"] for s in listed["results"]] == ["tiny"]
    detail = f"/api/v1/subject-models/{data['id']}/"
    assert api(member).get(detail).json()["model"] == "m"
    assert api(member).patch(detail, {"concurrency": 2}, format="json").status_code == 403
    r = api(owner).patch(detail, {"concurrency": 2}, format="json")
    assert r.status_code == 200 and r.json()["version"] == 1  # no output changes
    r = api(owner).patch(detail, {"max_tokens": 64, "template": "zero-shot"}, format="json")
    assert r.status_code == 200 and r.json()["version"] == 2 and r.json()["prompt_template"]["name"] == "zero-shot"


def test_bad_input_and_unreachable_server(study, owner, server):
    url = f"/api/v1/studies/{study.pk}/subject-models/"
    dead = closed_port_url()
    # Saved either way: whether the server answers is the probe job's to find out, never the request's.
    r = api(owner).post(url, {"name": "tiny", "model": "m", "base_url": dead}, format="json")
    assert r.status_code == 201
    assert Job.objects.filter(kind="probe").count() == 1
    assert api(owner).post(url, {"name": "other", "model": "m", "base_url": dead, "check": False},
                           format="json").status_code == 201
    assert Job.objects.filter(kind="probe").count() == 1
    SubjectModel.objects.filter(name="other").delete()
    r = api(owner).post(url, {"name": "tiny", "model": "m", "base_url": server.url}, format="json")
    assert r.status_code == 400 and "exists" in str(r.json())
    r = api(owner).post(url, {"name": "x", "model": "m", "base_url": server.url, "temperature": 9}, format="json")
    assert r.status_code == 400 and r.json()["detail"].startswith("temperature:")
    r = api(owner).post(url, {"name": "y", "model": "m", "base_url": server.url, "template": "nope"}, format="json")
    assert r.status_code == 400 and "no prompt template named 'nope'" in str(r.json())
    assert SubjectModel.objects.count() == 1


def test_a_run_is_a_202_job_and_listed(study, owner, member, make_problems, subject, server,
                                       django_capture_on_commit_callbacks):
    make_problems(2)
    subject(n_samples=2)
    url = f"/api/v1/studies/{study.pk}/generation-runs/"
    assert api(member).post(url, {"model": "tiny"}, format="json").status_code == 403
    assert api(owner).post(url, {"model": "nope"}, format="json").status_code == 400
    with django_capture_on_commit_callbacks(execute=True):  # the first chunk is queued on commit (eager Celery)
        r = api(owner).post(url, {"model": "tiny", "samples": 3}, format="json")
    assert r.status_code == 202, r.json()
    body = r.json()  # the run, as every start of every kind answers (runs.api)
    assert body["kind"] == "generation" and body["status"] == "queued"
    job = {"id": body["job"]}
    assert Job.objects.get(pk=job["id"]).status == "succeeded"
    assert Trace.objects.filter(model="tiny").count() == 6
    runs = api(member).get(url).json()["results"]
    assert runs[0]["traces_created"] == 6 and runs[0]["samples"] == 3 and runs[0]["requests"] == 6
    detail = api(member).get(f"/api/v1/generation-runs/{runs[0]['id']}/").json()
    assert detail["job"]["id"] == job["id"] and detail["model"] == "tiny"
    assert api(member).get(f"/api/v1/jobs/{job['id']}/").json()["result"]["traces_created"] == 6


def test_an_outsider_gets_404_on_every_url(study, owner, outsider, make_problems, subject, server):
    make_problems(1)
    tiny = subject()
    record = services.do_start_generation(tiny, queue=False)
    for method, url in [
        ("get", f"/api/v1/studies/{study.pk}/subject-models/"), ("post", f"/api/v1/studies/{study.pk}/subject-models/"),
        ("get", f"/api/v1/subject-models/{tiny.pk}/"), ("patch", f"/api/v1/subject-models/{tiny.pk}/"),
        ("get", f"/api/v1/studies/{study.pk}/generation-runs/"),
        ("post", f"/api/v1/studies/{study.pk}/generation-runs/"), ("get", f"/api/v1/generation-runs/{record.pk}/"),
    ]:
        assert getattr(api(outsider), method)(url, {}, format="json").status_code == 404, (method, url)
    web = Client()
    web.force_login(outsider)
    for method, url in [
        ("get", f"/studies/{study.pk}/subject-models/"), ("get", f"/studies/{study.pk}/subject-models/new/"),
        ("post", f"/studies/{study.pk}/subject-models/new/"), ("get", f"/subject-models/{tiny.pk}/edit/"),
        ("post", f"/subject-models/{tiny.pk}/edit/"), ("post", f"/subject-models/{tiny.pk}/generate/"),
        ("get", f"/generation-runs/{record.pk}/"),
    ]:
        assert getattr(web, method)(url).status_code == 404, (method, url)
    assert GenerationRun.objects.count() == 1 and Job.objects.filter(kind="generation").count() == 1


def test_lists_use_a_constant_number_of_queries(study, owner, make_problems, subject, server,
                                                django_assert_max_num_queries):
    from tests.subjects.conftest import generate

    make_problems(3)
    for i in range(4):
        generate(subject(f"m{i}", n_samples=2))
    client = api(owner)
    with django_assert_max_num_queries(6):
        assert len(client.get(f"/api/v1/studies/{study.pk}/subject-models/").json()["results"]) == 4
    with django_assert_max_num_queries(6):
        assert len(client.get(f"/api/v1/studies/{study.pk}/generation-runs/").json()["results"]) == 4
    web = Client()
    web.force_login(owner)
    with django_assert_max_num_queries(14):
        page = web.get(f"/studies/{study.pk}/subject-models/")
    assert page.status_code == 200 and page.content.decode().count("generated, v1") == 4
