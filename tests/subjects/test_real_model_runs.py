"""Generation and judging against a real model: llama-cpp-python's server with
SmolLM2-135M-Instruct (the session fixture ``llama`` of tests/llama.py; CI pass
2 sets it up with bin/setup-llama). The model is tiny and mostly wrong: these
tests check the plumbing -- every item accounted for, the regime recorded, the
runs finishing -- not its arithmetic."""

from __future__ import annotations

import io
import itertools

import pytest

from annotation.importing.pipeline import import_stream
from annotation.importing.regime import REGIME_KEYS
from annotation.models import Job, Problem, Trace
from judges import services as judge_services
from judges.models import JudgeTraceResult
from subjects import services
from subjects.models import Generation
from tests.data_paths import GSM8K_SOLUTIONS
from tests.subjects.conftest import generate

pytestmark = [pytest.mark.integration, pytest.mark.django_db]

FINISHED = (Job.Status.SUCCEEDED, Job.Status.PARTIAL)


def _import_gsm8k(study, n_problems: int) -> None:
    """The first ``n_problems`` bundled GSM8K problems with their four models' solutions."""
    with GSM8K_SOLUTIONS.open("rb") as f:
        head = b"".join(itertools.islice(f, n_problems))
    report = import_stream(study, io.BytesIO(head), "gsm8k-solutions")
    assert report.committed, report.rejected


def test_a_generation_run_gives_every_problem_its_trace_with_the_regime(study, llama):
    _import_gsm8k(study, 20)
    subject, _ = services.do_save_subject(study, {
        "name": "smollm2", "model": "smollm2", "base_url": llama, "temperature": 0.0, "seed": 0, "max_tokens": 192,
        "concurrency": 1, "timeout_seconds": 120.0, "max_retries": 1})
    record, job = generate(subject)
    print(job.status, job.done, job.failed, record.run.requests, record.run.completion_tokens)
    assert job.status == Job.Status.SUCCEEDED, job.error
    traces = Trace.objects.filter(study=study, model="smollm2")
    assert traces.count() == Problem.objects.filter(study=study).count() == 20
    for trace in traces:
        assert set(REGIME_KEYS) <= set(trace.regime)
        assert trace.regime["temperature"] == 0.0 and trace.regime["seed"] == 0 and trace.regime["max_tokens"] == 192
        assert trace.regime["model"] and trace.regime["base_url_host"].startswith("127.0.0.1:")
        assert trace.raw.strip()
    assert Generation.objects.filter(trace__in=traces).count() == 20
    # A second run asks nothing: every problem already has its sample.
    again, job = generate(subject, scope="missing")
    assert job.status == Job.Status.SUCCEEDED and again.run.requests == 0
    assert Trace.objects.filter(study=study, model="smollm2").count() == 20


def test_a_40_trace_reference_free_judge_run_with_default_settings_finishes(study, llama):
    _import_gsm8k(study, 10)  # 10 problems x 4 models = 40 traces
    judge, _ = judge_services.do_save_judge(study, {"name": "smollm2", "model": "smollm2", "base_url": llama,
                                                    "mode": "reference-free"})
    run = judge_services.do_start_run(judge, queue=False)
    job = judge_services.run_inline(run)
    run.refresh_from_db()
    print(job.status, job.done, job.failed, run.requests, run.cache_hits)
    assert job.status in FINISHED, job.error
    assert job.done + job.failed == job.total == 40
    assert JudgeTraceResult.objects.filter(judge=judge).count() == 40
