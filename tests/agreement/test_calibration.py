"""Calibration studies: the stratified sample saved (the pure sampler is tested in
tests/agreement/core/test_sampling.py), queueing it through the review queues, the report per candidate and the tuning
experiment, through the service and the API."""

from __future__ import annotations

import pandas as pd
import pytest
from django.test import Client
from django.urls import reverse

from agreement import calibration
from agreement.models import CalibrationStudy
from annotation.models import Assignment, Membership, Trace
from annotation.services import do_add_member
from scoring import score_jobs
from scoring.core.profile import DEFAULT
from tests.agreement.conftest import judge_labels, labels_of, problem, trace
from tests.conftest import api, jsonl

pytestmark = pytest.mark.django_db


@pytest.fixture
def pool(study, do_import):
    """12 traces: 2 models x (correct, wrong), with human labels on half of them."""
    records = [problem("p")]
    for i in range(12):
        labels = labels_of("ann1", "VE" if i % 3 == 0 else "VV") if i < 6 else []
        records.append(trace(f"t{i:02d}", "p", f"m{i % 2}", 2, correct=i % 4 < 2, labels=labels))
    records.append(trace("empty", "p", "m0", 0))
    do_import(jsonl(*records))
    judge_labels(study, "gpt", {f"t{i:02d}": "VE" if i % 2 else "VV" for i in range(12)})
    score_jobs.recompute(study, warm=False)
    return study


def test_creating_a_calibration_study_saves_a_stratified_sample(pool, owner):
    cal = calibration.do_create_calibration(pool, name="pilot", reference="human", candidates=["judge:gpt"], size=8,
                                            seed=1, user=owner)
    items = list(cal.items.select_related("trace"))
    assert len(items) == 8
    assert all(i.trace.n_steps >= 1 for i in items)  # empty traces have nothing to label
    strata = pd.Series([i.stratum for i in items]).value_counts().to_dict()
    assert strata == {"m0 / correct": 2, "m0 / wrong": 2, "m1 / correct": 2, "m1 / wrong": 2}
    again = calibration.do_create_calibration(pool, name="pilot 2", reference="human", candidates=["judge:gpt"],
                                              size=8, seed=1)
    assert sorted(i.trace_id for i in again.items.all()) == sorted(i.trace_id for i in items)
    with pytest.raises(calibration.CalibrationError, match="name: a calibration study named 'pilot' exists"):
        calibration.do_create_calibration(pool, name="pilot", reference="human", candidates=["judge:gpt"], size=2)
    with pytest.raises(calibration.CalibrationError, match="candidates: human is the reference"):
        calibration.do_create_calibration(pool, name="x", reference="human", candidates=["human"], size=2)
    with pytest.raises(calibration.CalibrationError, match="candidates: no judge named 'nope'"):
        calibration.do_create_calibration(pool, name="x", reference="human", candidates=["judge:nope"], size=2)
    only_m1 = calibration.do_create_calibration(pool, name="m1", reference="human", candidates=["judge:gpt"],
                                                size=6, models=["m1"])
    assert {i.trace.model for i in only_m1.items.select_related("trace")} == {"m1"} and only_m1.items.count() == 6


def test_a_sample_larger_than_the_pool_is_refused_with_the_numbers(pool):
    # Issue 23: 100,000 "equal per stratum" silently became every trace.
    with pytest.raises(calibration.CalibrationError) as exc:
        calibration.do_create_calibration(pool, name="big", reference="human", candidates=["judge:gpt"],
                                          size=100_000)
    assert str(exc.value) == ("size: asked for 100,000 traces, but only 12 traces with steps match the filters "
                              "(4 strata of 3 to 3 traces); ask for at most 12")
    assert not CalibrationStudy.objects.filter(name="big").exists()


def test_what_was_drawn_is_said_on_the_page(pool, owner):
    cal = calibration.do_create_calibration(pool, name="pilot", reference="human", candidates=["judge:gpt"], size=8)
    assert cal.filters["drawn"] == "8 traces drawn equally: 2 from each of 4 strata."
    page = Client()
    page.force_login(owner)
    body = page.get(reverse("scoring-calibration", args=[pool.pk, cal.pk])).content.decode()
    assert "8 traces drawn equally: 2 from each of 4 strata." in body


def test_queueing_the_sample_assigns_only_its_traces(pool, owner, member, django_user_model):
    bob = django_user_model.objects.create_user("bob")
    do_add_member(pool, "bob", Membership.Role.ANNOTATOR)
    cal = calibration.do_create_calibration(pool, name="pilot", reference="human", candidates=["judge:gpt"], size=6)
    sample = set(cal.items.values_list("trace_id", flat=True))
    n = calibration.do_queue_calibration(cal, owner, [member, bob], k=2)
    assert n == 12
    rows = list(Assignment.objects.filter(study=pool).values_list("trace_id", "annotator_id", "position"))
    assert {t for t, _, _ in rows} == sample
    assert {a for _, a, _ in rows} == {member.pk, bob.pk}
    order = [t for _, t in sorted({(p, t) for t, _, p in rows})]
    assert order == list(cal.items.order_by("position").values_list("trace_id", flat=True))
    assert calibration.do_queue_calibration(cal, owner, [member, bob], k=2) == 0  # already queued
    with pytest.raises(calibration.CalibrationError, match="between 1 and 2"):
        calibration.do_queue_calibration(cal, owner, [member, bob], k=3)


def test_the_report_has_every_candidate_on_the_sample(pool):
    cal = calibration.do_create_calibration(pool, name="pilot", reference="human",
                                            candidates=["judge:gpt", "judge:mechanistic"], size=12)
    report = calibration.calibration_report(cal)
    assert report["traces"] == 12 and report["profile"] == "default" and report["seed"] == 0
    gpt = next(r for r in report["candidates"] if r["candidate"] == "judge:gpt")
    # human labels t00..t05: VE VV VV VE VV VV; gpt: VV on even, VE on odd traces
    assert gpt["metrics"]["steps_compared"] == 12
    # disagreements: t00 step 2, t01 step 2, t05 step 2
    assert gpt["metrics"]["percent_agreement"] == pytest.approx(9 / 12)
    assert sorted((Trace.objects.get(pk=d[0]).trace_id, d[1]) for d in gpt["disagreements"]) == [
        ("t00", 2), ("t01", 2), ("t05", 2)]
    assert report["complete"]["human"] == 6 and report["complete"]["judge:gpt"] == 12
    mech = next(r for r in report["candidates"] if r["candidate"] == "judge:mechanistic")
    assert mech["metrics"]["steps_compared"] == 0  # it never ran here: every number undefined, with reasons
    assert mech["metrics"]["undefined"]["kappa"] == "no step was labelled by both sources"


def test_tuning_omega_on_the_sample_is_the_core_experiment(pool):
    cal = calibration.do_create_calibration(pool, name="pilot", reference="human", candidates=["judge:gpt"], size=12)
    result = calibration.tuning(cal, "judge:gpt", omegas=[0.0, 2.5, 5.0])
    assert [g["omega"] for g in result["grid"]] == [0.0, 2.5, 5.0]
    assert result["traces"] == 6  # human labels complete on 6 traces
    assert result["n_validation"] == 3 and result["n_test"] == 3
    assert set(result["validation_ids"]) | set(result["test_ids"]) == {f"t{i:02d}" for i in range(6)}
    assert result["profile"] == "default" and result["seed"] == 0
    with pytest.raises(calibration.CalibrationError, match="needs a judge"):
        calibration.tuning(cal, "human")


def test_tuning_with_too_few_traces_says_why(pool):
    cal = calibration.do_create_calibration(pool, name="tiny", reference="human", candidates=["judge:gpt"], size=4)
    result = calibration.tuning(cal, "judge:gpt", omegas=[0.0, 5.0])
    assert result["best"] is None
    assert "undefined at every grid point" in result["undefined"]["best"]


def test_grids_parse_and_refuse_bad_values():
    assert calibration.parse_grid("0:1:0.25", field="omegas", low=0, high=10) == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert calibration.parse_grid("0, 2.5,5", field="omegas", low=0, high=10) == [0.0, 2.5, 5.0]
    assert calibration.parse_grid("", field="ws", low=0, high=1) is None
    with pytest.raises(calibration.CalibrationError, match=r"ws: values must be within \[0, 1\]"):
        calibration.parse_grid("0.5, 2", field="ws", low=0, high=1)


def test_the_prompt_version_behind_each_judge_is_shown(pool):
    from judges.models import JudgeConfig, JudgeTraceResult

    judge = JudgeConfig.objects.get(study=pool, name="gpt")
    traces = list(Trace.objects.filter(study=pool, n_steps__gte=1).order_by("pk"))
    JudgeTraceResult.objects.bulk_create([JudgeTraceResult(judge=judge, trace=t, status="ok",
                                                           prompt_version="1" if i < 8 else "2")
                                          for i, t in enumerate(traces)])
    cal = calibration.do_create_calibration(pool, name="pilot", reference="human", candidates=["judge:gpt"], size=12)
    versions = calibration.prompt_versions(cal)["judge:gpt"]
    assert versions == [{"prompt_version": "1", "traces": 8}, {"prompt_version": "2", "traces": 4}]


def test_the_api_creates_lists_reports_tunes_and_queues(pool, owner, member):
    url = f"/api/v1/studies/{pool.pk}/calibrations/"
    body = {"name": "pilot", "reference": "human", "candidates": ["judge:gpt"], "size": 8, "seed": 2}
    assert api(member).post(url, body, format="json").status_code == 403  # annotators do not create
    created = api(owner).post(url, body, format="json")
    assert created.status_code == 201, created.json()
    data = created.json()
    assert data["traces"] == 8 and data["reference"] == "human" and data["html_url"].endswith(
        f"/studies/{pool.pk}/calibration/{data['id']}/")
    bad = api(owner).post(url, {**body, "name": "again", "candidates": ["judge:nope"]}, format="json")
    assert bad.status_code == 400 and bad.json()["errors"][0]["field"] == "candidates"
    listed = api(member).get(url).json()  # the study is blind, member is an annotator
    assert listed["detail"].startswith("this study is blind")
    pool.blind = False
    pool.save()
    listed = api(member).get(url).json()
    assert listed["count"] == 1 and listed["results"][0]["traces"] == 8
    detail = api(owner).get(f"/api/v1/calibrations/{data['id']}/").json()
    assert detail["report"]["candidates"][0]["candidate"] == "judge:gpt"
    assert set(detail["report"]["candidates"][0]["metrics"]) >= {"kappa", "kappa_ci", "pb_f1", "pearson_ci"}
    assert sum(s["traces"] for s in detail["composition"]) == 8
    tuned = api(owner).get(f"/api/v1/calibrations/{data['id']}/tuning/?candidate=judge:gpt&omegas=0,5")
    assert tuned.status_code == 200 and [g["omega"] for g in tuned.json()["grid"]] == [0.0, 5.0]
    assert api(owner).get(f"/api/v1/calibrations/{data['id']}/tuning/?candidate=human").status_code == 400
    queued = api(owner).post(f"/api/v1/calibrations/{data['id']}/queue/", {"annotators": ["alice"], "k": 1},
                              format="json")
    assert queued.status_code == 200 and queued.json() == {"assignments_created": 8}
    assert api(member).post(f"/api/v1/calibrations/{data['id']}/queue/", {"annotators": ["alice"]},
                             format="json").status_code == 403
    assert CalibrationStudy.objects.get(pk=data["id"]).items.count() == 8


def test_core_tuning_is_what_the_report_runs(pool):
    """The service passes the study-wide judge hazard: the baseline equals the stored scores' correlation."""
    cal = calibration.do_create_calibration(pool, name="pilot", reference="human", candidates=["judge:gpt"], size=12)
    result = calibration.tuning(cal, "judge:gpt", omegas=[5.0])
    assert result["baseline"]["omega"] == DEFAULT.omega


def test_tuning_against_the_holistic_ratings_with_a_w_grid(scored_pairs):
    cal = calibration.do_create_calibration(scored_pairs, name="rated", reference="human", candidates=["judge:gpt"],
                                            size=4, validation_fraction=0.75)
    result = calibration.tuning(cal, "judge:gpt", target="rating", omegas=[0.0, 5.0], ws=[0.5, 1.0])
    assert result["target"] == "rating" and result["score"] == "holistic"
    assert result["traces"] == 4 and (result["n_validation"], result["n_test"]) == (3, 1)
    assert [(g["omega"], g["w"]) for g in result["grid"]] == [(0.0, 0.5), (0.0, 1.0), (5.0, 0.5), (5.0, 1.0)]
    assert result["best"] is not None and result["validation_r"] is not None
    assert result["test"]["pearson_r"] is None  # one held-out trace: not defined, with the reason
    assert result["undefined"]["test.pearson_r"] == "fewer than 3 paired values (n = 1)"
