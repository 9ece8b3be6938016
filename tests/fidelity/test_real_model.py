"""A fidelity run against the real SmolLM2-135M server (session fixture ``llama``): the plumbing --
every problem and variant answered, backward reconstructions, the report computed -- not the
model's arithmetic."""

from __future__ import annotations

import io
import itertools

import pytest

from annotation.importing.pipeline import import_stream
from annotation.models import Job
from fidelity.models import Output, Variant
from fidelity.report import report
from fidelity.running import do_start_run, run_inline
from fidelity.suites import do_create_suite
from subjects import services as subject_services
from tests.data_paths import GSM8K_SOLUTIONS

pytestmark = [pytest.mark.integration, pytest.mark.django_db]


def test_a_fidelity_run_on_smollm2_answers_every_item(study, llama):
    with GSM8K_SOLUTIONS.open("rb") as f:
        head = b"".join(itertools.islice(f, 2))
    assert import_stream(study, io.BytesIO(head), "gsm8k-solutions").committed
    subject, _ = subject_services.do_save_subject(study, {
        "name": "smollm2", "model": "smollm2", "base_url": llama, "temperature": 0.0, "seed": 0, "max_tokens": 48})
    axes = ["counterfactual", "backward"]
    suite = do_create_suite(study, "real", axes=axes).suite
    record = do_start_run(suite, subject, axes=axes, queue=False)
    job = run_inline(record)
    assert job.status in (Job.Status.SUCCEEDED, Job.Status.PARTIAL), job.error
    variants = Variant.objects.filter(suite=suite).count()
    assert Output.objects.filter(fid_run=record, role="forward").count() + job.failed >= 2 + variants
    assert Output.objects.filter(fid_run=record, role="backward").count() >= 1
    rep = report(record)
    assert rep.summary["consistency"] is not None and rep.counterfactual is not None
    assert rep.provenance["model"] == "smollm2"
