"""Step-importance runs end to end against the fake thinking server: importance peaks at the plan step of a
model whose answer depends on it and is flat for a model that ignores its thought; rollouts are stored and
the measures recompute from them; the export gives one row per trace and step."""

from __future__ import annotations

import csv
import io

import pytest
from django.core.management import call_command

from anchors import results
from anchors.models import Rollout, Status, StepImportance
from anchors.running import do_start_importance, run_inline
from annotation.models import Trace
from runs.params import ParamError
from tests.runs.fake_thinking import IGNORE, PLAN

pytestmark = pytest.mark.django_db


def run(record):
    job = run_inline(record)
    record.refresh_from_db()
    assert job.status == "succeeded", job.error
    return record


def by_step(record, trace) -> dict[int, StepImportance]:
    return {r.step.index: r for r in StepImportance.objects.filter(irun=record, trace=trace).select_related("step")}


def test_importance_peaks_at_the_plan_step_and_is_flat_when_the_thought_is_ignored(reasoners):
    subject, server = reasoners[PLAN]
    record = run(do_start_importance(subject, samples=6, temperature=0.7, queue=False))
    trace = Trace.objects.filter(model=PLAN).order_by("pk").first()
    assert trace.thought.split("\n\n")[1] == "Plan: add everything up."
    # 2 traces x 5 positions (0..4) x (6 resamples + 1 forced)
    assert record.rollouts.count() == 2 * 5 * 7 and not record.rollouts.exclude(status=Status.OK).exists()
    seeds = {b.body.get("seed") for b in server.requests if "prompt" in b.body and "Final answer" not in b.body["prompt"]}
    assert {0, 1, 2, 3, 4, 5} <= seeds  # each sample its own seed
    temps = {b.body.get("temperature") for b in server.requests if "prompt" in b.body and b.body.get("seed") == 5}
    assert temps == {0.7}
    rows = by_step(record, trace)
    assert sorted(rows) == [1, 2, 3, 4]
    ri = {i: r.resampling_importance_accuracy for i, r in rows.items()}
    assert ri == {1: 0.0, 2: 0.5, 3: 0.0, 4: 0.0}  # seeds 0..5: half plan to multiply before the plan step
    assert rows[2].accuracy == 0.5 and rows[3].accuracy == 1.0
    assert rows[2].resampling_importance_kl > 0 and rows[3].resampling_importance_kl == 0
    # the resampled plan step that differs ("Plan: multiply ...") is wrong every time
    assert rows[2].counterfactual_importance_accuracy == 1.0 and rows[2].different_trajectories_fraction == 0.5
    assert rows[3].counterfactual_importance_accuracy is None  # every resample wrote the same step again
    assert rows[3].overdeterminedness == 1.0
    forced = {i: r.forced_importance_accuracy for i, r in rows.items()}
    assert forced == {1: 0.0, 2: 1.0, 3: 0.0, 4: 0.0}
    assert rows[2].n == 12 and rows[2].intervals["resampling_importance_accuracy"][0] <= 0.5
    top = max(rows.values(), key=lambda r: r.counterfactual_importance_kl or 0)
    assert top.step.index == 2
    # a multiply resample is stored with its first new sentence and its (wrong) answer
    wrong = record.rollouts.filter(trace=trace, position=1, kind=Rollout.Kind.RESAMPLE, correct=False).first()
    assert wrong.first_sentence == "Plan: multiply them together." and wrong.seed % 2 == 1

    ignore, _ = reasoners[IGNORE]
    flat = run(do_start_importance(ignore, samples=4, queue=False))
    for r in StepImportance.objects.filter(irun=flat):
        assert r.resampling_importance_accuracy == 0.0 and r.forced_importance_accuracy == 0.0
        assert r.resampling_importance_kl == 0.0 and r.accuracy == 1.0


def test_recompute_from_rollouts_gives_the_same_numbers(reasoners):
    subject, _ = reasoners[PLAN]
    record = run(do_start_importance(subject, samples=4, queue=False))
    before = sorted(StepImportance.objects.filter(irun=record).values_list(
        "step_id", "resampling_importance_accuracy", "counterfactual_importance_kl", "intervals"))
    assert results.store(record) == len(before)
    after = sorted(StepImportance.objects.filter(irun=record).values_list(
        "step_id", "resampling_importance_accuracy", "counterfactual_importance_kl", "intervals"))
    assert before == after


def test_each_trace_is_measured_by_the_chunk_that_completes_it(reasoners, monkeypatch):
    """The measures spread with the chunks: with the run's end hook doing nothing, every trace is measured,
    and the same as a recompute from all the rollouts."""
    monkeypatch.setattr(results, "store_missing", lambda record: 0)
    subject, _ = reasoners[PLAN]
    record = run(do_start_importance(subject, samples=2, queue=False))
    during = sorted(StepImportance.objects.filter(irun=record).values_list(
        "step_id", "resampling_importance_accuracy", "counterfactual_importance_kl", "intervals"))
    assert during and {t for t, in record.rollouts.values_list("trace_id")} == set(
        StepImportance.objects.filter(irun=record).values_list("trace_id", flat=True))
    results.store(record)
    assert during == sorted(StepImportance.objects.filter(irun=record).values_list(
        "step_id", "resampling_importance_accuracy", "counterfactual_importance_kl", "intervals"))


def test_stride_steps_and_trace_ids_choose_what_is_measured(reasoners):
    subject, _ = reasoners[PLAN]
    trace = Trace.objects.filter(model=PLAN).order_by("pk").first()
    record = run(do_start_importance(subject, samples=2, steps=[2], trace_ids=[trace.trace_id], forced=False,
                                     queue=False))
    assert sorted(set(record.rollouts.values_list("position", flat=True))) == [1, 2]
    assert not record.rollouts.filter(kind=Rollout.Kind.FORCED).exists()
    assert list(StepImportance.objects.filter(irun=record).values_list("step__index", flat=True)) == [2]
    strided = run(do_start_importance(subject, samples=1, stride=3, queue=False))
    # every third step from the first, and the last: 1 and 4 (positions 0, 1, 3, 4)
    assert sorted(set(strided.rollouts.values_list("position", flat=True))) == [0, 1, 3, 4]


@pytest.mark.parametrize("kwargs, field", [({"samples": 0}, "samples"), ({"samples": 201}, "samples"),
                                           ({"stride": 0}, "stride"), ({"temperature": 2.5}, "temperature"),
                                           ({"steps": [0]}, "steps"), ({"trace_ids": ["nope"]}, "trace_ids")])
def test_bad_parameters_are_refused_naming_the_field(reasoners, kwargs, field):
    subject, _ = reasoners[PLAN]
    with pytest.raises(ParamError) as exc:
        do_start_importance(subject, queue=False, **kwargs)
    assert exc.value.errors[0][0] == field


def test_export_one_row_per_trace_and_step(reasoners, study):
    subject, _ = reasoners[PLAN]
    record = run(do_start_importance(subject, samples=2, queue=False))
    out = io.StringIO()
    call_command("export", "--study", study.name, "--what", "step-importance", "--format", "csv", stdout=out)
    rows = list(csv.DictReader(io.StringIO(out.getvalue())))
    assert len(rows) == 2 * 4
    assert {r["source"] for r in rows} == {f"run:{record.pk}"} and {r["channel"] for r in rows} == {"thought"}
    first = rows[0]
    assert first["step"] == "1" and first["n"] == "4" and first["samples"] == "2" and first["code_version"]
    assert set(first) >= {"trace_id", "accuracy", "resampling_importance_kl", "counterfactual_importance_accuracy",
                          "forced_importance_kl", "different_trajectories_fraction", "overdeterminedness", "tags"}


@pytest.mark.parametrize("body, field", [({"samples": 0}, "samples"), ({"steps": "2,x"}, "steps"),
                                         ({"trace_ids": ["nope"]}, "trace_ids"), ({"temperature": 3}, "temperature"),
                                         ({"model": "nobody"}, "model")])
def test_the_rest_api_refuses_bad_parameters_with_a_400_naming_the_field(reasoners, study, owner, body, field):
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_authenticate(owner)
    r = client.post(f"/api/v1/studies/{study.pk}/runs/", {"kind": "step_importance", "model": PLAN, **body},
                    format="json")
    assert r.status_code == 400 and field in {e["field"] for e in r.json()["errors"]}, r.content


def test_the_by_tag_download_of_a_run_names_its_regime_in_the_manifest(reasoners, study, owner):
    import json

    from django.test import Client

    subject, _ = reasoners[PLAN]
    record = run(do_start_importance(subject, samples=2, temperature=0.5, seed=7, queue=False))
    web = Client()
    web.force_login(owner)
    page = web.get(f"/studies/{study.pk}/step-importance/")
    assert page.status_code == 200 and {r["tag"] for r in page.context["table"]} == {"untagged"}
    manifest = json.loads(web.get(f"/studies/{study.pk}/step-importance/export/", {
        "what": "step-importance-by-tag", "format": "parquet", "manifest": "1"}).content)
    (regime,) = manifest["runs"]
    assert regime["run"] == record.pk and regime["samples"] == 2 and regime["temperature"] == 0.5
    assert regime["seed"] == 7 and regime["mode"] == "completions" and regime["code_version"]
    assert regime["similarity"].startswith("tfidf-cosine") and regime["threshold"] == 0.5
    assert manifest["export"]["format"] == "parquet" and manifest["counts"]["rows"] == 1
    run_page = web.get(f"/step-importance/runs/{record.pk}/").content.decode()
    assert 'id="importance-rows"' in run_page and run_page.count("<tr><td><a href=") == 8
