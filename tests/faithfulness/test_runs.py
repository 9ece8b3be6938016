"""Intervention and anytime runs through the run engine against the fake server:
what is selected, edited, asked, stored and scored; the bad inputs."""

from __future__ import annotations

import json

import pytest

from annotation.models import Trace
from faithfulness.models import AnytimePoint, FaithfulnessRun, Intervention, Status
from faithfulness.running import ContinuationUnavailable, do_start_anytime, do_start_interventions, run_inline
from faithfulness.summaries import anytime_summary, ifr_summary
from runs.continuation import DEFAULT_CUE
from runs.engine import RunConflict

pytestmark = pytest.mark.django_db


def run(record: FaithfulnessRun) -> FaithfulnessRun:
    job = run_inline(record)
    record.refresh_from_db()
    assert job.status == "succeeded", job.error
    return record


def test_interventions_edit_a_relevant_step_and_re_decode_it_in_the_probed_mode(generated, server):
    record = run(do_start_interventions(generated, queue=False))
    assert (record.mode, record.traces, record.skipped) == ("completions", 4, {})
    rows = list(record.interventions.select_related("trace").order_by("trace_id", "kind"))
    assert {r.kind for r in rows} == {"value_flip", "step_ablation", "paraphrase", "tool_result"}
    flips = [r for r in rows if r.kind == "value_flip"]
    for r in flips:
        trace = r.trace
        assert r.status == Status.OK
        assert r.original_step in trace.raw and r.old_value == trace.answer  # "2 + 3 = 5." states the answer
        assert r.edited_step == r.original_step.replace(f"= {r.old_value}", f"= {r.new_value}")
        assert r.implied == r.new_value  # the flipped step states the answer itself
        # The fake continues a raw prompt with a fixed sentence: the edited trace states no answer, so the answer
        # is forced (the prefix, the continuation, the cue) and the fake gives the last number before the cue.
        assert r.continuation == " and so the reasoning goes on." and r.forced
        assert (r.new_answer, r.lenient, r.strict, r.strict_computed, r.monotone) == (r.new_value, True, True, True,
                                                                                      True)
        assert r.result["mode"] == "completions" and r.result["ok"]
        assert r.result["forced"]["cue"] == DEFAULT_CUE and r.result["forced"]["answer"] == r.new_value
    # The fake's GSM8K-style traces carry no <<expr=result>> calculator annotations.
    tools = [r for r in rows if r.kind == "tool_result"]
    assert tools and all(r.status == Status.NOT_APPLICABLE and "no tool output" in r.reason for r in tools)
    assert record.job.total == len(rows) - len(tools)


def test_the_requests_carry_the_edited_prefix_after_the_rendered_prompt(generated, server):
    record = run(do_start_interventions(generated, kinds="value_flip", queue=False, limit=1))
    row = record.interventions.get()
    sent = [s.body for s in server.requests if "prompt" in s.body and "Ann has" in s.body["prompt"]]
    assert len(sent) == 2  # the continuation and its forced answer (the probe's requests ask something else)
    assert sent[0]["prompt"].endswith(row.edited_prefix) and "Ann has" in sent[0]["prompt"]
    assert sent[0]["temperature"] == 0.0 and sent[0]["seed"] == 0
    assert sent[0]["max_tokens"] == 20 + 64  # the original's completion tokens plus the slack
    # the continuation stated no answer: the same prefix, the continuation and the cue, greedy, 32 tokens
    assert sent[1]["prompt"] == sent[0]["prompt"] + row.continuation.rstrip() + DEFAULT_CUE
    assert (sent[1]["max_tokens"], sent[1]["temperature"]) == (32, 0.0)


def test_ifr_summary_per_kind_and_mode_and_the_paraphrase_control_apart(generated):
    record = run(do_start_interventions(generated, kinds="value_flip,paraphrase", queue=False))
    summary = ifr_summary(record)
    rows = {(r["kind"], r["mode"]): r for r in summary["rows"]}
    assert rows[("value_flip", "completions")]["lenient"]["value"] == 1.0
    assert rows[("value_flip", "completions")]["strict"]["value"] == 1.0  # the forced answers follow the edit
    assert rows[("value_flip", "completions")]["forced"] == 4 and rows[("value_flip", "completions")]["no_answer"] == 0
    assert rows[("all causal kinds", "completions")]["lenient"]["traces"] == 4
    para = rows[("paraphrase", "completions")]
    assert "lenient" not in para and para["invariance"]["value"] == 1.0  # the reworded step's answer is forced back


def test_a_trace_without_a_relevant_step_is_skipped_with_the_reason_and_counted(generated):
    trace = Trace.objects.filter(model="tiny").order_by("pk").first()
    trace.steps.all().update(text="I think about it.")
    record = run(do_start_interventions(generated, kinds="value_flip", queue=False))
    assert record.traces == 4
    assert record.skipped == {trace.trace_id: "no step derives a value that a later step or the answer uses, "
                                            "or establishes a skeleton step"}
    assert ifr_summary(record)["skipped"] == 1


def test_it_refuses_a_subject_model_whose_probe_failed_naming_the_modes_tried(generated):
    generated.continuation = ""
    generated.probe_result = {"modes": [{"mode": "completions", "supported": False, "reason": "no answer: HTTP 404"},
                                        {"mode": "instructed", "supported": False, "reason": "no answer: HTTP 500"}]}
    generated.save()
    with pytest.raises(ContinuationUnavailable, match="probe of subject model tiny failed; modes tried: "
                                                               "completions: no answer: HTTP 404; instructed"):
        do_start_interventions(generated, queue=False)
    with pytest.raises(ContinuationUnavailable, match="found mode 'completions' unusable"):
        do_start_anytime(generated, mode="completions", queue=False)
    generated.probe_result = {}
    generated.save()
    with pytest.raises(ContinuationUnavailable, match="never probed"):
        do_start_interventions(generated, queue=False)
    assert not FaithfulnessRun.objects.exists()


def test_anytime_truncates_by_steps_and_forces_an_answer_unless_the_trace_ended_within(generated, server):
    record = run(do_start_anytime(generated, grid="steps:1,2,full", queue=False))
    n_steps = set(Trace.objects.filter(model="tiny").values_list("n_steps", flat=True))
    assert n_steps == {2}  # "We add the numbers of the question." / "2 + 3 = 5."; the answer line is the answer
    points = AnytimePoint.objects.filter(frun=record).order_by("trace_id", "position")
    by_budget = {b: [p for p in points if p.budget == b] for b in (1, 2, None)}
    # Budget 1: the first step only -> a forced answer; the fake answers the last number before the cue, which
    # is the question's last number (3, 4, 5, 6): wrong. Budgets 2 and full: the trace ended within -> its own.
    assert all(not p.within and p.result["cue"] == DEFAULT_CUE and p.correct is False for p in by_budget[1])
    assert all(p.within and p.correct and p.result == {} for p in by_budget[2] + by_budget[None])
    summary = anytime_summary(record)
    assert summary["acc"] == [0.0, 1.0, 1.0] and summary["auc"] == pytest.approx(2 / 3)
    assert record.job.total == 4  # one forced answer per trace


def test_anytime_token_budgets_scale_to_the_reported_tokens(generated):
    record = run(do_start_anytime(generated, grid="tokens:5,20,full", queue=False))
    points = {(p.budget, p.within) for p in record.points.all()}
    assert points == {(5, False), (20, True), (None, True)}  # the fake reports 20 completion tokens per answer


def test_it_rejects_a_non_increasing_grid_clearly(generated):
    with pytest.raises(ValueError, match="not increasing: budget 3 \\(64\\) does not exceed budget 2 \\(128\\)"):
        do_start_anytime(generated, grid="tokens:64,128,64", queue=False)


def test_a_second_run_while_one_is_active_is_refused(generated):
    do_start_anytime(generated, grid="steps:1,full", queue=False)
    with pytest.raises(RunConflict, match="already has anytime run"):
        do_start_interventions(generated, queue=False)


def test_answers_come_back_from_the_cache_the_second_time(generated, server):
    run(do_start_interventions(generated, kinds="value_flip", queue=False))
    before = len([s.body for s in server.requests])
    record = run(do_start_interventions(generated, kinds="value_flip", queue=False))
    assert len([s.body for s in server.requests]) == before
    assert all(r.result["cached"] for r in Intervention.objects.filter(frun=record))
    assert json.dumps(ifr_summary(record))  # serialisable for the API
