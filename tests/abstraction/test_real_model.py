"""A small abstraction run against a real model: llama-cpp-python's server with SmolLM2-135M-Instruct (the
session fixture ``llama``). The model is tiny and mostly wrong: this checks the plumbing -- every item
accounted for, the prompt of §5 accepted by a real chat template, the regime recorded, the table computed --
not its abstraction skills."""

from __future__ import annotations

import pytest

from abstraction import services
from abstraction.models import Result
from annotation.models import Job
from subjects import services as subject_services

pytestmark = [pytest.mark.integration, pytest.mark.django_db]


def test_a_dp_probe_on_smollm2_checks_every_item(study, llama):
    subject, _ = subject_services.do_save_subject(study, {"name": "smollm2", "model": "smollm2", "base_url": llama,
                                                          "max_tokens": 24, "concurrency": 1, "timeout_seconds": 120})
    bench = services.do_generate_benchmark(study, categories=["BC"], per_sub_dataset=1)
    record = services.do_start_run(subject, bench, modes=("dp", "cot"), per_sub_dataset=1, max_examples=2,
                                 queue=False)
    job = services.run_inline(record)
    assert job.status in (Job.Status.SUCCEEDED, Job.Status.PARTIAL), job.error
    results = Result.objects.filter(item__benchmark=bench)
    assert job.total == 4 and results.count() == 2 * (job.total - job.failed)
    r = results.filter(mode="dp").select_related("trace").first()
    assert r.trace.regime["max_examples"] == 2 and r.trace.regime["prompting"] == "dp"
    assert r.trace.regime["model"] and r.trace.regime["max_tokens"] == 24
    rows = services.table(study, benchmark=bench, n_resamples=100)
    assert sorted(r.model for r in rows) == ["smollm2@2ex (CoT)", "smollm2@2ex (DP)"]
    assert all(r.checker == "deterministic" and 0.0 <= r.result.stats["BC"] <= 1.0 for r in rows)
