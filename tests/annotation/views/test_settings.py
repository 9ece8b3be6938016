"""The owners' settings pages (issue 31): a study's settings and a problem's correction, through the domain
operations the API's PATCH uses; the description is capped alike on the page and in the API."""

from __future__ import annotations

import pytest
from django.urls import reverse

from annotation import signals
from annotation.models import DESCRIPTION_MAX, Study, Trace
from tests.conftest import jsonl, signed_in
from tests.review.conftest import judge

pytestmark = pytest.mark.django_db


def _settings(study: Study, **changes) -> dict:
    data = {"name": study.name, "description": study.description, "segmenter": study.segmenter,
            "thought_segmenter": study.thought_segmenter, "primary_judge": study.primary_judge_id or ""}
    if study.blind:
        data["blind"] = "on"
    data.update(changes)
    return {k: v for k, v in data.items() if v is not None}


def test_an_owner_changes_the_studys_settings_and_the_study_page_shows_the_description(owner, study,
                                                                                     django_capture_on_commit_callbacks):
    gpt = judge(study, "gpt-judge", primary=False)
    recomputes = []

    def heard(sender, study, reason, **kwargs):
        recomputes.append(reason)

    signals.data_changed.connect(heard)
    try:
        client = signed_in(owner)
        url = reverse("study-settings", args=[study.pk])
        assert client.get(url).status_code == 200
        with django_capture_on_commit_callbacks(execute=True):
            answer = client.post(url, _settings(study, name="Renamed", description="Checks <b>R1</b> on GSM8K",
                                                blind=None, primary_judge=gpt.pk), follow=True)
    finally:
        signals.data_changed.disconnect(heard)
    assert answer.status_code == 200
    assert "Saved: blind review, description, name, primary judge. The scores are being recomputed." in \
        answer.content.decode()
    study.refresh_from_db()
    assert (study.name, study.blind, study.primary_judge_id) == ("Renamed", False, gpt.pk)
    assert recomputes == ["study settings changed"]
    page = client.get(reverse("study", args=[study.pk])).content.decode()
    assert "Checks &lt;b&gt;R1&lt;/b&gt; on GSM8K" in page  # shown, escaped


def test_a_description_over_the_cap_is_refused_on_the_page_and_in_the_api(owner, study):
    client = signed_in(owner)
    long = "x" * (DESCRIPTION_MAX + 1)
    answer = client.post(reverse("study-settings", args=[study.pk]), _settings(study, description=long))
    assert answer.status_code == 400
    assert f"at most {DESCRIPTION_MAX}" in answer.content.decode()
    api = client.patch(f"/api/v1/studies/{study.pk}/", {"description": long}, content_type="application/json")
    assert api.status_code == 400 and [e["field"] for e in api.json()["errors"]] == ["description"]
    created = client.post("/api/v1/studies/", {"name": "Another", "description": long},
                          content_type="application/json")
    assert created.status_code == 400
    study.refresh_from_db()
    assert study.description == ""


def test_make_primary_on_a_judges_page(owner, study):
    gpt = judge(study, "gpt-judge", primary=False)
    client = signed_in(owner)
    assert "Make primary" in client.get(reverse("judge", args=[gpt.pk])).content.decode()
    answer = client.post(reverse("study-primary-judge", args=[study.pk]), {"judge": gpt.pk})
    assert answer.status_code == 302 and answer["Location"] == reverse("judge", args=[gpt.pk])
    study.refresh_from_db()
    assert study.primary_judge_id == gpt.pk
    assert "Make primary" not in client.get(reverse("judge", args=[gpt.pk])).content.decode()
    for bad in ("", "x", "99999999999999999999", "999"):
        assert client.post(reverse("study-primary-judge", args=[study.pk]), {"judge": bad}).status_code == 302
    study.refresh_from_db()
    assert study.primary_judge_id == gpt.pk


def test_a_new_gold_answer_rechecks_the_automatic_verdicts_and_keeps_the_others(owner, study, do_import):
    report = do_import(jsonl(
        {"kind": "problem", "problem_id": "p", "statement": "2 + 3?", "gold_answer": "6"},
        {"kind": "trace", "problem_id": "p", "model": "m", "trace_id": "auto", "steps": ["2 + 3 = 5"], "answer": "5"},
        {"kind": "trace", "problem_id": "p", "model": "m", "trace_id": "imported", "steps": ["2 + 3 = 5"],
         "answer": "5", "answer_correct": False},
    ))
    assert report.committed, report.rejected
    auto, imported = Trace.objects.get(trace_id="auto"), Trace.objects.get(trace_id="imported")
    assert (auto.answer_correct, auto.answer_origin) == (False, "automatic")
    problem = auto.problem
    client = signed_in(owner)
    url = reverse("problem-edit", args=[problem.pk])
    assert client.get(url).status_code == 200
    answer = client.post(url, {"statement": "2 + 3?", "gold_answer": "5", "domain": "arithmetic", "tags": "a, b"})
    assert answer.status_code == 302
    problem.refresh_from_db()
    assert (problem.gold_answer, problem.domain, problem.tags) == ("5", "arithmetic", ["a", "b"])
    auto.refresh_from_db()
    imported.refresh_from_db()
    assert (auto.answer_correct, auto.auto_answer_correct, auto.answer_origin) == (True, True, "automatic")
    assert (imported.answer_correct, imported.auto_answer_correct, imported.answer_origin) == (False, True, "imported")
    # An empty statement is refused under its field; nothing changes.
    refused = client.post(url, {"statement": "", "gold_answer": "7", "domain": "", "tags": ""})
    assert refused.status_code == 400 and "This field is required." in refused.content.decode()
    problem.refresh_from_db()
    assert problem.gold_answer == "5"


def test_study_names_differing_only_by_case_are_refused_on_the_page_and_in_the_api(owner, study):
    client = signed_in(owner)
    other = client.post(reverse("study-create"), {"name": "study a", "segmenter": "lines"})
    assert other.status_code == 400 and "names are compared ignoring case" in other.content.decode()
    api = client.post("/api/v1/studies/", {"name": "STUDY A"}, content_type="application/json")
    assert api.status_code == 400 and [e["field"] for e in api.json()["errors"]] == ["name"]
    second = client.post("/api/v1/studies/", {"name": "Study B"}, content_type="application/json")
    assert second.status_code == 201
    renamed = client.patch(f"/api/v1/studies/{second.json()['id']}/", {"name": "study A"},
                           content_type="application/json")
    assert renamed.status_code == 400
    # Its own name in another case is not a clash with itself.
    same = client.post(reverse("study-settings", args=[study.pk]), _settings(study, name="STUDY A"))
    assert same.status_code == 302
    assert Study.objects.filter(name__iexact="study a").count() == 1
