"""The mechanistic judge stores each step's claim keys as it parses a trace (annotation.TraceClaims), and
what it stores is what a fresh parse of the steps gives."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from annotation import stored_claims
from annotation.importing.pipeline import import_stream
from annotation.models import Step, Trace, TraceClaims
from judges import services
from reasonlib.verifier.corrections import claim_keys
from reasonlib.verifier.stored_claims import CLAIMS_VERSION, decode
from tests.judges.conftest import run_judge

pytestmark = pytest.mark.django_db

GSM8K = Path(__file__).resolve().parents[2] / "annotation" / "demo_data" / "gsm8k" / "example_model_solutions.jsonl"


@pytest.fixture
def gsm8k(study):
    lines = GSM8K.read_bytes().splitlines(keepends=True)[:40]
    report = import_stream(study, io.BytesIO(b"".join(lines)), "gsm8k-solutions")
    assert report.committed and report.traces_created == 160
    return study


def _fresh(study) -> dict[int, list]:
    out: dict[int, list] = {}
    for trace_id, text in Step.objects.filter(trace__study=study).order_by("trace_id", "index").values_list(
            "trace_id", "text"):
        out.setdefault(trace_id, []).append(claim_keys(text))
    return out


def test_the_judge_stores_the_keys_a_fresh_parse_gives_for_every_step(gsm8k):
    run_judge(services.ensure_mechanistic(gsm8k))
    stored = {row.trace_id: row for row in TraceClaims.objects.filter(trace__study=gsm8k)}
    fresh = _fresh(gsm8k)
    assert set(stored) == set(Trace.objects.filter(study=gsm8k).values_list("pk", flat=True)) == set(fresh)
    assert {row.version for row in stored.values()} == {CLAIMS_VERSION}
    assert {pk: decode(row.steps) for pk, row in stored.items()} == fresh
    assert any(w for keys in fresh.values() for w, _ in keys)  # some steps get a claim wrong
    # The reader gives the same, with each trace's thought length.
    assert {pk: keys for pk, _, keys in stored_claims.read(list(fresh))} == fresh


def test_a_rerun_keeps_current_claims_and_replaces_those_of_an_older_parser(gsm8k):
    judge = services.ensure_mechanistic(gsm8k)
    run_judge(judge)
    first, second = sorted(TraceClaims.objects.filter(trace__study=gsm8k).values_list("pk", flat=True))[:2]
    TraceClaims.objects.filter(pk=first).update(version=CLAIMS_VERSION - 1, steps="stale")
    TraceClaims.objects.filter(pk=second).update(steps="kept as it is")
    # Neither is read while it is stale: an old version, and a text that is not one line per step.
    assert {pk for pk, _, _ in stored_claims.read([first, second])} == set()
    run_judge(judge, force=True)
    rows = dict(TraceClaims.objects.filter(pk__in=[first, second]).values_list("pk", "steps"))
    assert decode(rows[first]) == _fresh(gsm8k)[first]
    assert rows[second] == "kept as it is"  # the current version is not written again
    assert TraceClaims.objects.get(pk=first).version == CLAIMS_VERSION


def test_the_claims_go_with_their_trace(gsm8k):
    run_judge(services.ensure_mechanistic(gsm8k))
    trace = Trace.objects.filter(study=gsm8k).first()
    trace.delete()
    assert not TraceClaims.objects.filter(pk=trace.pk).exists()
    assert TraceClaims.objects.filter(trace__study=gsm8k).count() == 159
