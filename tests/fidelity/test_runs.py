"""Suites of variants and fidelity runs through the run engine, against the fake server."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command

from annotation.models import Trace
from fidelity.models import FidelityRun, Output, Suite, Variant
from fidelity.report import report
from fidelity.running import do_start_run, run_inline
from fidelity.suites import do_create_suite

pytestmark = pytest.mark.django_db

ALL = ["perturbation", "counterfactual", "backward"]


def test_a_suite_stores_each_variant_as_a_problem_linked_to_its_original(problems):
    study = problems(3)
    made = do_create_suite(study, "s1", axes=ALL, seed=4)
    # 3 problems x (5 perturbations + 3 numeric counterfactuals); the year shift and the wordless problem skip
    assert made.created == 3 * 8 + 5  # the wordless problem still gets the five perturbations
    assert made.skipped["year: no year to shift"] == 4
    assert made.skipped["percent: no number to perturb"] == made.skipped["multiplier: no number to perturb"] == 1
    v = Variant.objects.get(suite=made.suite, original__problem_id="p1", strategy="multiplier")
    c = v.changes[0]
    assert v.original.statement[c["start"]:c["end"]] == c["old"]
    assert v.problem.statement == v.original.statement[:c["start"]] + c["new"] + v.original.statement[c["end"]:]
    # the gold is derived through the chain: 3 + 4 = 7 with one input multiplied
    old, new = int(c["old"]), int(c["new"])
    assert v.gold == Variant.Gold.DERIVED and v.problem.gold_answer == str(7 - old + new)
    assert made.derived == 9 and made.unknown == 0
    again = do_create_suite(study, "s1", axes=ALL, seed=99)
    assert again.created == 0 and again.existing == made.created  # idempotent, the suite keeps its seed


def test_a_counterfactual_without_a_chain_is_gold_unknown(study, do_import):
    from tests.conftest import jsonl
    do_import(jsonl({"kind": "problem", "problem_id": "q", "statement": "Bo has 4 pens and 5 cups. How many pens?",
                     "gold_answer": "4"}))
    made = do_create_suite(study, "s", axes=["counterfactual"])
    assert made.derived == 0 and made.unknown == 3
    assert set(Variant.objects.values_list("gold_reason", flat=True)) == {"no calculator chain to replay"}


def test_a_run_asks_every_problem_and_backward_for_originals(problems, subject, server):
    study = problems(3)
    suite = do_create_suite(study, "s", axes=ALL, problems="first:3").suite
    record = do_start_run(suite, subject, axes=ALL, problems="first:3", queue=False)
    job = run_inline(record)
    assert job.status == "succeeded", job.error
    n_variants = Variant.objects.filter(suite=suite).count()
    assert Output.objects.filter(fid_run=record, role="forward").count() == 3 + n_variants
    assert Output.objects.filter(fid_run=record, role="backward").count() == 3
    assert server.count == 3 + n_variants + 3
    t = Trace.objects.get(trace_id="fid/tiny/v1/p0")
    assert t.answer_correct is True and t.regime["subject_model"] == "tiny"
    rep = report(record)
    # the fake adds the question's numbers: every counterfactual answer is the derived gold
    assert rep.summary["aa"] == 1.0 and rep.summary["golds_derived"] == 9
    assert rep.counterfactual.overall.aa_strict_n == 9
    assert rep.overall["em"]["mean"] == 1.0
    assert {r.strategy for r in rep.perturbation} == {"Token Shuffle", "Distractor Injection", "Rephrasing",
                                                      "Semantic Noise", "Combined"}
    assert rep.perturbation == sorted(rep.perturbation, key=lambda r: (-r.robustness, r.strategy))
    # the distractor adds a year to the question, so the fake's sum (and EM) changes
    dis = next(r for r in rep.perturbation if r.strategy == "Distractor Injection")
    assert dis.var_em == 0.0 and dis.em_drop == 1.0
    assert rep.summary["consistency"] is not None and rep.summary["overall_reasoning"] is not None
    assert rep.provenance["semantic_similarity"].startswith("tfidf-cosine")


def test_the_command_runs_a_suite_and_prints_the_summary(problems, subject, capsys):
    study = problems(2)
    call_command("fidelity", "--study", study.name, "--model", "tiny", "--problems", "ids:1-2", "--wait")
    out = capsys.readouterr().out
    assert "counterfactual golds 6 derived, 0 unknown" in out
    assert "succeeded:" in out and "four-axis summary" in out and "Token Shuffle" in out
    assert FidelityRun.objects.count() == 1 and Suite.objects.get().name == "fidelity"


@pytest.mark.parametrize(("args", "message"), [
    (["--axes", "sideways"], "unknown axis 'sideways'"),
    (["--problems", "first:x"], "first:N needs a positive N"),
    (["--per-problem", "0"], "--per-problem: Ensure this value is greater than or equal to 1"),  # as REST says
])
def test_the_command_rejects_bad_arguments(problems, subject, args, message):
    study = problems(1)
    with pytest.raises(CommandError, match=message):
        call_command("fidelity", "--study", study.name, "--model", "tiny", *args)
    assert not Variant.objects.exists()


def test_the_llm_extractor_stores_forms_the_report_uses(problems, subject, server, capsys):
    import json as _json

    from judges import services as judge_services
    from tests.runs.fake_openai import Fault

    study = problems(2)
    call_command("fidelity", "--study", study.name, "--model", "tiny", "--axes", "backward", "--problems", "first:2",
                 "--wait")
    judge, _ = judge_services.do_save_judge(study, {"name": "extractor", "model": "m", "base_url": server.url})
    # the fake's solutions have 2 steps and the closing "The answer is N." line, which is the answer, not a
    # step (as on the review page); the extractor names the subject of each "Apples"
    forms = [{"subject": "Apples", "relation": "add", "object": "total", "values": ["5"]}] * 2
    server.rule(lambda body: "logical form" in str(body.get("messages")), Fault(content=_json.dumps({"forms": forms})))
    call_command("fidelity", "--study", study.name, "--model", "tiny", "--extract-forms", "extractor")
    assert "logical forms of 2 forward trace(s)" in capsys.readouterr().out
    out = Output.objects.filter(role="forward", forms__isnull=False).first()
    assert out.forms[0] == {"subject": "apples", "relation": "add", "object": "total", "values": ["5"]}
    rep = report(FidelityRun.objects.get())
    assert rep.provenance["logical_forms"].startswith("2 by llm:extractor v1")
    assert rep.items[0].metrics["forms"][0]["subject"] == "apples"


@pytest.mark.parametrize("max_tokens", [6, 512])
def test_a_chat_template_that_opens_the_thought_gives_fidelity_traces_split_as_generation_does(problems, study,
                                                                                                max_tokens):
    """The template ends its prompt with <think>: the completion starts mid-thought. Cut by max_tokens it is an
    unclosed thought with no answer (not an answer); complete, the backward prompt gets the answer channel's
    answer, not a number of the thought."""
    from subjects import services as subject_services
    from tests.runs.fake_thinking import FakeThinking
    from tests.subjects.test_thinking import THINKING_TEMPLATE

    problems(1)
    server = FakeThinking().start()
    try:
        subject, _ = subject_services.do_save_subject(study, {
            "name": "qwen", "model": "qwen3", "base_url": server.url, "max_retries": 1, "timeout_seconds": 5.0,
            "api": "completions", "chat_template": THINKING_TEMPLATE, "eos_token": "<|im_end|>", "thinking": "on",
            "max_tokens": max_tokens})
        suite = do_create_suite(study, "s", axes=["backward"], problems="first:1").suite
        record = do_start_run(suite, subject, axes=["backward"], problems="first:1", queue=False)
        job = run_inline(record)
        assert job.status == "succeeded", job.error
        prompts = [r.body["prompt"] for r in server.requests]
    finally:
        server.stop()
    assert prompts[0].endswith("<|im_start|>assistant\n<think>\n")
    t = Trace.objects.get(trace_id="fid/qwen/v1/p0")
    assert t.meta["prompt_opened_thought"] is True
    if max_tokens == 6:
        assert (t.thought, t.thought_truncated, t.n_thought_steps, t.answer) == (t.raw, True, 2, "")
    else:
        assert t.n_thought_steps >= 2 and not t.thought_truncated and "</think>" not in t.thought
        assert t.answer == "5" and t.answer_correct is True
        assert "Answer: 5\n" in prompts[-1]  # the backward prompt starts from the answer channel
