"""Checking an answer (spec §7): the deterministic checker and the published LLM checker's prompt.

Deterministic [I, from the repository's own deterministic checks]: extract "The answer is X" (the
repository's regex), drop characters outside ``[\\w\\s.,{}\\[\\]-]``, strip a trailing '.', then strict
string equality with the gold; for numeric golds (BC, SMA, square root, MA) also the last number of the
extracted answer, thousands commas removed, compared with the gold after both are truncated (not
rounded) to two decimals, as the LLM checker is told to do."""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import ROUND_DOWN, Decimal, InvalidOperation

CHECKER_VERSION = "abstraction-check/1"
_ANSWER = re.compile(r"The answer is (.*?)(?:\.\s|\.\n|$)", re.DOTALL)
_KEEP = re.compile(r"[^\w\s.,{}\[\]-]")
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?|-?\.\d+")
NUMERIC_SUBS = ("chat_add_dataset", "chat_sub_dataset", "chat_mul_dataset", "chat_div_dataset",
                "chat_square_dataset", "dataset_gsm8k")

JUDGE_SYSTEM = """You are a helpful AI assistant. You will use your coding and language skills to verify the answer.
You are given:
1. A problem.
2. A reply with the answer to the problem.
3. A ground truth answer.
Please do the following:
1. Extract the answer in the reply: "The answer is <answer extracted>". When extracting, please adhere to the following rules:
    - If the answer is a decimal, extract only up to two decimal places (e.g., 4.1234 becomes 4.12).
    - If the answer contains commas as thousands separators, remove them.
    - If the answer includes units, remove the units.
2. Check whether the answer in the reply matches the ground truth answer. When comparing decimal numbers, truncate both the extracted answer and the ground truth answer to two decimal places before comparison.
3. After everything is done, please choose a reply from the following options (Only one):
   - "The answer is correct."
   - "The answer is approximated but should be correct. Correct Answer: <ground truth answer> | Answer extracted: <answer extracted>."
   - "The answer is incorrect. Correct Answer: <ground truth answer> | Answer extracted: <answer extracted>."
   - "The reply doesn't contain an answer."
"""  # noqa: E501 - verbatim
JUDGE_USER = "Problem: {problem}\n\nReply: {reply}\n\nGround truth answer: {answer}\n\nJudje result: "


@dataclass(frozen=True)
class Verdict:
    extracted: str | None
    correct: bool


def extract(text: str) -> str | None:
    """The answer after the last "The answer is", cleaned as the repository cleans it."""
    found = _ANSWER.findall(text or "")
    if not found:
        return None
    answer = _KEEP.sub("", found[-1]).strip()
    return answer[:-1] if answer.endswith(".") else answer


def truncate2(text: str) -> Decimal | None:
    try:
        value = Decimal(text.replace(",", ""))
    except (InvalidOperation, ValueError):
        return None
    if not value.is_finite():
        return None
    return value.quantize(Decimal("0.01"), rounding=ROUND_DOWN)


def is_numeric(sub_dataset: str, category: str) -> bool:
    return category in ("BC", "SMA", "MA") or sub_dataset in NUMERIC_SUBS


def check(output: str, gold: str, *, numeric: bool) -> Verdict:
    answer = extract(output)
    if answer is None:
        return Verdict(None, False)
    if answer == gold.strip():
        return Verdict(answer, True)
    if numeric:
        numbers = _NUMBER.findall(answer)
        want = truncate2(gold.strip())
        got = truncate2(numbers[-1]) if numbers else None
        if want is not None and got is not None and got == want:
            return Verdict(answer, True)
    return Verdict(answer, False)


def judge_messages(reply: str, answer: str, problem: str = "") -> list[dict[str, str]]:
    return [{"role": "system", "content": JUDGE_SYSTEM},
            {"role": "user", "content": JUDGE_USER.format(problem=problem, reply=reply, answer=answer)}]


def judge_verdict(text: str) -> bool:
    low = (text or "").lower()
    return "the answer is correct" in low or "the answer is approximated but should be correct" in low
