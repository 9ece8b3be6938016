"""Pages of the foundation: sign-in, studies, study overview, trace list, trace
and job pages -- permissions for the three standard users plus anonymous, and
query counts that do not grow with the data."""

from __future__ import annotations

import pytest
from django.urls import reverse

from annotation import services
from annotation.models import Job, Membership
from tests.conftest import jsonl

pytestmark = pytest.mark.django_db


def _seed(do_import, n_problems: int = 3, models=("m1", "m2")) -> None:
    records = []
    for p in range(n_problems):
        records.append({"kind": "problem", "problem_id": f"p{p}", "statement": f"What is {p}+1?", "gold_answer": str(p + 1),
                        "skeleton": [{"text": f"{p}+1={p + 1}", "check": f"{p}+1={p + 1}"}]})
        for m in models:
            records.append({"kind": "trace", "problem_id": f"p{p}", "model": m, "steps": [f"{p}+1={p + 1}"],
                            "answer": str(p + 1), "labels": [{"step": 1, "verdict": "valid", "annotator": "ann"}]})
    report = do_import(jsonl(*records))
    assert report.committed, report.rejected


def test_anonymous_users_are_sent_to_sign_in(client, study):
    for url in (reverse("studies"), reverse("study", args=[study.pk]), reverse("trace-list", args=[study.pk])):
        response = client.get(url)
        assert response.status_code == 302 and reverse("login") in response["Location"]


def test_sign_in_then_the_studies_page_lists_my_studies_only(client, member, study, outsider):
    services.do_get_or_create_study("Someone else's", owner=outsider)
    response = client.post(reverse("login"), {"username": "alice", "password": "pw-alice"})
    assert response.status_code == 302
    page = client.get(reverse("studies")).content.decode()
    assert "Study A" in page and "Someone else" not in page


@pytest.mark.parametrize("name", ["study", "trace-list"])
def test_an_outsider_gets_404_on_study_pages(client, outsider, study, name):
    client.force_login(outsider)
    assert client.get(reverse(name, args=[study.pk])).status_code == 404


def test_an_outsider_gets_404_on_traces_problems_and_jobs(client, outsider, study, do_import):
    _seed(do_import, 1, ("m1",))
    trace = study.traces.get()
    job = Job.objects.create(study=study, kind=Job.Kind.IMPORT)
    client.force_login(outsider)
    assert client.get(reverse("trace", args=[trace.pk])).status_code == 404
    assert client.get(reverse("problem", args=[trace.problem_id])).status_code == 404
    assert client.get(reverse("job", args=[job.pk])).status_code == 404


def test_members_see_the_study_overview_with_answer_accuracy(client, member, study, do_import):
    _seed(do_import)
    client.force_login(member)
    page = client.get(reverse("study", args=[study.pk])).content.decode()
    assert "m1" in page and "m2" in page
    assert "Import traces" not in page  # only owners import


def test_only_owners_can_upload(client, member, owner, study):
    from django.core.files.uploadedfile import SimpleUploadedFile

    data = jsonl({"kind": "problem", "problem_id": "x", "statement": "s", "gold_answer": "1"})
    client.force_login(member)
    response = client.post(reverse("study-import", args=[study.pk]), {"file": SimpleUploadedFile("a.jsonl", data), "format": "reasonaudit"})
    assert response.status_code == 403 and "owners" in response.content.decode()  # a member learns the role
    client.force_login(owner)
    response = client.post(reverse("study-import", args=[study.pk]), {"file": SimpleUploadedFile("a.jsonl", data), "format": "reasonaudit"})
    assert response.status_code == 302
    job = Job.objects.get(study=study, kind=Job.Kind.IMPORT)
    assert response["Location"] == reverse("job", args=[job.pk])


def test_a_web_upload_runs_the_same_import_and_shows_its_report(client, owner, study, django_capture_on_commit_callbacks):
    from django.core.files.uploadedfile import SimpleUploadedFile

    data = jsonl({"kind": "problem", "problem_id": "x", "statement": "s", "gold_answer": "1"}, "[1, 2]")
    client.force_login(owner)
    with django_capture_on_commit_callbacks(execute=True):
        client.post(reverse("study-import", args=[study.pk]), {"file": SimpleUploadedFile("a.jsonl", data), "format": "reasonaudit"})
    job = Job.objects.get(study=study, kind=Job.Kind.IMPORT)
    assert job.status == Job.Status.FAILED
    page = client.get(reverse("job", args=[job.pk])).content.decode()
    assert "line 2: expected a JSON object, got list" in page
    # The htmx poll gets only the progress partial.
    partial = client.get(reverse("job", args=[job.pk]), HTTP_HX_REQUEST="true").content.decode()
    assert "<html" not in partial and "job-progress" in partial


def test_the_upload_form_refuses_a_file_over_the_limit(client, owner, study, settings):
    from django.core.files.uploadedfile import SimpleUploadedFile

    settings.IMPORT_MAX_BYTES = 10
    client.force_login(owner)
    response = client.post(reverse("study-import", args=[study.pk]),
                           {"file": SimpleUploadedFile("a.jsonl", b"x" * 100), "format": "reasonaudit"})
    assert response.status_code == 400
    assert "over the import limit" in response.content.decode()
    # The refusal answered on the upload URL; coming back to it (a reload's GET) is the upload form again.
    again = client.get(reverse("study-import", args=[study.pk]))
    assert again.status_code == 302 and again["Location"] == reverse("study", args=[study.pk]) + "#upload"


def test_trace_text_is_escaped(client, member, study, do_import):
    evil = "<script>alert(1)</script><img src=x onerror=alert(2)>"
    do_import(jsonl({"kind": "problem", "problem_id": "p", "statement": evil, "gold_answer": "1"},
                    {"kind": "trace", "problem_id": "p", "model": "m", "steps": [evil], "answer": "1"}))
    client.force_login(member)
    trace = study.traces.get()
    page = client.get(reverse("trace", args=[trace.pk])).content.decode()
    assert "<script>alert(1)" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<img src=x" not in page


def _queries_for(client, django_assert_max_num_queries, url: str, limit: int) -> None:
    with django_assert_max_num_queries(limit):
        assert client.get(url).status_code == 200


@pytest.mark.parametrize("name", ["studies", "study", "trace-list"])
def test_list_pages_use_a_constant_number_of_queries(client, member, study, do_import, django_assert_max_num_queries, name):
    _seed(do_import, 2)
    client.force_login(member)
    url = reverse(name) if name == "studies" else reverse(name, args=[study.pk])
    with django_assert_max_num_queries(12) as small:
        client.get(url)
    _seed_more = [{"kind": "problem", "problem_id": f"q{i}", "statement": f"q{i}", "gold_answer": "1"} for i in range(30)]
    _seed_more += [{"kind": "trace", "problem_id": f"q{i}", "model": f"m{i % 5}", "steps": ["a", "b"], "answer": "1"} for i in range(30)]
    do_import(jsonl(*_seed_more))
    with django_assert_max_num_queries(len(small.captured_queries)):
        assert client.get(url).status_code == 200


def test_the_trace_page_uses_a_constant_number_of_queries(client, member, study, do_import, django_assert_max_num_queries):
    steps = [f"step {i}" for i in range(200)]
    do_import(jsonl({"kind": "problem", "problem_id": "p", "statement": "s", "gold_answer": "1"},
                    {"kind": "trace", "problem_id": "p", "model": "m", "steps": steps, "answer": "1",
                     "labels": [{"step": i + 1, "verdict": "valid", "annotator": a} for a in ("x", "y") for i in range(200)]}))
    client.force_login(member)
    trace = study.traces.get()
    with django_assert_max_num_queries(10):
        assert client.get(reverse("trace", args=[trace.pk])).status_code == 200


def test_membership_roles_are_set_by_the_add_member_command(study):
    from django.core.management import call_command

    call_command("add_member", study=study.name, user="bob", role="adjudicator", password="pw-bob-123")
    m = Membership.objects.get(study=study, user__username="bob")
    assert m.role == "adjudicator" and m.user.check_password("pw-bob-123")


@pytest.mark.parametrize("name", ["judge-list", "scoring-leaderboard"])
def test_the_study_menu_is_the_same_on_every_app_page(client, owner, member, study, name):
    client.force_login(owner)
    page = client.get(reverse(name, args=[study.pk])).content.decode()
    assert ">Members</a>" in page and ">Adjudication</a>" in page
    client.force_login(member)
    page = client.get(reverse(name, args=[study.pk])).content.decode()
    assert ">Members</a>" not in page and ">Adjudication</a>" not in page
