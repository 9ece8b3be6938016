"""Generation runs against the fake OpenAI-compatible server (real socket,
real openai client): K samples per problem become traces with their regime,
re-runs and re-deliveries never duplicate, --problems missing completes an
interrupted run, truncation and the reasoning channel are kept."""

from __future__ import annotations

import re

import pytest

from annotation.importing.regime import REGIME_KEYS
from annotation.models import Job, Trace
from runs import engine
from runs.models import ModelCall, ResponseCache
from subjects import services
from subjects.models import Generation
from tests.runs.fake_openai import Fault
from tests.subjects.conftest import generate

pytestmark = pytest.mark.django_db


def test_k_samples_per_problem_become_checked_segmented_traces(make_problems, subject, server):
    make_problems(3)
    tiny = subject(n_samples=2, seed=10, temperature=0.7, price_input_per_mtok=1.0, price_output_per_mtok=2.0)
    record, job = generate(tiny)
    assert job.status == Job.Status.SUCCEEDED and (job.done, job.failed, job.total) == (3, 0, 3)
    traces = Trace.objects.filter(model="tiny").order_by("trace_id")
    assert traces.count() == 6 and server.count == 6 and record.traces_created == 6
    t = traces.get(trace_id="gen/tiny/v1/p1/s0")
    # segmented, answer extracted and checked exactly as an imported trace
    assert t.n_steps == 2 and t.answer == "7" and t.answer_correct is True and t.answer_origin == "automatic"
    assert list(t.steps.values_list("text", flat=True)) == ["We add the numbers of the question.", "3 + 4 = 7."]
    assert t.raw.endswith("The answer is 7.")
    # the regime: every key of generation.md, the model as the server reported it, per-sample seeds
    assert set(REGIME_KEYS) <= set(t.regime)  # (jsonb on PostgreSQL keeps no key order)
    assert t.regime["model"] == "tiny-model-served" and t.regime["base_url_host"].startswith("127.0.0.1:")
    assert (t.regime["api"], t.regime["prompt_template"], t.regime["prompt_template_version"]) == ("chat", "zero-shot", 1)
    assert (t.regime["temperature"], t.regime["seed"], t.regime["k"], t.regime["tool_access"]) == (0.7, 10, 2, "none")
    assert len(t.regime["messages_hash"]) == 64 and t.regime["code_version"].startswith("reasonaudit ")
    assert Trace.objects.get(trace_id="gen/tiny/v1/p1/s1").regime["seed"] == 11
    # tokens, latency and cost per sample
    g = Generation.objects.get(trace=t)
    assert (g.prompt_tokens, g.completion_tokens, g.truncated, g.cached) == (100, 20, False, False)
    assert g.cost_usd == pytest.approx((100 * 1.0 + 20 * 2.0) / 1e6)
    assert record.run.requests == 6 and record.run.prompt_tokens == 600
    sent = server.requests[0].body
    assert "_sample" not in sent and sent["max_tokens"] == 512 and sent["messages"][-1]["role"] == "user"


def test_a_rerun_or_redelivery_never_duplicates(make_problems, subject, server):
    make_problems(2)
    tiny = subject(n_samples=2, temperature=1.0)
    generate(tiny)
    record, job = generate(tiny)
    assert job.status == Job.Status.SUCCEEDED
    assert Trace.objects.filter(model="tiny").count() == 4 and Generation.objects.count() == 4
    assert server.count == 4  # the second run came from the cache (samples differ in the key)
    assert (record.traces_created, record.traces_unchanged, record.run.cache_hits) == (0, 4, 2)
    # a chunk delivered again after it was done does nothing
    chunk = record.run.chunks.first()
    assert engine.process_chunk(chunk.pk, "another/boot/1") is None
    assert Trace.objects.filter(model="tiny").count() == 4


def test_problems_missing_completes_a_run_after_server_errors(make_problems, subject, server):
    make_problems(4)
    tiny = subject(n_samples=2, max_retries=1)
    server.rule(lambda body: "has 3 apples" in body["messages"][-1]["content"], Fault(status=500, message="boom"))
    record, job = generate(tiny)
    assert job.status == Job.Status.PARTIAL and (job.done, job.failed) == (4, 1)
    assert re.search(r"first reasons: p1: sample [01]: HTTP 500: boom \(gave up after 2 attempts\)$", job.error)
    assert Trace.objects.filter(model="tiny").count() == 6
    server.rules.clear()
    before = server.count
    record, job = generate(tiny, scope="missing")
    assert job.status == Job.Status.SUCCEEDED and job.total == 1
    assert server.count - before == 2  # only p1's two samples were asked for
    assert Trace.objects.filter(model="tiny").count() == 8 and Generation.objects.count() == 8
    assert services.problems_in_scope(tiny, "missing", 2) == []


def test_a_completion_cut_by_max_tokens_is_kept_and_flagged(make_problems, subject, server):
    make_problems(1)
    tiny = subject(max_tokens=8)
    record, job = generate(tiny)
    assert job.status == Job.Status.SUCCEEDED
    t = Trace.objects.get(model="tiny")
    assert t.raw == "We add the numbers of the question." and t.meta["truncated"] is True
    assert t.meta["finish_reason"] == "length" and t.answer_correct is not True
    assert Generation.objects.get(trace=t).truncated is True


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
def test_the_reasoning_channel_is_kept_in_thought(make_problems, subject, server, field):
    make_problems(1)
    server.reasoning_field = field
    tiny = subject()
    generate(tiny)
    t = Trace.objects.get(model="tiny")
    assert t.thought == "The question gives 2 numbers; I add them." and t.answer_correct is True
    first = (t.thought, t.raw, t.regime["model"], t.meta["finish_reason"])
    # The cache keeps the whole choice, not a wrapper of it ...
    row = ResponseCache.objects.get()
    assert (row.content, row.reasoning, row.model, row.finish_reason) == (
        t.raw, "The question gives 2 numbers; I add them.", "tiny-model-served", "stop")
    # ... and the sample index is in the key, never in what the server is sent.
    assert "_sample" not in server.requests[0].body and "sample" not in server.requests[0].body
    # A cache hit replays the completion exactly: text, reasoning, the model the server named, finish reason.
    Trace.objects.all().delete()
    record, _job = generate(tiny)
    assert server.count == 1 and record.run.cache_hits == 1
    again = Trace.objects.get(model="tiny")
    assert (again.thought, again.raw, again.regime["model"], again.meta["finish_reason"]) == first
    assert first[2] == "tiny-model-served"


def test_retry_after_of_a_429_is_honoured(make_problems, subject, server):
    make_problems(1)
    server.inject(Fault(status=429, retry_after="1"))
    record, job = generate(subject(concurrency=1))
    assert job.status == Job.Status.SUCCEEDED
    assert [r.status for r in server.requests] == [429, 200]
    assert server.requests[1].started - server.requests[0].finished >= 0.95
    assert ModelCall.objects.filter(run=record.run, http_status=429).count() == 1


def test_k_shot_template_and_completions_api(make_problems, subject, server, study):
    make_problems(1)
    tiny = subject(api="completions", prompt_template=services.find_template(study, "gsm8k-8shot-cot"))
    record, job = generate(tiny)
    assert job.status == Job.Status.SUCCEEDED
    prompt = server.requests[0].body["prompt"]
    assert prompt.startswith("Q: There are 15 trees in the grove.") and prompt.count("The answer is") == 8
    assert prompt.endswith("How many apples does she have?\nA:")
    t = Trace.objects.get(model="tiny")
    assert t.answer_correct is True and t.regime["api"] == "completions"
    assert t.regime["prompt_template"] == "gsm8k-8shot-cot"


def test_pass_and_majority_at_k_on_the_model_table(make_problems, subject, server, study, do_import):
    make_problems(2)
    server.wrong_odd_seeds = True
    tiny = subject(n_samples=3, seed=0, temperature=0.8)  # seeds 0,1,2: right, wrong, right
    generate(tiny)
    rows = {(r.model, r.config_version): r for r in services.model_table(study)}
    row = rows[("tiny", 1)]
    assert row.traces == 6 and row.accuracy == pytest.approx(4 / 6)
    assert row.aggregate.pass_at_k == pytest.approx(1.0) and row.aggregate.maj_at_k == pytest.approx(1.0)
    assert row.mean_completion_tokens == 20
    # a new configuration version is a row of its own, never mixed with the first
    services.do_save_subject(study, {"temperature": 0.9}, subject=tiny)
    tiny.refresh_from_db()
    assert tiny.version == 2
    generate(tiny)
    rows = {(r.model, r.config_version) for r in services.model_table(study)}
    assert {("tiny", 1), ("tiny", 2)} <= rows


def test_a_server_that_dies_mid_run_fails_items_with_the_reason_and_missing_resumes(make_problems, subject, server):
    make_problems(3)
    tiny = subject(concurrency=1, max_retries=1)
    answered = []

    def die_after_two(body: dict) -> None:
        answered.append(body)
        if len(answered) == 2:
            server.down = True  # from the third request on, connections are dropped

    server.on_request = die_after_two
    record, job = generate(tiny)
    assert job.status == Job.Status.PARTIAL and (job.done, job.failed) == (3, 1)
    assert job.error.endswith(f"p2: sample 0: could not connect to {server.url}: Server disconnected without "
                              "sending a response. (gave up after 2 attempts)")
    kept = set(Trace.objects.filter(model="tiny").values_list("trace_id", flat=True))
    assert len(kept) == 2  # nothing generated was lost
    server.down, server.on_request = False, None
    record, job = generate(tiny, scope="missing")
    assert job.status == Job.Status.SUCCEEDED and job.total == 1
    assert Trace.objects.filter(model="tiny").count() == 3 and kept < set(
        Trace.objects.filter(model="tiny").values_list("trace_id", flat=True))


def test_an_empty_completion_is_retried_then_fails_the_problem(make_problems, subject, server):
    make_problems(1)
    server.inject(Fault(content=""), Fault(content=""))
    record, job = generate(subject(max_retries=1))
    assert job.status == Job.Status.FAILED
    assert "malformed answer: empty completion (gave up after 2 attempts)" in job.error
    assert not Trace.objects.filter(model="tiny").exists()
    assert list(ModelCall.objects.filter(run=record.run).values_list("outcome", flat=True)) == ["malformed"] * 2


def test_a_timeout_is_retried(make_problems, subject, server):
    make_problems(1)
    server.inject(Fault(delay=1.5))
    record, job = generate(subject(timeout_seconds=0.5, max_retries=2))
    assert job.status == Job.Status.SUCCEEDED and Trace.objects.filter(model="tiny").count() == 1
    timeout = ModelCall.objects.get(run=record.run, outcome="error")
    assert "timed out" in timeout.error and timeout.completion_tokens is None
    assert record.run.unknown_token_calls == 1


def test_no_response_format_is_sent_and_calls_say_plain_text(make_problems, subject, server):
    make_problems(1)
    record, _job = generate(subject())
    assert "response_format" not in server.requests[0].body
    assert list(ModelCall.objects.filter(run=record.run).values_list("output_mode", flat=True)) == ["prompt"]
    assert record.run.output_mode == ""


def test_lanes_share_the_concurrency_and_every_problem_is_generated_once(make_problems, subject, server, settings):
    # RUN_PARALLEL_CHUNKS = 2: two chains of chunks, each with half the concurrency (here, in
    # this process, one after the other; with worker processes, at the same time).
    settings.RUN_PARALLEL_CHUNKS = 2
    make_problems(30)
    server.latency = 0.05
    tiny = subject(concurrency=4)
    record, job = generate(tiny, samples=4)
    run = record.run
    assert run.lanes == 2 and job.status == Job.Status.SUCCEEDED and job.done == 30
    lanes = list(run.chunks.order_by("index").values_list("lane", flat=True))
    assert lanes == [i % 2 for i in range(len(lanes))] and len(lanes) >= 2
    assert Trace.objects.filter(model="tiny").count() == 120 == server.count
    assert server.max_in_flight == 2  # a lane's share of the concurrency of 4
