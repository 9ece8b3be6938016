"""What an LLM judge asks a server for, per trace: a schema that bounds the
answer to the trace's steps (so a grammar-constrained server stops when the
JSON closes), max_tokens derived from the steps unless the judge sets it, and
the run page listing the calls that failed with their errors."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from annotation.models import Job, Trace
from judges import protocol, services
from judges.models import JudgeConfig
from tests.conftest import jsonl
from tests.judges.conftest import run_judge, trace_records
from tests.runs.fake_openai import Fault

pytestmark = pytest.mark.django_db


def bounds(schema: dict) -> tuple[int, int, list[int]]:
    steps = schema["properties"]["steps"]
    step = steps["items"]["properties"]["step"]
    return steps["maxItems"], step["maximum"], step["enum"]


def test_the_schema_sent_for_a_three_step_trace_allows_three_entries_numbered_1_to_3(make_traces, llm_judge,
                                                                                     server):
    make_traces(2, steps=3)
    judge = llm_judge(mode="reference-free", output_mode="json_schema")
    _, job = run_judge(judge)
    assert job.status == Job.Status.SUCCEEDED
    for seen in server.requests:
        schema = seen.body["response_format"]["json_schema"]["schema"]
        assert bounds(schema) == (3, 3, [1, 2, 3]) and schema["properties"]["steps"]["items"]["properties"]["step"][
            "minimum"] == 1
        assert schema["properties"]["steps"]["items"]["properties"]["reason"]["maxLength"] == protocol.REASON_MAX_CHARS


def test_each_trace_gets_its_own_bounds_in_the_json_object_fallback_and_the_prompt(do_import, llm_judge, server):
    lines = [json.loads(line) for line in trace_records(2, steps=3).splitlines()]
    lines[-1]["steps"] += ["step 4 of trace 1", "step 5 of trace 1"]  # t0001 has 5 steps, t0000 3
    assert do_import(jsonl(*lines)).committed
    server.reject_json_schema = True  # llama-cpp-python: json_object with the schema instead
    judge = llm_judge(mode="reference-free", concurrency=1)
    _, job = run_judge(judge)
    assert job.status == Job.Status.SUCCEEDED
    by_trace: dict[str, dict] = {}
    for seen in server.requests:
        fmt = seen.body["response_format"]
        if fmt["type"] != "json_object":
            continue
        n = seen.body["messages"][-1]["content"].count("\nStep ")
        by_trace[n] = fmt["schema"]
        # json_object: the same schema is also in the prompt
        assert json.dumps(fmt["schema"]) in seen.body["messages"][-1]["content"]
    assert bounds(by_trace[3]) == (3, 3, [1, 2, 3]) and bounds(by_trace[5]) == (5, 5, [1, 2, 3, 4, 5])


def test_max_tokens_is_derived_from_the_steps_when_unset(make_traces, llm_judge, server):
    make_traces(2, steps=3)
    judge = llm_judge()
    assert judge.max_tokens is None
    run, _ = run_judge(judge)
    assert {seen.body["max_tokens"] for seen in server.requests} == {protocol.derived_max_tokens(3)} == {640}
    assert run.config["max_tokens"] is None and run.config["max_tokens_effective"] == [640, 640]


def test_the_judges_own_max_tokens_wins(make_traces, llm_judge, server):
    make_traces(2, steps=3)
    judge = llm_judge(max_tokens=300)
    run, _ = run_judge(judge)
    assert {seen.body["max_tokens"] for seen in server.requests} == {300}
    assert run.config["max_tokens_effective"] == [300, 300]


def test_setting_max_tokens_is_a_new_version_and_unsetting_it_another(llm_judge, study):
    judge = llm_judge()
    judge, _ = services.do_save_judge(study, {"max_tokens": 512}, judge=judge)
    assert (judge.max_tokens, judge.version) == (512, 2)
    judge, _ = services.do_save_judge(study, {"max_tokens": None}, judge=judge)
    assert (judge.max_tokens, judge.version) == (None, 3)


def test_the_cache_key_covers_the_schema(make_traces, llm_judge, server, monkeypatch):
    # json_schema: the schema is not in the prompt, only in response_format
    make_traces(2)
    judge = llm_judge(output_mode="json_schema")
    run_judge(judge)
    run2, _ = run_judge(judge)
    assert (run2.requests, run2.cache_hits) == (0, 2)
    monkeypatch.setattr(protocol, "REASON_MAX_CHARS", 120)
    run3, _ = run_judge(judge)
    assert (run3.requests, run3.cache_hits) == (2, 0)


def test_the_cli_sets_and_unsets_max_tokens(study, server):
    from django.core.management import call_command

    call_command("add_judge", "--study", study.name, "--name", "smol", "--base-url", server.url, "--model", "m",
                 "--max-tokens", "300")
    judge = JudgeConfig.objects.get(study=study, name="smol")
    assert judge.max_tokens == 300
    call_command("add_judge", "--study", study.name, "--name", "smol", "--base-url", server.url, "--model", "m",
                 "--max-tokens", "auto")
    judge.refresh_from_db()
    assert judge.max_tokens is None and judge.version == 2


def test_the_run_page_lists_each_failed_call_with_its_error(client, owner, make_traces, llm_judge, server):
    make_traces(3)
    judge = llm_judge(max_retries=1, concurrency=1, mode="reference-free")
    server.rule(lambda body: "trace 1\n" in body["messages"][-1]["content"] + "\n",
                Fault(status=503, message="the model is <loading>"))
    server.inject(Fault(content="I am not JSON"))
    run, job = run_judge(judge)
    assert job.status == Job.Status.PARTIAL
    client.force_login(owner)
    page = client.get(reverse("judge-run", args=[run.pk])).content.decode()
    calls = page[page.index('id="run-calls"'):]
    assert "3 calls without a valid answer" in calls
    assert calls.count("HTTP 503: the model is &lt;loading&gt;") == 2 and "<loading>" not in calls  # escaped
    assert "malformed answer" in calls or "no JSON object in the answer" in calls
    t0001 = Trace.objects.get(trace_id="t0001")
    assert f'<a href="{reverse("trace", args=[t0001.pk])}">t0001</a>' in calls
    assert "<td class=\"num\">503</td>" in calls and "<td class=\"num\">2</td>" in calls  # status and attempt 2
    # the effective max tokens of the run
    assert "640, derived from each trace's steps" in page


def test_failed_calls_are_paginated_and_polled_as_a_fragment(client, owner, make_traces, llm_judge, server):
    make_traces(14)
    judge = llm_judge(max_retries=1, concurrency=2, mode="reference-free")
    server.rule(lambda body: True, Fault(status=500, message="down"))
    run, job = run_judge(judge)
    assert job.status == Job.Status.FAILED
    client.force_login(owner)
    url = reverse("judge-run", args=[run.pk])
    page = client.get(url).content.decode()
    first = page[page.index('id="run-calls"'):]
    assert "28 calls without a valid answer" in first and "page 1 of 2" in first
    assert first.count("HTTP 500: down") == 25
    fragment = client.get(url, {"part": "calls", "calls": 2}, headers={"HX-Request": "true"}).content.decode()
    assert fragment.lstrip().startswith('<section class="card" id="run-calls"') and "<html" not in fragment
    assert fragment.count("HTTP 500: down") == 3 and "page 2 of 2" in fragment
    # without htmx the same link is a whole page
    assert "<html" in client.get(url, {"calls": 2}).content.decode()


def test_the_run_page_uses_a_constant_number_of_queries(client, owner, make_traces, llm_judge, server,
                                                        django_assert_max_num_queries):
    make_traces(2)
    judge = llm_judge(max_retries=0, mode="reference-free")
    server.rule(lambda body: True, Fault(status=500, message="down"))
    small, _ = run_judge(judge)
    client.force_login(owner)
    with django_assert_max_num_queries(40) as few:
        client.get(reverse("judge-run", args=[small.pk]))
    make_traces(20)
    big, _ = run_judge(judge, force=True)
    assert big.run.calls.count() > small.run.calls.count()
    with django_assert_max_num_queries(len(few.captured_queries)):
        client.get(reverse("judge-run", args=[big.pk]))


def test_a_judge_without_max_tokens_shows_the_rule_on_its_page(client, owner, llm_judge):
    judge = llm_judge()
    client.force_login(owner)
    page = client.get(reverse("judge", args=[judge.pk])).content.decode()
    assert "derived per trace (256 + 128 per step, at most 4,096)" in page
    assert JudgeConfig.objects.get(pk=judge.pk).max_tokens is None


def test_the_web_form_and_the_api_leave_max_tokens_unset_or_set_it(client, study, owner):
    from rest_framework.authtoken.models import Token
    from rest_framework.test import APIClient

    client.force_login(owner)
    data = {"name": "local", "model": "qwen", "base_url": "http://127.0.0.1:8080/v1", "mode": "reference-free",
            "output_mode": "auto", "temperature": 0, "max_tokens": "", "concurrency": 4, "max_retries": 3,
            "timeout_seconds": 60, "price_input_per_mtok": 0, "price_output_per_mtok": 0}
    assert client.post(reverse("judge-create", args=[study.pk]), data).status_code == 302
    judge = JudgeConfig.objects.get(study=study, name="local")
    assert judge.max_tokens is None
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=owner).key}")
    body = api.patch(f"/api/v1/judges/{judge.pk}/", {"max_tokens": 700}, format="json").json()
    assert (body["max_tokens"], body["version"]) == (700, 2)
    body = api.patch(f"/api/v1/judges/{judge.pk}/", {"max_tokens": None}, format="json").json()
    assert (body["max_tokens"], body["version"]) == (None, 3)
    assert api.patch(f"/api/v1/judges/{judge.pk}/", {"max_tokens": 0}, format="json").status_code == 400
