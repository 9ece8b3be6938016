"""Label and agreement exports say which channel every step is in."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command

from tests.scoring.thought_fixtures import seed_thinking

pytestmark = pytest.mark.django_db


def run(study, **opts) -> list[dict]:
    out = io.StringIO()
    call_command("export", study=study.name, stdout=out, stderr=io.StringIO(), **opts)
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_label_exports_carry_the_channel(study):
    seed_thinking(study)
    raw = run(study, what="labels")
    by_step = {(r["trace_id"], r["step"]): r["channel"] for r in raw}
    # r1 thinks for 5 steps, then answers in 2; r3 has no thought
    assert [by_step[("r1", s)] for s in range(1, 8)] == ["thought"] * 5 + ["answer"] * 2
    assert by_step[("r3", 1)] == "answer"
    final = run(study, what="labels", source="final")
    assert {(r["trace_id"], r["step"]): r["channel"] for r in final} == by_step


def test_agreement_steps_carry_the_channel(study):
    seed_thinking(study)
    # The rows are the steps both sources labelled (issue 23 #8): the judge against the final labels.
    rows = run(study, what="agreement-steps", reference="judge:mech", candidate="final")
    got = {(r["trace_id"], r["step"]): r["channel"] for r in rows}
    assert got[("r2", 3)] == "thought" and got[("r2", 4)] == "answer" and len(got) == 7 + 4 + 2
