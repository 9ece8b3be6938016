"""What a judge run adds to the run engine (issue 15): the reasons of failed traces from their results,
a trace's unknown tokens, the schema in the json_object fallback, a prompt example that cannot leak,
and the run page. The engine's own promises (statuses, progress, a displaced holder, unknown tokens on
the run) are tested with stub kinds in tests/runs/test_run_engine.py."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command

from annotation.models import Job
from judges import protocol, services
from judges.models import JudgeTraceResult
from runs.models import ModelCall
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


def test_a_run_where_every_trace_failed_gives_a_reason_of_a_trace(make_traces, llm_judge, server):
    make_traces(4)
    judge = llm_judge(max_retries=0)
    _fail_traces(server, {0, 1, 2, 3})
    _run, job = run_judge(judge)
    assert job.status == Job.Status.FAILED and job.error.startswith("every trace failed; for example: HTTP 400")


def test_a_timed_out_call_is_counted_as_unknown_tokens_on_the_trace(make_traces, llm_judge, server):
    make_traces(2)
    judge = llm_judge(timeout_seconds=0.3, max_retries=1, concurrency=1)
    server.inject(Fault(delay=1.0))
    run, job = run_judge(judge)
    assert job.status == Job.Status.SUCCEEDED and run.unknown_token_calls == 1
    timed_out = ModelCall.objects.get(run=run.run, http_status=None)
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
