"""Tests for reasonlib.answers (pure Python; run with -p no:django)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from reasonlib import answers
from reasonlib.answers import (
    answer_only,
    check_answer,
    extract_answer,
    normalize_answer,
)

# --------------------------------------------------------------------------
# answer_only
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("A: 18", "18"),
        ("  A: 1,200  ", "1,200"),
        ("#### 18", "18"),
        ("####18", "18"),
        ("The answer is 18.", "18"),
        ("the answer is: 18", "18"),
        ("So the answer is 18", "18"),
        ("Therefore, the final answer is 3.5.", "3.5"),
        ("The answer is $\\boxed{18}$", "18"),
        ("The answer is $\\boxed{18}$.", "18"),
        ("\\boxed{18}", "18"),
        ("$\\boxed{\\frac{1}{2}}$", "\\frac{1}{2}"),
        ("\\[ \\boxed{18} \\]", "18"),
        ("Answer: 18", "18"),
        ("**Answer:** 18", "18"),
        ("**Final Answer:** $18$", "18"),
        ("Final Answer: The final answer is $5$. I hope it is correct.", "5"),
        ("<Answer>18</Answer>", "18"),
        ("<answer> 18 </ANSWER>", "18"),
        ("The answer is 2**10.", "2**10"),
    ],
)
def test_answer_only_positive(line: str, expected: str) -> None:
    assert answer_only(line) == expected


@pytest.mark.parametrize(
    "line",
    [
        "So she makes 9 * 2 = 18 dollars, the answer is 18",
        "She makes 9 * 2 = $18 every day.",
        "So 9 * 2 = \\boxed{18} dollars a day",
        "The answer is 18. But let me double check with 9 * 2.",
        "An answer: not given here... she bakes muffins",
        "",
        "   ",
        "A:",
        "a: 18",
        "Janet's answer is wrong because 16 - 3 = 13",
    ],
)
def test_answer_only_negative(line: str) -> None:
    assert answer_only(line) is None


# --------------------------------------------------------------------------
# extract_answer
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("work\n<Answer>18</Answer>", "18"),
        ("work\n<answer>The answer is \\boxed{18}</answer>", "18"),
        ("work\n<Answer> 7", "7"),  # closing tag missing at end of text
        ("x \\boxed{3} then \\boxed{\\frac{1}{2}}.", "\\frac{1}{2}"),
        ("so \\boxed{\\frac{\\sqrt{3}}{2}}", "\\frac{\\sqrt{3}}{2}"),
        ("so \\fbox{42}", "42"),
        ("\\boxed{1} and truncated \\boxed{\\frac{1}{", "1"),
        ("a\n#### 12\nb\n#### 1,200", "1,200"),
        ("step\nA: 5\nstep\nA: 18\n", "18"),
        ("9 * 2 = 18. The answer is 18.", "18"),
        ("The answer is 17. Wait, the final answer is 18.", "18"),
        ("Answer: $18", "$18"),
        ("The answer is $\\frac{1}{2}$.", "\\frac{1}{2}"),
        ("The final answer is 18 dollars. Done", "18 dollars"),
        ("The answer is 3.5.", "3.5"),
    ],
)
def test_extract_answer_forms(text: str, expected: str) -> None:
    assert extract_answer(text) == expected


def test_extract_answer_priority() -> None:
    # <Answer> beats \boxed beats #### beats A: beats "The answer is".
    assert extract_answer("\\boxed{1}\n#### 2\nA: 3\n<Answer>4</Answer>") == "4"
    assert extract_answer("The answer is 5\nA: 3\n#### 2\n\\boxed{1}") == "1"
    assert extract_answer("The answer is 5\nA: 3\n#### 2") == "2"
    assert extract_answer("A: 3\nThe answer is 5") == "3"


def test_extract_answer_none() -> None:
    assert extract_answer("") is None
    assert extract_answer("16 - 3 = 13\n13 * 2 = 26") is None
    assert extract_answer("25") is None


# --------------------------------------------------------------------------
# normalize_answer / check_answer
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("$1,200", "1200"),
        ("1,234,567.5", "1234567.5"),
        ("18 dollars", "18"),
        ("18 dollars.", "18"),
        ("5 cm", "5"),
        ("3.5 km/h", "3.5"),
        ("40%", "40"),
        ("40 percent", "40"),
        ("\\boxed{18}", "18"),
        ("\\text{18 apples}", "18"),
        ("$\\$18.50$", "18.50"),
        ("-1.8 billion", "-1800000000"),
        ("2 thousand", "2000"),
        ("\\frac{1}{2}", "1/2"),
        ("  18.  ", "18"),
        ("90^\\circ", "90"),
        ("1,2", "1,2"),  # not a thousands separator: left alone
        ("10+John's age", "10+John's age"),
    ],
)
def test_normalize_answer(raw: str, expected: str) -> None:
    assert normalize_answer(raw) == expected


@pytest.mark.parametrize(
    ("predicted", "gold", "expected"),
    [
        ("1,200", "1200", True),
        ("$18", "18", True),
        ("\\frac{1}{2}", "0.5", True),
        ("0.5", "\\frac{1}{2}", True),
        ("18 dollars", "18", True),
        ("18.00", "18", True),
        ("1/2", "2/4", True),
        ("\\boxed{\\frac{1}{2}}", "1/2", True),
        ("\\sqrt{8}", "2\\sqrt{2}", True),
        ("x^2+1", "1+x^2", True),
        ("(1,2)", "(1, 2)", True),
        ("Yes", "yes", True),
        ("40%", "40", True),
        ("17", "18", False),
        ("$19", "18", False),
        ("\\frac{1}{3}", "0.5", False),
        ("x^2+2", "1+x^2", False),
        ("hello", "olleh", False),
        ("10+John's age", "50", False),
        (None, "18", False),
        ("", "18", False),
        ("   ", "18", False),
    ],
)
def test_check_answer(predicted: str | None, gold: str, expected: bool) -> None:
    assert check_answer(predicted, gold) is expected


def test_check_answer_huge_number_stays_exact() -> None:
    # Beyond Python's int-string digit limit; must not raise.
    assert check_answer("3" * 5000, "3") is False
    assert check_answer("3" * 5000, "3" * 5000) is True


def test_check_answer_from_worker_thread() -> None:
    def run() -> list[bool | None]:
        return [
            check_answer("\\frac{1}{2}", "\\sqrt{\\frac{1}{4}}"),
            check_answer("\\sqrt{2}", "\\sqrt{3}"),
            check_answer("1,200", "1200"),
        ]

    # A pool worker is not the main thread; exceptions surface via result().
    with ThreadPoolExecutor(max_workers=1) as pool:
        assert pool.submit(run).result(timeout=30) == [True, False, True]


def test_check_answer_worker_timeout_returns_none(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The slow check blocks until the test releases it: an answer that comes
    # back while it is still blocked proves the timeout bounded the call,
    # without measuring time.
    release = threading.Event()

    def slow(predicted: str, gold: str, timeout: int | None) -> bool:
        release.wait(30)
        return True

    monkeypatch.setattr(answers, "_mv_equal", slow)
    results: list[bool | None] = []
    worker = threading.Thread(
        target=lambda: results.append(check_answer("\\pi", "3", timeout=0.1))
    )
    worker.start()
    worker.join(10)
    returned_while_blocked = not worker.is_alive() and not release.is_set()
    release.set()
    assert results == [None]
    assert returned_while_blocked


@pytest.mark.parametrize("in_thread", [False, True])
def test_check_answer_math_verify_errors_are_undecided(
    monkeypatch: pytest.MonkeyPatch, in_thread: bool
) -> None:
    def boom(predicted: str, gold: str, timeout: int | None) -> bool:
        raise RuntimeError("sympy exploded")

    monkeypatch.setattr(answers, "_mv_equal", boom)
    results: list[bool | None] = []
    if in_thread:
        worker = threading.Thread(
            target=lambda: results.append(check_answer("\\pi", "3"))
        )
        worker.start()
        worker.join(10)
    else:
        results.append(check_answer("\\pi", "3"))
    assert results == [None]


def test_check_answer_main_thread_passes_integer_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[int | None] = []

    def record(predicted: str, gold: str, timeout: int | None) -> bool:
        seen.append(timeout)
        return False

    monkeypatch.setattr(answers, "_mv_equal", record)
    assert check_answer("\\pi", "3", timeout=0.2) is False
    assert seen == [1]  # signal.alarm needs whole seconds, at least one
