"""Judge runs on the run engine (issue 15): honest statuses, exact progress,
a displaced holder that writes nothing, known and unknown tokens, the schema
in the json_object fallback, and a prompt example that cannot leak."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command

from annotation.models import Job, StepLabel
from judges import protocol, services
from judges.models import JudgeConfig, JudgeTraceResult
from runs import engine
from runs.models import ModelCall, RunChunk
from tests.judges.conftest import run_judge
from tests.runs.fake_openai import Fault

pytestmark = pytest.mark.django_db


def _fail_traces(server, numbers: set[int]) -> None:
    server.rule(lambda body: any(f"of trace {n}\n" in body["messages"][-1]["content"] + "\n" for n in numbers),
                Fault(status=400, message="context length exceeded"))


def test_a_run_with_some_failed_traces_is_partial_and_the_cli_exits_non_zero_with_the_reasons(
        study, make_traces, llm_judge, server, capsys):
    make_traces(10)
    llm_judge(max_retries=0)
    _fail_traces(server, {2, 5, 7})
    with pytest.raises(SystemExit) as exit_:
        call_command("judge", "--study", study.name, "--judge", "gpt", "--wait")
    assert exit_.value.code == 1
    out, err = capsys.readouterr()
    assert "partial: 10 of 10 traces judged, 3 failed" in out
    assert "3 of 10 traces failed; first reasons: HTTP 400: context length exceeded" in err
    job = Job.objects.filter(kind="judge").latest("created_at")
    assert job.status == Job.Status.PARTIAL and job.error.startswith("3 of 10 traces failed")


def test_a_run_where_every_trace_failed_is_failed(make_traces, llm_judge, server):
    make_traces(4)
    judge = llm_judge(max_retries=0)
    _fail_traces(server, {0, 1, 2, 3})
    _run, job = run_judge(judge)
    assert job.status == Job.Status.FAILED and job.error.startswith("every trace failed; for example: HTTP 400")


def test_progress_counts_every_trace_once_across_chunks(study, make_traces):
    make_traces(120)  # the fake judge: 50 traces per chunk, so three chunks
    judge, _ = services.do_save_judge(study, {"name": "fake", "model": "all-valid", "base_url": "http://x/v1"})
    JudgeConfig.objects.filter(pk=judge.pk).update(provider=JudgeConfig.Provider.FAKE)
    judge.refresh_from_db()
    seen: list[tuple[int, int]] = []
    run, job = run_judge(judge, progress=lambda done, total: seen.append((done, total)))
    assert run.chunks.count() == 3
    assert seen[-1] == (120, 120) and (job.done, job.total) == (120, 120)
    assert all(done <= total for done, total in seen)
    assert [done for done, _ in seen] == sorted(done for done, _ in seen)  # never goes back


def test_a_displaced_holder_stops_and_commits_nothing(make_traces, llm_judge, server, monkeypatch):
    make_traces(8)
    judge = llm_judge(concurrency=2)
    server.latency = 0.3
    original = engine.RunControl.heartbeat

    def stolen(self):
        if server.count >= 2:  # another worker took the chunk over while ours was at work
            RunChunk.objects.filter(pk=self.chunk_id).update(holder="celery@other/boot/1-x")
        self.renewed = float("-inf")  # renew now: the theft is found at the next beat
        return original(self)

    monkeypatch.setattr(engine.RunControl, "heartbeat", stolen)
    run = services.do_start_run(judge, queue=False)
    job = services.run_inline(run)
    chunk = run.chunks.get()
    assert chunk.holder == "celery@other/boot/1-x" and chunk.status == RunChunk.Status.RUNNING
    assert job.done == 0 and not job.finished
    assert not StepLabel.objects.filter(judge=judge).exists()
    assert not JudgeTraceResult.objects.filter(judge=judge).exists()
    assert not ModelCall.objects.filter(run=run.run).exists()
    assert server.count < 8  # it stopped asking


def test_a_timed_out_call_is_counted_as_unknown_tokens_on_the_run_and_the_trace(make_traces, llm_judge, server):
    make_traces(2)
    judge = llm_judge(timeout_seconds=0.3, max_retries=1, concurrency=1)
    server.inject(Fault(delay=1.0))
    run, job = run_judge(judge)
    assert job.status == Job.Status.SUCCEEDED
    assert run.unknown_token_calls == 1 and run.requests == 3
    assert (run.prompt_tokens, run.completion_tokens) == (200, 40)  # the two answers; not a zero for the timeout
    timed_out = ModelCall.objects.get(run=run.run, http_status=None)
    assert timed_out.prompt_tokens is None and timed_out.completion_tokens is None
    assert JudgeTraceResult.objects.get(judge=judge, trace_id=timed_out.item).unknown_token_calls == 1


def test_llama_cpp_servers_get_the_schema_in_the_json_object_fallback(make_traces, llm_judge, server):
    make_traces(4)
    judge = llm_judge(concurrency=1)
    server.reject_json_schema = True
    server.json_object_needs_schema = True
    run, job = run_judge(judge)
    assert job.status == Job.Status.SUCCEEDED and job.failed == 0
    formats = [r.body["response_format"] for r in server.requests]
    assert formats[0]["type"] == "json_schema"
    # each trace's own schema (3 steps, the problem's 2-step skeleton when approved)
    assert all(f["type"] == "json_object" and f["schema"] in (protocol.output_schema("skeleton", 3, 2),
                                                             protocol.output_schema("skeleton", 3, 0))
               for f in formats[1:])
    assert judge.output_mode_resolved == "json_object" and run.output_mode == "json_object"
    # the next run starts with the form the server accepted
    run_judge(judge, force=True)
    assert [r.body["response_format"]["type"] for r in server.requests[len(formats):]] == ["json_object"] * 4


def test_the_prompt_example_is_made_of_placeholders(make_traces, llm_judge, server):
    make_traces(1)
    judge = llm_judge()
    text = services.preview_prompt(judge, judge.prompt_template, judge.study.traces.first())[-1]["content"]
    assert "eggs" not in text and protocol.EXAMPLE_REASON in text and "<step number>" in text


def test_a_verdict_copying_the_example_is_a_warning_on_the_run(make_traces, llm_judge, server):
    make_traces(3)
    judge = llm_judge()
    copied = json.dumps({"steps": [{"step": k, "verdict": "valid", "skeleton_refs": [], "confidence": 0.9,
                                    "reason": protocol.EXAMPLE_REASON} for k in (1, 2, 3)], "answer_correct": True})
    server.rule(lambda body: "of trace 1\n" in body["messages"][-1]["content"] + "\n", Fault(content=copied))
    run, job = run_judge(judge)
    assert job.status == Job.Status.SUCCEEDED
    assert run.notes == {protocol.COPIED_EXAMPLE_NOTE: 1}
    result = JudgeTraceResult.objects.get(judge=judge, trace__trace_id="t0001")
    assert result.warnings == ["the reason of steps 1, 2, 3 copies the prompt's example verbatim"]


def test_the_run_page_shows_a_partial_run_with_its_reasons_unknown_tokens_and_warnings(
        client, owner, make_traces, llm_judge, server):
    from django.urls import reverse
    from django.utils.html import escape

    make_traces(4)
    judge = llm_judge(max_retries=0, timeout_seconds=0.3, concurrency=1)
    _fail_traces(server, {3})
    server.inject(Fault(delay=1.0))  # the first request times out: trace 0 fails, its tokens unknown
    copied = json.dumps({"steps": [{"step": 1, "verdict": "valid", "skeleton_refs": [], "reason": "why, in a few words"}]})
    server.rule(lambda body: "of trace 2\n" in body["messages"][-1]["content"] + "\n", Fault(content=copied))
    run, job = run_judge(judge)
    assert job.status == Job.Status.PARTIAL
    client.force_login(owner)
    page = client.get(reverse("judge-run", args=[run.pk])).content.decode()
    assert '<span class="status partial">partial</span>' in page
    assert "2 of 4 traces failed; first reasons: timed out after 0.3s" in page and "context length exceeded" in page
    assert "unknown for 1 call" in page and "at least $" in page
    assert escape(f"{protocol.COPIED_EXAMPLE_NOTE}: 1 trace") in page
