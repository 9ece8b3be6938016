"""Scoring API: field names exactly as docs/analytics.md and docs/exports.md, permissions,
errors, html_url, query counts, and the profile endpoints."""

from __future__ import annotations

import pytest

from annotation import services as annotation_services
from annotation.models import Membership, Trace
from scoring import score_jobs
from tests.conftest import api
from tests.scoring.test_pages import _seed_more

pytestmark = pytest.mark.django_db

SCORE_FIELDS = ["trace_id", "problem_id", "model", "source", "profile", "n_steps", "n_thought_steps", "l_gold", "coverage",
                "first_error", "answer_correct", "s_base", "p_fmt", "p_haz", "s_hcrs", "s_prm", "s_prm_haz", "process", "holistic",
                "lucky_guess", "empty"]
LEADERBOARD_FIELDS = ["model", "traces", "answer_accuracy", "s_hcrs_mean", "s_hcrs_ci", "process_mean", "process_ci",
                      "s_prm_mean", "holistic_mean", "holistic_ci", "lucky_guess_rate", "svr", "vsr"]
HAZARD_FIELDS = ["step", "at_risk", "events", "hazard", "cum_hazard", "survival"]


@pytest.fixture
def scored(seeded):
    score_jobs.recompute(seeded, warm=False)
    return seeded


def urls(study) -> list[str]:
    trace = Trace.objects.get(study=study, trace_id="t1")
    return [f"/api/v1/traces/{trace.pk}/scores/", f"/api/v1/studies/{study.pk}/leaderboard/",
            f"/api/v1/studies/{study.pk}/hazard/", f"/api/v1/studies/{study.pk}/lucky-guesses/",
            f"/api/v1/studies/{study.pk}/profiles/", f"/api/v1/studies/{study.pk}/profiles/default/"]


def test_it_refuses_anonymous_and_hides_everything_from_outsiders(scored, outsider, owner):
    for url in urls(scored):
        assert api().get(url).status_code == 401
        response = api(outsider).get(url)
        assert response.status_code == 404 and set(response.json()) == {"detail", "errors"}
        assert api(owner).get(url).status_code == 200, url


def test_trace_scores_have_the_export_fields_and_html_url(scored, owner):
    trace = Trace.objects.get(study=scored, trace_id="t1")
    body = api(owner).get(f"/api/v1/traces/{trace.pk}/scores/").json()
    assert [r["source"] for r in body["results"]] == ["final", "human"]
    row = body["results"][0]
    assert list(row) == SCORE_FIELDS + ["html_url"]
    assert row["html_url"].endswith(f"/traces/{trace.pk}/")
    assert row["trace_id"] == "t1" and row["problem_id"] == "p1" and row["profile"] == "default"
    assert row["first_error"] == 2 and row["lucky_guess"] is True
    one = api(owner).get(f"/api/v1/traces/{trace.pk}/scores/", {"source": "human", "profile": "no-hazard"}).json()
    assert [(r["source"], r["profile"], r["p_haz"]) for r in one["results"]] == [("human", "no-hazard", 0.0)]


def test_bad_filters_answer_400_naming_the_parameter(scored, owner):
    trace = Trace.objects.get(study=scored, trace_id="t1")
    for url, params, field in [
        (f"/api/v1/traces/{trace.pk}/scores/", {"profile": "nope"}, "profile"),
        (f"/api/v1/traces/{trace.pk}/scores/", {"source": "robots"}, "source"),
        (f"/api/v1/studies/{scored.pk}/leaderboard/", {"source": "judge:ghost"}, "source"),
        (f"/api/v1/studies/{scored.pk}/hazard/", {"profile": "nope"}, "profile"),
    ]:
        response = api(owner).get(url, params)
        assert response.status_code == 400, url
        assert response.json()["errors"][0]["field"] == field
        assert response.json()["detail"].startswith(f"{field}: ")


def test_blind_annotators_see_trace_scores_only_after_finishing_the_trace(scored, member, django_user_model):
    t1, t3 = (Trace.objects.get(study=scored, trace_id=t) for t in ("t1", "t3"))
    response = api(member).get(f"/api/v1/traces/{t1.pk}/scores/")
    assert response.status_code == 403 and "blind" in response.json()["detail"]
    annotation_services.do_add_member(scored, "ann2", Membership.Role.ANNOTATOR, password="pw")
    ann2 = django_user_model.objects.get(username="ann2")
    assert api(ann2).get(f"/api/v1/traces/{t1.pk}/scores/").status_code == 200  # ann2 finished t1
    assert api(ann2).get(f"/api/v1/traces/{t3.pk}/scores/").status_code == 403
    scored.blind = False
    scored.save()
    assert api(member).get(f"/api/v1/traces/{t1.pk}/scores/").status_code == 200


def test_the_leaderboard_rows_are_exactly_the_documented_fields(scored, owner):
    body = api(owner).get(f"/api/v1/studies/{scored.pk}/leaderboard/").json()
    assert body["source"] == "final" and body["profile"] == "default"
    assert body["html_url"].startswith("http://testserver/studies/")
    assert [list(r) for r in body["results"]] == [LEADERBOARD_FIELDS] * 3
    rows = {r["model"]: r for r in body["results"]}
    for model in ("m1", "m2", "m3"):
        flags = list(Trace.objects.filter(study=scored, model=model).values_list("answer_correct", flat=True))
        assert rows[model]["answer_accuracy"] == pytest.approx(sum(bool(f) for f in flags) / len(flags))
        assert rows[model]["traces"] == len(flags)
    assert rows["m1"]["process_mean"] == pytest.approx(7 / 6)
    assert rows["m3"]["s_hcrs_mean"] is None and rows["m3"]["svr"] is None
    human = api(owner).get(f"/api/v1/studies/{scored.pk}/leaderboard/", {"source": "human", "model": "m2"}).json()
    assert [r["model"] for r in human["results"]] == ["m2"]


def test_hazard_rows_and_model_filter(scored, owner):
    body = api(owner).get(f"/api/v1/studies/{scored.pk}/hazard/").json()
    assert [list(r) for r in body["results"]] == [HAZARD_FIELDS] * len(body["results"])
    # t1 (N=3, error at 2) and t3 (N=2, error at 1): at risk 2, 1, 0
    assert [(r["step"], r["at_risk"], r["events"]) for r in body["results"]] == [(1, 2, 1), (2, 1, 1), (3, 0, 0)]
    assert body["results"][-1]["survival"] == 0.0
    m1 = api(owner).get(f"/api/v1/studies/{scored.pk}/hazard/", {"model": "m1"}).json()["results"]
    assert [(r["step"], r["at_risk"], r["events"], r["hazard"]) for r in m1] == [(1, 1, 0, 0.0), (2, 1, 1, 1.0),
                                                                                (3, 0, 0, 0.0)]


def test_lucky_guesses_are_paginated_score_rows_linking_to_traces(scored, owner):
    body = api(owner).get(f"/api/v1/studies/{scored.pk}/lucky-guesses/").json()
    assert body["count"] == 3
    assert [r["trace_id"] for r in body["results"]] == ["t3", "t5", "t1"]  # by process score
    assert all(list(r) == SCORE_FIELDS + ["html_url"] and r["lucky_guess"] for r in body["results"])


@pytest.mark.parametrize("which", ["leaderboard", "hazard", "lucky-guesses", "scores"])
def test_list_endpoints_use_a_constant_number_of_queries(scored, owner, do_import, django_assert_max_num_queries,
                                                         which):
    trace = Trace.objects.get(study=scored, trace_id="t1")
    url = f"/api/v1/traces/{trace.pk}/scores/" if which == "scores" else f"/api/v1/studies/{scored.pk}/{which}/"
    client = api(owner)
    with django_assert_max_num_queries(20) as small:
        assert client.get(url).status_code == 200
    _seed_more(do_import, 40)
    score_jobs.recompute(scored, warm=False)
    with django_assert_max_num_queries(len(small.captured_queries)):
        assert client.get(url).status_code == 200


def test_owners_create_and_edit_profiles_through_the_api(scored, owner, member, django_capture_on_commit_callbacks):
    url = f"/api/v1/studies/{scored.pk}/profiles/"
    names = [p["name"] for p in api(member).get(url).json()["results"]]
    assert names == ["default", "no-format", "no-hazard", "no-penalties"]
    assert api(member).post(url, {"name": "mine", "params": {"w": 0.5}}, format="json").status_code == 403
    bad = api(owner).post(url, {"name": "mine", "params": {"w": 5}}, format="json")
    assert bad.status_code == 400 and bad.json()["errors"][0]["field"] == "params.w"
    with django_capture_on_commit_callbacks(execute=True):
        created = api(owner).post(url, {"name": "mine", "params": {"w": 0.5}}, format="json")
    assert created.status_code == 201 and created.json()["params"]["w"] == 0.5
    assert api(owner).get(f"/api/v1/studies/{scored.pk}/leaderboard/", {"profile": "mine"}).json()["profile"] == "mine"
    with django_capture_on_commit_callbacks(execute=True):
        edited = api(owner).patch(f"{url}mine/", {"params": {"tau": 5}}, format="json")
    assert edited.status_code == 200 and edited.json()["version"] == 2
    assert edited.json()["params"]["w"] == 0.5 and edited.json()["params"]["tau"] == 5
    assert api(owner).get(f"{url}nope/").status_code == 404


def test_owners_queue_a_recompute(scored, owner, member, django_capture_on_commit_callbacks):
    url = f"/api/v1/studies/{scored.pk}/score/"
    assert api(member).post(url).status_code == 403
    with django_capture_on_commit_callbacks(execute=True):
        response = api(owner).post(url, {"profile": "no-format"}, format="json")
    assert response.status_code == 202 and response.json()["kind"] == "score"
    assert response.json()["html_url"].endswith(f"/jobs/{response.json()['id']}/")


def test_the_trace_list_filter_finds_exactly_the_lucky_guesses(scored, owner):
    # The condition scoring registers with annotation's trace filters reads the same stored scores.
    url = f"/api/v1/studies/{scored.pk}/traces/"
    lucky = {r["trace_id"] for r in api(owner).get(url + "?lucky_guess=true").json()["results"]}
    rest = {r["trace_id"] for r in api(owner).get(url + "?lucky_guess=false").json()["results"]}
    assert lucky == {"t1", "t3", "t5"}
    assert lucky.isdisjoint(rest) and rest
