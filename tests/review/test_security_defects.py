"""Regression tests of the six defects of issue 14 (security and access).

Each failed on the code before annotation.access: run against that code they
show the leak, the cancelled job, the outside redirect, the injected
attribute, the missing recompute and the ``role: null``.
"""

from __future__ import annotations

import pytest
from django.urls import reverse

from annotation import services
from annotation.models import Job, Membership, Step, Trace
from tests.review.conftest import human_label, judge, judge_label
from tests.test_api_studies import api

pytestmark = pytest.mark.django_db


# 1. Blind-mode leak --------------------------------------------------------


def test_blind_annotator_who_labelled_nothing_cannot_open_a_judges_disagreements(client, seeded, member, owner,
                                                                                 annotator2):
    assert seeded.blind
    trace = Trace.objects.filter(study=seeded).order_by("pk").first()
    config = judge(seeded)
    judge_label(trace, 1, config, "invalid", reason="the judge's secret reason")
    human_label(trace, 1, annotator2, "valid")
    client.force_login(member)
    response = client.get(reverse("judge-disagreements", args=[config.pk]))
    assert response.status_code == 403
    page = response.content.decode()
    assert "bob" not in page and "the judge&#x27;s secret reason" not in page
    assert "owners and adjudicators" in page  # the refusal names the role
    client.force_login(owner)
    assert client.get(reverse("judge-disagreements", args=[config.pk])).status_code == 200


# 2. Anyone could cancel anyone's job on the web ---------------------------------


def test_an_annotator_cannot_cancel_the_owners_import_on_the_web(client, study, owner, member, adjudicator, tmp_path):
    job = services.do_create_import_job(study, fmt="reasonaudit", skip_invalid=False, user=owner,
                                        path=tmp_path / "x.jsonl")
    client.force_login(member)
    assert b"Cancel</button>" not in client.get(reverse("job", args=[job.pk])).content  # no button to press
    response = client.post(reverse("job", args=[job.pk]))
    assert response.status_code == 403
    job.refresh_from_db()
    assert job.status == Job.Status.QUEUED and not job.cancel_requested
    # An adjudicator may, as may who started it (the API's rule).
    client.force_login(adjudicator)
    assert b"Cancel</button>" in client.get(reverse("job", args=[job.pk])).content
    assert client.post(reverse("job", args=[job.pk])).status_code == 200
    job.refresh_from_db()
    assert job.status == Job.Status.CANCELLED


def test_an_annotator_cannot_cancel_the_owners_export_but_may_cancel_their_own(client, study, owner, member):
    theirs = Job.objects.create(study=study, kind=Job.Kind.EXPORT, created_by=owner, params={"what": "scores"})
    mine = Job.objects.create(study=study, kind=Job.Kind.EXPORT, created_by=member, params={"what": "scores"})
    client.force_login(member)
    response = client.post(reverse("scoring-export-job", args=[study.pk, theirs.pk]))
    assert response.status_code == 403
    theirs.refresh_from_db()
    assert theirs.status == Job.Status.QUEUED
    assert client.post(reverse("scoring-export-job", args=[study.pk, mine.pk])).status_code == 200
    mine.refresh_from_db()
    assert mine.status == Job.Status.CANCELLED


# 3. Open redirect -----------------------------------------------------------------


def test_the_adjudication_form_never_redirects_to_another_host(client, seeded, adjudicator):
    step = Step.objects.filter(trace__study=seeded).order_by("pk").first()
    client.force_login(adjudicator)
    url = reverse("adjudicate", args=[step.pk])
    page = reverse("adjudication", args=[seeded.pk])
    for outside in ("https://evil.example/", "//evil.example/x", "http://testserver.evil.example/"):
        # saved (the first) or refused as stale (the others): either way back to our own page
        response = client.post(url, {"verdict": "valid", "version": "0", "reason": "fine", "next": outside})
        assert response.status_code == 302
        assert response["Location"] == page, outside
        # refused for a missing reason: the page again (issue 23 #11), whose form carries our own page onward
        refused = client.post(url, {"verdict": "valid", "version": "1", "next": outside})
        assert refused.status_code == 400 and "Location" not in refused
        assert f'name="next" value="{page}"' in refused.content.decode() and "evil" not in refused.content.decode()
    inside = page + "?status=all"
    response = client.post(url, {"verdict": "valid", "version": "1", "reason": "fine", "next": inside})
    assert response["Location"] == inside


# 4. Attribute injection on the re-rendered review page ---------------------------------


def test_a_posted_verdict_never_reaches_an_attribute_unescaped(client, seeded, member):
    trace = Trace.objects.filter(study=seeded).order_by("pk").first()
    client.force_login(member)
    evil = 'valid" onmouseover="alert(1)" x="'
    response = client.post(reverse("trace-review", args=[trace.pk]), {"version": "0", "v1": evil})
    assert response.status_code == 400  # re-rendered with the error
    page = response.content.decode()
    assert 'onmouseover="alert(1)"' not in page
    assert 'class="step" id="s1"' in page  # an unknown verdict shows as unlabelled


# 5. Stale scores after a study or problem changes through the API -----------------


def test_changing_the_primary_judge_through_the_api_queues_a_recompute(seeded, owner,
                                                                        django_capture_on_commit_callbacks):
    other = judge(seeded, "second", primary=False)
    before = set(Job.objects.filter(study=seeded, kind=Job.Kind.SCORE).values_list("pk", flat=True))
    with django_capture_on_commit_callbacks(execute=True):
        response = api(owner).patch(f"/api/v1/studies/{seeded.pk}/", {"primary_judge": "second"}, format="json")
    assert response.status_code == 200 and response.json()["primary_judge"] == "second"
    seeded.refresh_from_db()
    assert seeded.primary_judge_id == other.pk
    new = Job.objects.filter(study=seeded, kind=Job.Kind.SCORE).exclude(pk__in=before)
    assert [j.params["reason"] for j in new] == ["study settings changed"]


def test_changing_a_problems_domain_through_the_api_queues_a_recompute(seeded, owner,
                                                                        django_capture_on_commit_callbacks):
    problem = seeded.problems.order_by("pk").first()
    before = set(Job.objects.filter(study=seeded, kind=Job.Kind.SCORE).values_list("pk", flat=True))
    with django_capture_on_commit_callbacks(execute=True):
        response = api(owner).patch(f"/api/v1/problems/{problem.pk}/", {"domain": "geometry"}, format="json")
    assert response.status_code == 200 and response.json()["domain"] == "geometry"
    new = Job.objects.filter(study=seeded, kind=Job.Kind.SCORE).exclude(pk__in=before)
    assert [j.params["reason"] for j in new] == ["problem changed"]


def test_a_change_the_scores_do_not_read_queues_nothing(seeded, owner, django_capture_on_commit_callbacks):
    before = Job.objects.filter(study=seeded, kind=Job.Kind.SCORE).count()
    with django_capture_on_commit_callbacks(execute=True):
        response = api(owner).patch(f"/api/v1/studies/{seeded.pk}/", {"description": "new words"}, format="json")
    assert response.status_code == 200 and response.json()["description"] == "new words"
    assert Job.objects.filter(study=seeded, kind=Job.Kind.SCORE).count() == before


# 6. The test that could not fail: tests/test_api_studies.py::test_creating_a_study_makes_me_its_owner now
# asserts ``role == "owner"`` on the creation response; this one states the same for a second creator.


def test_the_creation_response_names_the_creator_owner(member, outsider):
    response = api(outsider).post("/api/v1/studies/", {"name": "Outsider's own"}, format="json")
    assert response.status_code == 201
    assert response.json()["role"] == Membership.Role.OWNER
