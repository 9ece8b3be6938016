"""Step importance on a real server (llama-cpp-python with SmolLM2-135M-Instruct, the session fixture ``llama``
of tests/llama.py), the model made to think by a chat template that opens ``<think>``: generation of 2
problems, the probe, a step-importance run (resamples from every cut of the thought at temperature 0.7, the
forced answers where they never close it), the measures and the export. The model is tiny and mostly wrong:
this checks the plumbing, not the numbers."""

from __future__ import annotations

import csv
import io

import pytest
from django.core.management import call_command

from anchors.models import Rollout, StepImportance
from anchors.running import do_start_importance, run_inline
from annotation.models import Job, Trace
from subjects import services
from tests.subjects.conftest import generate, problem_records
from tests.subjects.test_real_thinking import TEMPLATE

pytestmark = [pytest.mark.integration, pytest.mark.django_db]


def test_the_whole_chain_runs_on_smollm2(study, do_import, llama):
    assert do_import(problem_records(2)).committed
    subject, _ = services.do_save_subject(study, {
        "name": "smol-think", "model": "smollm2", "base_url": llama, "api": "completions", "temperature": 0.0,
        "seed": 0, "max_tokens": 24, "concurrency": 1, "timeout_seconds": 120.0, "max_retries": 1,
        "chat_template": TEMPLATE, "eos_token": "<|im_end|>", "thinking": "on"})
    assert generate(subject)[1].status == Job.Status.SUCCEEDED
    traces = list(Trace.objects.filter(study=study, model="smol-think", n_thought_steps__gt=0))
    assert traces, "SmolLM2 wrote no thought"
    services.do_probe_subject_model(subject)
    record = do_start_importance(subject, samples=2, temperature=0.7, mode="completions", queue=False)
    job = run_inline(record)
    assert job.status in (Job.Status.SUCCEEDED, Job.Status.PARTIAL), job.error
    record.refresh_from_db()
    ok = record.rollouts.filter(status="ok")
    assert ok.filter(kind=Rollout.Kind.RESAMPLE).exists() and ok.filter(kind=Rollout.Kind.FORCED).exists()
    # each sample its own seed: two samples of one cut are two requests, not one cached answer
    assert len(set(ok.filter(kind=Rollout.Kind.RESAMPLE).values_list("seed", flat=True))) == 2
    rows = StepImportance.objects.filter(irun=record)
    assert rows.exists() and all(r.n >= 1 for r in rows)
    out = io.StringIO()
    call_command("export", "--study", study.name, "--what", "step-importance", "--format", "csv", stdout=out)
    exported = list(csv.DictReader(io.StringIO(out.getvalue())))
    assert len(exported) == rows.count() and {r["source"] for r in exported} == {f"run:{record.pk}"}
