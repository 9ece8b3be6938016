"""A scanner run where some answers cannot be read (issue 29, L2): an answer cut inside its code
fence (once ``ValueError: substring not found``) or nested past the recursion limit (once a
``RecursionError``) fails its own trace as malformed; the other traces are answered and the run
goes on (it failed whole before: 0/61, 0/62)."""

from __future__ import annotations

import pytest

from annotation.models import Job
from search import scanners
from search.models import ScanResult
from tests.runs.fake_openai import Fault

pytestmark = pytest.mark.django_db

CUT = '```json\n{"answer": "yes", "steps": [1'
DEEP = '{"answer": "yes", "steps": ' + "[" * 50_000 + "]" * 50_000 + "}"


@pytest.fixture(autouse=True)
def quick_retries(settings):
    settings.RUN_RETRY_BASE_SECONDS = 0.01
    settings.RUN_RETRY_MAX_SECONDS = 0.05


def _prompt(body: dict) -> str:
    return body["messages"][-1]["content"] if "messages" in body else ""


def test_unreadable_answers_fail_their_traces_only(scanner, traces, server):
    server.rule(lambda body: "6 apples" in _prompt(body), Fault(content=CUT))  # t2
    server.rule(lambda body: "We verify the sum" in _prompt(body), Fault(content=DEEP))  # t4
    record = scanners.do_start_scan(scanner, queue=False)
    job = scanners.run_inline(record)
    answered = {r.trace.trace_id for r in ScanResult.objects.select_related("trace") if r.answer is not None}
    assert answered == {"t1", "t3"}
    assert job.status == Job.Status.PARTIAL and job.done == 4
    assert scanners.counts(scanner)["failed"] == 2
