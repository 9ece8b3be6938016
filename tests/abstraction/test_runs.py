"""Benchmark runs through the run engine against the fake OpenAI server: exact verdicts, the paired
table, resuming, the cache, the LLM checker, failures and the command."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from abstraction import services
from abstraction.core import generators as g
from abstraction.core import prompts
from abstraction.models import AbstractionRun, Item, Result
from annotation.models import Job, Trace
from judges.models import JudgeConfig
from subjects import services as subject_services
from tests.run_fixtures import generation_server, quick_retries_fixture  # noqa: F401 (fixtures)
from tests.runs.fake_openai import FakeOpenAI, Fault

pytestmark = pytest.mark.django_db




@pytest.fixture
def subject(study, server):
    made, _ = subject_services.do_save_subject(study, {"name": "tiny", "model": "tiny-model", "base_url": server.url,
                                                       "concurrency": 4, "max_retries": 1, "timeout_seconds": 5.0})
    return made


def _answer(server: FakeOpenAI, items, right) -> None:
    """Answer each item's final question with its gold when ``right(item)``, else with a wrong answer."""
    for item in items:
        content = f"Answer: The answer is {item.answer if right(item) else item.answer + 'X'}."
        final = f"Question: {item.question}\n\n"
        server.rule(lambda body, final=final: body.get("messages", [{}])[-1].get("content", "").endswith(final)
                    or body.get("messages", [{}])[-1].get("content", "").endswith(final + prompts.COT_CUE),
                    Fault(content=content))


def _run(subject, bench, **kwargs):
    record = services.do_start_run(subject, bench, queue=False, **kwargs)
    job = services.run_inline(record)
    record.refresh_from_db()
    return record, job


def test_a_dp_run_checks_every_answer_and_gives_the_paired_delta(study, subject, server):
    bench = services.do_generate_benchmark(study, categories=["EC", "SR"], per_sub_dataset=2)
    task = "fixed_len_chat_bit"
    items = list(services.select_items(bench, ["EC", "SR"]).filter(task=task))
    assert len(items) == 8
    # raw: both right; all: none; num: one (instance 0); op: both.
    _answer(server, items, lambda i: i.variant in ("raw", "op") or (i.variant == "num" and i.instance == 0))
    record, job = _run(subject, bench, categories=["EC", "SR"], per_sub_dataset=2)
    assert job.status == Job.Status.SUCCEEDED and job.total == 2 * (16 + 42)
    assert Result.objects.filter(item__benchmark=bench).count() == job.total
    rows = services.table(study, benchmark=bench, n_resamples=100)
    (row,) = rows
    assert row.model == "tiny (DP)" and row.checker == "deterministic"
    gd = row.result.sub_datasets
    assert (gd["fixed_len_chat_bit_raw_dataset"], gd["fixed_len_chat_bit_dataset"],
            gd["fixed_len_chat_bit_num_dataset"], gd["fixed_len_chat_bit_op_dataset"]) == (1.0, 0.0, 0.5, 1.0)
    # Every other task: the fake sums the numbers of nothing, "The answer is 0.": right where the gold is 0.
    others = Item.objects.filter(benchmark=bench).exclude(task=task)
    for sub in {i.sub_dataset for i in others}:
        golds = [i.answer for i in others if i.sub_dataset == sub]
        assert gd[sub] == sum(g == "0" for g in golds) / len(golds)
    s = row.result.stats
    with_mem = sum(gd[g.raw_name(t)] for t in g.PAIRED_TASKS) / 14
    for v in ("all", "num", "op"):
        assert s[f"delta_{v}"] == pytest.approx(with_mem - sum(gd[g.variant_name(t, v)] for t in g.PAIRED_TASKS) / 14)
    r = Result.objects.get(item__sub_dataset="fixed_len_chat_bit_dataset", item__instance=0, mode="dp")
    assert r.trace.model == "tiny" and r.trace.regime["prompting"] == "dp"
    assert r.trace.regime["remap_mode"] == "repo" and r.trace.regime["generator_version"] == bench.generator_version
    sent = next(s.body for s in server.requests if s.body["messages"][-1]["content"].endswith(
        f"Question: {r.item.question}\n\n"))
    assert sent["messages"][0]["content"] == prompts.SYSTEM_DP
    assert len(sent["messages"]) == 2 + 2 * len(r.item.examples)


def test_a_second_run_asks_only_for_what_is_missing_and_force_asks_the_cache(study, subject, server):
    bench = services.do_generate_benchmark(study, categories=["BC"], per_sub_dataset=2)
    _run(subject, bench, per_sub_dataset=1)
    assert len(server.requests) == 4
    record, job = _run(subject, bench, per_sub_dataset=2)
    assert job.total == 4 and len(server.requests) == 8  # the 4 answered items are not asked again
    record, job = _run(subject, bench, force=True)
    assert job.total == 8 and len(server.requests) == 16


def test_both_modes_are_two_requests_of_one_item_and_cot_gets_the_cue(study, subject, server):
    bench = services.do_generate_benchmark(study, categories=["NBR"], per_sub_dataset=1)
    record, job = _run(subject, bench, modes=("dp", "cot"))
    assert job.total == 12 and len(server.requests) == 24
    cot = [s.body for s in server.requests if s.body["messages"][0]["content"] == prompts.SYSTEM_COT]
    assert len(cot) == 12 and all(b["messages"][-1]["content"].endswith(prompts.COT_CUE) for b in cot)
    assert all("Hint: This is base" in b["messages"][-1]["content"] for b in cot)
    assert {r.model for r in services.table(study, benchmark=bench, n_resamples=0)} == {"tiny (DP)", "tiny (CoT)"}


def test_the_llm_checker_verdict_is_kept_beside_the_deterministic_one(study, subject, server):
    bench = services.do_generate_benchmark(study, categories=["BC"], per_sub_dataset=1)
    judge = JudgeConfig.objects.create(study=study, name="checker", model="judge-model", base_url=server.url,
                                       max_retries=1, timeout_seconds=5.0)
    server.rule(lambda body: "Judje result" in body["messages"][-1]["content"],
                Fault(content="The answer is correct."))
    record, job = _run(subject, bench, judge=judge)
    assert job.status == Job.Status.SUCCEEDED and record.checker == "llm"
    results = Result.objects.filter(item__benchmark=bench)
    assert results.count() == 4
    assert all(r.llm_correct is True and r.correct is True and r.det_correct is False for r in results)
    (row,) = services.table(study, benchmark=bench, n_resamples=0)
    assert row.checker == "llm" and row.result.stats["BC"] == 1.0


def test_a_checker_refused_by_its_server_stores_no_unchecked_verdict(study, subject, server):
    # The checker's server refuses the key (fatal): the chunk's answers are not stored as "incorrect" (a resumed
    # run would skip them); the run fails and asks them again later, the subject's answers from the cache.
    bench = services.do_generate_benchmark(study, categories=["BC"], per_sub_dataset=1)
    judge = JudgeConfig.objects.create(study=study, name="checker", model="judge-model", base_url=server.url,
                                       max_retries=1, timeout_seconds=5.0)
    server.rule(lambda body: "Judje result" in body["messages"][-1]["content"], Fault(status=401, message="no key"))
    record, job = _run(subject, bench, judge=judge)
    assert job.status == Job.Status.FAILED and "401" in job.error
    assert not Result.objects.filter(item__benchmark=bench).exists()
    subject_calls = [s for s in server.requests if "Judje result" not in s.body["messages"][-1]["content"]]
    assert len(subject_calls) == 4


def test_a_failing_server_fails_the_items_and_keeps_nothing_half_done(study, subject, server):
    bench = services.do_generate_benchmark(study, categories=["BC"], per_sub_dataset=1)
    server.rule(lambda body: True, Fault(status=500, message="boom"))
    record, job = _run(subject, bench)
    assert job.status == Job.Status.FAILED and "HTTP 500: boom" in job.error
    assert not Result.objects.filter(item__benchmark=bench).exists()
    assert len(record.failures) == 4


def test_the_command_generates_runs_and_prints_the_table(study, subject, server, settings):
    settings.CELERY_TASK_ALWAYS_EAGER = True
    out = io.StringIO()
    call_command("abstraction", study=study.name, model="tiny", categories=["BC", "SMA"], per_sub_dataset=1,
                 wait=True, stdout=out, stderr=io.StringIO())
    text = out.getvalue()
    assert "benchmark seed42-repo-paper (abstraction-gen/1, seed 42, remap repo, SMA paper)" in text
    assert "11 items to ask" in text and "succeeded: 11 of 11 items done" in text
    assert "tiny (DP) | 0.00 |" in text
    assert AbstractionRun.objects.count() == 1 and Trace.objects.filter(model="tiny").count() == 11
    assert Item.objects.filter(benchmark__name="seed42-repo-paper").count() == 9095 - 1319  # no GSM8K problems


def test_it_refuses_a_subject_model_of_the_completions_api(study, subject):
    subject.api = "completions"
    bench = services.do_generate_benchmark(study, categories=["BC"], per_sub_dataset=1)
    with pytest.raises(ValueError, match="api=chat"):
        services.do_start_run(subject, bench, queue=False)


def test_max_examples_sends_the_first_k_examples_and_keeps_its_results_apart(study, subject, server):
    bench = services.do_generate_benchmark(study, categories=["BC"], per_sub_dataset=1)
    _run(subject, bench, max_examples=3)
    assert all(len(s.body["messages"]) == 2 + 2 * 3 for s in server.requests)
    r = Result.objects.get(item__sub_dataset="chat_add_dataset")
    assert r.model == "tiny@3ex" and r.regime["max_examples"] == 3
    assert r.trace.regime["max_examples"] == 3
    _run(subject, bench)  # the full prompt is another row, not a resumed one
    assert {row.model for row in services.table(study, benchmark=bench, n_resamples=0)} == {"tiny@3ex (DP)",
                                                                                             "tiny (DP)"}


def test_a_thinking_subject_model_sends_its_thinking_settings_and_the_regime_records_them(study, server):
    subject, _ = subject_services.do_save_subject(study, {
        "name": "qwen", "model": "qwen3", "base_url": server.url, "concurrency": 2, "max_retries": 1,
        "timeout_seconds": 5.0, "thinking": "on", "thinking_switch": "both", "reasoning_effort": "low",
        "thinking_budget": 128})
    bench = services.do_generate_benchmark(study, categories=["EC"], per_sub_dataset=1)
    record, job = _run(subject, bench, categories=["EC"], per_sub_dataset=1, modes=["dp", "cot"])
    assert job.status == Job.Status.SUCCEEDED and server.count == 2 * job.total > 0  # both modes of each item
    for seen in server.requests:  # the openai client sends extra_body's keys at the top level
        body = seen.body
        assert body["chat_template_kwargs"] == {"enable_thinking": True}
        assert (body["reasoning_effort"], body["thinking_budget"]) == ("low", 128)
        assert body["messages"][-1]["content"].endswith(" /think")
    assert record.run.config["thinking"] == "on"
    regime = Trace.objects.filter(model__startswith="qwen").first().regime
    assert (regime["thinking"], regime["thinking_switch"], regime["reasoning_effort"],
            regime["thinking_budget"]) == ("on", "both", "low", 128)
