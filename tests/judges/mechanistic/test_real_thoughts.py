"""The verifier on real thought steps (issue 30): a hand-checked sample.

tests/data/thinking/verifier_invalid_sample.jsonl holds every thought step that the verifier of
issue 30's start (``flagged_before``) or of its end called invalid, in the DeepSeek-R1-Distill
(MATH) and gpt-oss-120b (GSM8K) thoughts of ../shared/data/reasoning-traces/, cut into steps by
benchmarks/verifier_real_text.py's ``thought_steps``; ``hand`` is a reading of each step by hand:
"error" when a claim in it is false as written and as meant, "misread" when none is (the verifier
read notation as arithmetic). The precision of "invalid" is computed here with the current verifier.
"""

from __future__ import annotations

import json

from reasonlib.verifier.verdicts import check_step
from tests.data_paths import ROOT

SAMPLE = ROOT / "tests" / "data" / "thinking" / "verifier_invalid_sample.jsonl"


def _sample() -> list[dict]:
    with SAMPLE.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def test_the_sample_is_the_one_read_by_hand():
    rows = _sample()
    assert len(rows) == 106
    assert {r["hand"] for r in rows} == {"error", "misread"}
    # Before issue 30 the verifier flagged 55 of these steps and 17 were errors: precision 0.31.
    before = [r for r in rows if r["flagged_before"]]
    assert (len(before), sum(r["hand"] == "error" for r in before)) == (55, 17)


def test_invalid_is_right_at_least_four_times_in_five():
    rows = _sample()
    flagged = [r for r in rows if check_step(r["text"]).verdict == "invalid"]
    errors = [r for r in flagged if r["hand"] == "error"]
    assert flagged
    precision = len(errors) / len(flagged)
    assert precision >= 0.8, [(r["trace"], r["step"], r["note"]) for r in flagged if r["hand"] != "error"]


def test_the_errors_read_by_hand_are_still_caught():
    # Recall within the sample: a reader that stops flagging the real errors
    # would raise the precision by saying nothing.
    rows = _sample()
    errors = [r for r in rows if r["hand"] == "error"]
    missed = [(r["trace"], r["step"]) for r in errors if check_step(r["text"]).verdict != "invalid"]
    assert len(missed) <= len(errors) // 10, missed
