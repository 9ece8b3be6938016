"""The stored form of each step's claim keys (reasonlib.verifier.stored_claims): one text per trace that
reads back as the keys a fresh parse gives."""

from __future__ import annotations

from pathlib import Path

import pytest

from reasonlib.verifier.corrections import claim_keys, keys_of
from reasonlib.verifier.stored_claims import decode, encode
from reasonlib.verifier.verdicts import find_claims

GSM8K = Path(__file__).resolve().parents[3] / "annotation" / "demo_data" / "gsm8k" / "example_model_solutions.jsonl"

STEPS = [
    "Janet has 16 eggs.",
    "She keeps 16 - 3 - 4 = 8.",
    "16 - 3 = <<16-3=13>>13 and 13 * 2 = 26",
    "So 2 * 3 = <<2*3=6>>7 cups",
    "",
    "10 / 0 = 5",
    "\\frac{3}{4} \\times 8 = 6, and 1,200 / 4 = $300",
]


def test_keys_of_the_parsed_claims_are_the_keys_of_the_text():
    for text in STEPS:
        assert keys_of(find_claims(text)) == claim_keys(text)


@pytest.mark.parametrize("steps", [STEPS, STEPS[:1], ["2 + 2 = 4"], ["", ""], ["1 + 1 = 3", "x"]])
def test_the_text_reads_back_as_the_keys_of_every_step(steps):
    keys = [claim_keys(t) for t in steps]
    assert decode(encode(keys)) == keys
    assert encode(keys).count("\n") == len(steps) - 1


def test_the_demo_solutions_keys_read_back_unchanged():
    import json

    lines = GSM8K.read_text(encoding="utf-8").splitlines()[:300]
    steps = [s for line in lines for v in json.loads(line).values() if isinstance(v, dict)
             for s in v["solution"].split("\n")]
    keys = [claim_keys(t) for t in steps]
    assert sum(1 for w, _ in keys if w) > 20 and sum(1 for _, r in keys if r) > 500  # the data has both kinds
    assert decode(encode(keys)) == keys
