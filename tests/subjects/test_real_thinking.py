"""SmolLM2 made to think, on a real server (llama-cpp-python with SmolLM2-135M-Instruct, the session
fixture ``llama`` of tests/llama.py): a completions-API subject model whose chat template opens
``<think>`` (tests/runs/data/smollm2_thinking_chat_template.jinja). The model never writes ``</think>``
within 24 tokens, so every completion is a thought cut by max_tokens -- the unclosed, truncated thought
end to end: generation, import into the thinking channel, the regime's thought tokens, then an early-
answering run and a thinking-budget run that force answers from the cut thought. The model is tiny and
mostly wrong: this checks the plumbing, not its arithmetic."""

from __future__ import annotations

from pathlib import Path

import pytest

from annotation.models import Job, Step, Trace
from faithfulness.running import do_start_anytime, do_start_early, run_inline
from faithfulness.summaries import early_summary, thinking_budget_summary
from subjects import services
from tests.subjects.conftest import generate, problem_records

pytestmark = [pytest.mark.integration, pytest.mark.django_db]

TEMPLATE = (Path(__file__).resolve().parents[1] / "runs" / "data" / "smollm2_thinking_chat_template.jinja").read_text()


def test_an_unclosed_truncated_thought_from_a_real_server_end_to_end(study, do_import, llama):
    assert do_import(problem_records(3)).committed
    subject, _ = services.do_save_subject(study, {
        "name": "smol-think", "model": "smollm2", "base_url": llama, "api": "completions", "temperature": 0.0,
        "seed": 0, "max_tokens": 24, "concurrency": 1, "timeout_seconds": 120.0, "max_retries": 1,
        "chat_template": TEMPLATE, "eos_token": "<|im_end|>", "thinking": "on"})
    record, job = generate(subject)
    assert job.status == Job.Status.SUCCEEDED, job.error
    traces = list(Trace.objects.filter(study=study, model="smol-think"))
    assert len(traces) == 3
    for t in traces:
        print(repr(t.raw[:200]), t.n_thought_steps, t.thought_truncated, t.regime.get("thought_tokens"))
        assert t.meta["prompt_opened_thought"] is True and t.regime["thinking"] == "on"
        if "</think>" in t.raw:
            continue  # the model closed its thought after all: nothing truncated to check here
        assert t.meta["truncated"] is True  # cut by max_tokens
        assert t.thought_truncated and t.thought.strip() and not t.answer
        assert t.n_thought_steps >= 1
        assert Step.objects.filter(trace=t, channel="thought").count() == t.n_thought_steps
        assert 0 < t.regime["thought_tokens"]
    assert any(t.thought_truncated for t in traces), "SmolLM2 closed every thought within 24 tokens"
    # Forced answers from the cut thought: the prompt re-opens it (the template already did), closes it, cues.
    services.do_probe_subject_model(subject)
    early = do_start_early(subject, grid="0,0.5,1", mode="completions", queue=False)
    assert run_inline(early).status in (Job.Status.SUCCEEDED, Job.Status.PARTIAL)
    summary = early_summary(early)
    assert summary["traces"] >= 1 and early.points.filter(status="ok").exists()
    budgets = do_start_anytime(subject, grid="thinking:4,8,full", mode="completions", queue=False)
    assert run_inline(budgets).status in (Job.Status.SUCCEEDED, Job.Status.PARTIAL)
    s = thinking_budget_summary(budgets)
    assert len(s["acc"]) == 3 and s["thinking_tokens"][0] <= 4
