"""LLM judge runs against a fake OpenAI-compatible server on a real socket,
through the real openai client: labels, faults and retries, output-mode
fallback, the cache, cancel, budget, concurrency and rate limits."""

from __future__ import annotations

import pytest

from annotation import jobs
from annotation.models import Job, LabelHistory, StepLabel, Trace
from judges.models import JudgeConfig, JudgeTraceResult
from runs.models import ModelCall, RunChunk
from tests.judges.conftest import run_judge
from tests.runs.fake_openai import Fault

pytestmark = pytest.mark.django_db


def judge_labels(judge: JudgeConfig) -> dict[tuple[str, int], str]:
    return {
        (tid, index): verdict
        for tid, index, verdict in StepLabel.objects.filter(kind=StepLabel.Kind.JUDGE, judge=judge).values_list(
            "step__trace__trace_id", "step__index", "verdict"
        )
    }


def test_a_run_labels_every_step_as_the_server_says(make_traces, llm_judge, server):
    make_traces(6, wrong={2: 3})
    judge = llm_judge()
    run, job = run_judge(judge)
    assert job.status == Job.Status.SUCCEEDED and (job.done, job.failed, job.total) == (6, 0, 6)
    labels = judge_labels(judge)
    assert len(labels) == 18 and labels[("t0002", 3)] == "invalid"
    assert sum(v == "invalid" for v in labels.values()) == 1
    label = StepLabel.objects.get(judge=judge, step__trace__trace_id="t0002", step__index=3)
    assert label.confidence == 0.8 and label.reason == "step 3 looks invalid" and label.source == "judge:gpt"
    assert server.count == 6
    # the judge's opinion of the final answer, with tokens and calls, per trace
    result = JudgeTraceResult.objects.get(judge=judge, trace__trace_id="t0002")
    assert (result.status, result.answer_correct, result.attempts, result.prompt_tokens) == ("ok", True, 1, 100)
    assert (run.requests, run.prompt_tokens, run.completion_tokens, run.labels_created) == (6, 600, 120, 18)
    assert ModelCall.objects.filter(run=run.run, outcome="ok").count() == 6
    # every new label is in the audit trail, once
    assert LabelHistory.objects.filter(via="judge run", source_name="gpt", before__isnull=True).count() == 18


def test_a_run_survives_errors_rate_limits_timeouts_and_malformed_answers(make_traces, llm_judge, server):
    make_traces(8)
    judge = llm_judge(concurrency=2, timeout_seconds=0.5, max_retries=8)
    server.inject(
        Fault(status=500), Fault(status=503), Fault(status=429, retry_after="1"), Fault(delay=2.0),
        Fault(content="I am not JSON"), Fault(content='{"steps": [{"step": 1, "verdict": "sure"}]}'),
        Fault(status=502),
    )
    run, job = run_judge(judge)
    assert job.status == Job.Status.SUCCEEDED and job.failed == 0 and job.done == 8
    assert len(judge_labels(judge)) == 24
    assert server.count == 8 + 7  # every fault cost one retry
    outcomes = sorted(ModelCall.objects.filter(run=run.run).exclude(outcome="ok").values_list("outcome", "http_status"),
                      key=str)
    assert outcomes == sorted([("error", 500), ("error", 503), ("error", 429), ("error", None), ("malformed", 200),
                               ("malformed", 200), ("error", 502)], key=str)
    timeout = ModelCall.objects.get(run=run.run, outcome="error", http_status=None)
    assert "timed out" in timeout.error
    # Retry-After: 1 was honoured although the backoff is 10 ms
    limited = next(i for i, r in enumerate(server.requests) if r.status == 429)
    retried_at = min(r.started for r in server.requests[limited + 1:] if r.started > server.requests[limited].finished
                     and r.body == server.requests[limited].body)
    assert retried_at - server.requests[limited].finished >= 0.95
    # malformed answers cost tokens too
    assert run.requests == 15 and run.prompt_tokens == 100 * (8 + 2)


def test_after_max_retries_the_trace_fails_with_its_reason_and_the_run_goes_on(make_traces, llm_judge, server):
    make_traces(4)
    judge = llm_judge(max_retries=2)
    server.rule(lambda body: "trace 1\n" in body["messages"][-1]["content"] + "\n", Fault(status=500, message="boom"))
    run, job = run_judge(judge)
    # some traces failed: the run is partial, and says why
    assert job.status == Job.Status.PARTIAL and (job.done, job.failed) == (4, 1)
    assert job.error == "1 of 4 traces failed; first reasons: HTTP 500: boom (gave up after 3 attempts)"
    failed = JudgeTraceResult.objects.get(judge=judge, status="failed")
    assert failed.trace.trace_id == "t0001" and failed.attempts == 3
    assert failed.reason == "HTTP 500: boom (gave up after 3 attempts)"
    assert not StepLabel.objects.filter(judge=judge, step__trace=failed.trace).exists()
    assert len(judge_labels(judge)) == 9
    # a run over the failed traces asks again for that one only
    server.rules.clear()
    before = server.count
    run2, job2 = run_judge(judge, scope="failed")
    assert job2.total == 1 and job2.status == Job.Status.SUCCEEDED and server.count == before + 1
    assert not JudgeTraceResult.objects.filter(judge=judge, status="failed").exists()


def test_every_trace_failing_fails_the_run(make_traces, llm_judge, server):
    make_traces(2)
    judge = llm_judge(max_retries=0)
    server.rule(lambda body: True, Fault(status=500, message="down"))
    _, job = run_judge(judge)
    assert job.status == Job.Status.FAILED and "every trace failed" in job.error and "down" in job.error


def test_out_of_range_steps_are_warnings_and_missing_steps_stay_unlabelled(make_traces, llm_judge, server):
    make_traces(2)
    judge = llm_judge(concurrency=1)
    server.inject(Fault(extra_steps=(0, 4, 17), drop_steps=(2,)))
    run, job = run_judge(judge)
    assert job.status == Job.Status.SUCCEEDED
    result = JudgeTraceResult.objects.get(judge=judge, trace__trace_id="t0000")
    assert result.status == "ok" and len(result.warnings) == 3 and "step 17 is outside 1..3" in result.warnings[2]
    assert run.warnings == 3
    labels = judge_labels(judge)
    assert ("t0000", 2) not in labels and ("t0000", 1) in labels and len(labels) == 5


def test_auto_mode_falls_back_from_json_schema_and_remembers(make_traces, llm_judge, server):
    server.reject_json_schema = True  # llama-cpp-python: HTTP 500 "Input should be 'text' or 'json_object'"
    make_traces(6)
    judge = llm_judge(concurrency=2)
    assert judge.output_mode == "auto" and judge.output_mode_resolved == ""
    _, job = run_judge(judge)
    assert job.status == Job.Status.SUCCEEDED and len(judge_labels(judge)) == 18
    formats = server.formats()
    assert formats.count("json_object") == 6 and 1 <= formats.count("json_schema") <= 2  # one per slot in flight
    assert judge.output_mode_resolved == "json_object"
    json_object_request = next(r.body for r in server.requests if r.status == 200)
    assert '"required": ["steps"]' in json_object_request["messages"][-1]["content"]  # the schema is in the prompt
    # the next run starts where the last one ended
    before = server.count
    _, job = run_judge(judge, force=True)
    assert job.status == Job.Status.SUCCEEDED
    assert server.formats()[before:] == ["json_object"] * 6


def test_auto_mode_falls_back_to_a_plain_prompt_when_no_response_format_is_accepted(make_traces, llm_judge, server):
    server.reject_response_format = True
    make_traces(3)
    judge = llm_judge(concurrency=1)
    _, job = run_judge(judge)
    assert job.status == Job.Status.SUCCEEDED and len(judge_labels(judge)) == 9
    assert server.formats() == ["json_schema", "json_object", None, None, None]
    assert judge.output_mode_resolved == "prompt"


def test_a_fixed_output_mode_the_server_refuses_stops_the_run(make_traces, llm_judge, server):
    server.reject_json_schema = True
    make_traces(4)
    judge = llm_judge(output_mode="json_schema", concurrency=1)
    _, job = run_judge(judge)
    assert job.status == Job.Status.FAILED and "refuses output mode json_schema" in job.error
    assert server.count == 1


@pytest.mark.parametrize("output_mode, sent", [("json_object", "json_object"), ("prompt", None)])
def test_fixed_output_modes_send_what_they_say(make_traces, llm_judge, server, output_mode, sent):
    make_traces(2)
    judge = llm_judge(output_mode=output_mode)
    _, job = run_judge(judge)
    assert job.status == Job.Status.SUCCEEDED and len(judge_labels(judge)) == 6
    assert server.formats() == [sent, sent]


def test_a_second_run_is_answered_from_the_cache_with_zero_requests(make_traces, llm_judge, server):
    make_traces(5)
    judge = llm_judge()
    run1, _ = run_judge(judge)
    assert server.count == 5 and run1.cache_hits == 0
    history = LabelHistory.objects.count()
    run2, job2 = run_judge(judge)
    assert server.count == 5  # no request at all
    assert job2.status == Job.Status.SUCCEEDED and job2.done == 5
    assert (run2.cache_hits, run2.requests, run2.cost_usd) == (5, 0, 0)
    assert (run2.labels_created, run2.labels_changed, run2.labels_unchanged) == (0, 0, 15)
    assert LabelHistory.objects.count() == history  # nothing changed, nothing recorded
    # a new prompt version is a new request
    from judges import services

    services.do_save_prompt(judge, judge.prompt_template + "\nBe strict.")
    run_judge(judge)
    assert server.count == 10
    # and force asks again even with a warm cache
    run_judge(judge, force=True)
    assert server.count == 15


def test_a_changed_answer_updates_the_label_and_records_the_change(make_traces, llm_judge, server):
    make_traces(1)
    judge = llm_judge()
    run_judge(judge)
    label = StepLabel.objects.get(judge=judge, step__index=2)
    server.inject(Fault(content='{"steps": [{"step": 1, "verdict": "valid", "reason": "step 1 looks valid", '
                                '"confidence": 0.8}, {"step": 2, "verdict": "invalid", "reason": "no"}]}'))
    run, _ = run_judge(judge, force=True)
    label.refresh_from_db()
    assert (label.verdict, label.version) == ("invalid", 2)
    assert (run.labels_changed, run.labels_unchanged, run.labels_removed) == (1, 1, 1)  # step 3 left out: removed
    changes = LabelHistory.objects.filter(label=label).order_by("pk")
    assert [(h.before and h.before["verdict"], h.after["verdict"]) for h in changes] == [(None, "valid"),
                                                                                         ("valid", "invalid")]
    assert not StepLabel.objects.filter(judge=judge, step__index=3).exists()
    assert LabelHistory.objects.filter(after__isnull=True, via="judge run").count() == 1


def test_cancel_stops_the_run_between_traces(make_traces, llm_judge, server, settings):
    settings.RUN_CANCEL_CHECK_SECONDS = 0  # look before every trace
    make_traces(60)
    server.latency = 0.05
    judge = llm_judge(concurrency=2)
    sent_before_cancel = []

    def cancel_once_started(done, total):
        if done and not sent_before_cancel:
            jobs.cancel(Job.objects.get(kind=Job.Kind.JUDGE, status=Job.Status.RUNNING))
            # Counted once the cancel is stored: the pool's threads keep taking traces until then, and a
            # loaded machine lets several through between a count taken before it and the cancel itself.
            sent_before_cancel.append(server.count)

    run, job = run_judge(judge, progress=cancel_once_started)
    assert job.status == Job.Status.CANCELLED
    # only the requests already in flight when the cancel came reached the server; those were aborted
    # (runs.transport: a cancel closes the connections), so what is done is what was answered before
    assert server.count <= sent_before_cancel[0] + 2 and server.count < 10
    assert job.done == JudgeTraceResult.objects.filter(judge=judge).count() <= server.count
    chunks = list(run.chunks.values_list("status", flat=True))
    assert chunks[0] == RunChunk.Status.DONE and set(chunks[1:]) == {RunChunk.Status.SKIPPED}


def test_a_run_cancelled_before_it_starts_does_nothing(make_traces, llm_judge, server):
    from judges import services

    make_traces(3)
    judge = llm_judge()
    run = services.do_start_run(judge, queue=False)
    job = jobs.cancel(run.job)
    assert job.status == Job.Status.CANCELLED
    services.run_inline(run)
    assert server.count == 0 and Job.objects.get(pk=job.pk).status == Job.Status.CANCELLED


def test_a_budget_stops_the_run_once_spent(make_traces, llm_judge, server):
    make_traces(20)
    # 100 prompt + 20 completion tokens at $10 / $50 per million: $0.002 a call
    judge = llm_judge(concurrency=1, price_input_per_mtok=10, price_output_per_mtok=50)
    run, job = run_judge(judge, budget_usd=0.01)
    assert job.status == Job.Status.FAILED and "budget of $0.01 is spent" in job.error
    assert server.count == 5 and run.cost_usd == pytest.approx(0.01)
    assert JudgeTraceResult.objects.get(judge=judge, trace__trace_id="t0000").cost_usd == pytest.approx(0.002)
    assert job.done == 5


def test_concurrency_keeps_that_many_requests_in_flight(make_traces, llm_judge, server):
    make_traces(12)
    server.latency = 0.2
    judge = llm_judge(concurrency=4)
    _, job = run_judge(judge)
    assert job.status == Job.Status.SUCCEEDED
    assert server.max_in_flight == 4  # the throughput this buys is measured in benchmarks/judge_throughput.py


def test_the_rate_limit_spaces_requests(make_traces, llm_judge, server):
    make_traces(5)
    judge = llm_judge(concurrency=4, rate_limit_per_minute=300)  # one every 0.2 s: 0.8 s from first to fifth
    run_judge(judge)
    starts = sorted(r.started for r in server.requests)
    # Unlimited, four workers would start all five within milliseconds. The server stamps arrivals, and the
    # first request alone also opens its connection, so under load it can arrive late: a slack of one interval.
    assert starts[-1] - starts[0] >= 0.6


def test_a_missing_api_key_variable_fails_the_run_naming_it(make_traces, llm_judge, server, monkeypatch):
    monkeypatch.delenv("JUDGE_TEST_KEY", raising=False)
    make_traces(2)
    judge = llm_judge(api_key_env="JUDGE_TEST_KEY")
    _, job = run_judge(judge)
    assert job.status == Job.Status.FAILED and "JUDGE_TEST_KEY" in job.error and server.count == 0
    monkeypatch.setenv("JUDGE_TEST_KEY", "sk-test")
    _, job = run_judge(judge)
    assert job.status == Job.Status.SUCCEEDED
    assert {r.authorization for r in server.requests} == {"Bearer sk-test"}
    assert "sk-test" not in str(JudgeConfig.objects.filter(pk=judge.pk).values().first())  # never stored


def test_a_refused_key_stops_the_run(make_traces, llm_judge, server):
    make_traces(6)
    judge = llm_judge(concurrency=1)
    server.rule(lambda body: True, Fault(status=401, message="invalid api key"))
    _, job = run_judge(judge)
    assert job.status == Job.Status.FAILED and "refused the API key" in job.error
    assert server.count == 1


def test_an_empty_trace_is_judged_without_a_request(study, do_import, llm_judge, server):
    from tests.conftest import jsonl

    do_import(jsonl({"kind": "problem", "problem_id": "p", "statement": "s", "gold_answer": "1"},
                    {"kind": "trace", "problem_id": "p", "model": "m", "trace_id": "empty", "steps": [], "answer": "1"}))
    _, job = run_judge(llm_judge())
    assert job.status == Job.Status.SUCCEEDED and server.count == 0
    assert JudgeTraceResult.objects.get(trace=Trace.objects.get(trace_id="empty")).status == "ok"


def test_a_long_trace_is_judged_in_overlapping_windows_and_its_labels_merge(make_traces, llm_judge, server):
    from judges.providers.openai_compat import WINDOW_MAX_STEPS, plan_trace_windows
    from judges.runclient import load_inputs

    # 80 steps: more than one window's answer can hold, so the judge sees them in windows
    make_traces(2, steps=80, wrong={1: 57})
    judge = llm_judge(context_tokens=8192)
    inputs, _ = load_inputs(list(Trace.objects.order_by("pk").values_list("pk", flat=True)))
    wins = plan_trace_windows(judge, inputs[1])
    assert len(wins) >= 3 and all(w.n_steps <= WINDOW_MAX_STEPS for w in wins)
    assert [s for w in wins for s in range(w.core_start, w.core_end + 1)] == list(range(1, 81))
    run, job = run_judge(judge)
    assert job.status == Job.Status.SUCCEEDED and (job.done, job.failed) == (2, 0)
    labels = judge_labels(judge)
    # every step of both traces labelled once, the WRONG step where it is
    assert len(labels) == 160 and labels[("t0001", 57)] == "invalid"
    assert [k for k, v in labels.items() if v == "invalid"] == [("t0001", 57)]
    assert server.count == 2 * len(wins)
    assert run.requests == 2 * len(wins)


def test_without_a_context_size_a_long_trace_stays_one_request(make_traces, llm_judge, server):
    make_traces(1, steps=80)
    run, job = run_judge(llm_judge())
    assert job.status == Job.Status.SUCCEEDED and server.count == 1 and len(judge_labels(run.judge)) == 80


def test_the_cost_estimate_counts_windows_before_the_run(make_traces, llm_judge, server, client, owner):
    from judges import services as judge_services

    make_traces(2, steps=80)
    judge = llm_judge(context_tokens=8192, price_input_per_mtok=1.0, price_output_per_mtok=2.0)
    est = judge_services.estimate_run(judge, Trace.objects.filter(study=judge.study))
    run, _job = run_judge(judge)
    # the estimate asks for exactly the requests the run made, tokens bound the real ones
    assert est["requests"] == run.requests and est["windowed_traces"] == 2 and est["exact"]
    assert est["completion_tokens_max"] >= run.completion_tokens
    assert est["cost_usd_max"] == pytest.approx((est["prompt_tokens"] * 1.0 + est["completion_tokens_max"] * 2.0) / 1e6)
    client.force_login(owner)
    page = client.get(f"/judges/{judge.pk}/").content.decode()
    assert "run-estimate" in page and f"about {est['requests']} requests" in page


def test_a_trace_without_steps_is_judged_at_once_with_a_warning_and_asks_nothing(llm_judge, server):
    from judges.providers import NoStop, TraceInput, get_provider

    provider = get_provider(llm_judge())
    bare = TraceInput(trace_pk=7, trace_id="t7", model="m", problem="?", gold_answer="1", answer="1", steps=(),
                      skeleton=())
    (outcome,) = list(provider.judge([bare], NoStop()))
    provider.close()
    assert (outcome.item, outcome.status, outcome.labels, outcome.calls) == (7, "ok", [], [])
    assert outcome.warnings == ["the trace has no steps; nothing to judge"] and server.count == 0
