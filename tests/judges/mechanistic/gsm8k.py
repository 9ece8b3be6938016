"""The bundled GSM8K model solutions, as the mechanistic tests read them:
one step a line, the final "A:" line dropped, and the skeleton's check
expressions taken from the ground truth's calculator annotations."""

from __future__ import annotations

import json
import re

from tests.data_paths import GSM8K_SOLUTIONS as GSM8K

MODELS = ("6b_finetuning", "6b_verification", "175b_finetuning", "175b_verification")


def gsm8k_rows() -> list[dict]:
    assert GSM8K.exists(), f"the bundled GSM8K data is missing: {GSM8K}"
    with GSM8K.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def split_steps(text: str) -> list[str]:
    lines = [line for line in text.split("\n") if line.strip()]
    if lines and re.match(r"\s*A:", lines[-1]):
        lines = lines[:-1]
    return lines


def skeleton_checks(ground_truth: str) -> list[str | None]:
    checks = []
    for line in split_steps(ground_truth):
        m = re.search(r"<<([^<>]*)>>", line)
        checks.append(m.group(1) if m else None)
    return checks
