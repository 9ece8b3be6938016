"""Tests for reasonlib.answers (pure Python; run with -p no:django)."""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from reasonlib import answers, thinking
from reasonlib.answers import (
    answer_only,
    check_answer,
    extract_answer,
    normalize_answer,
)

THINKING_DATA = Path(__file__).resolve().parent / "data" / "thinking"

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


def test_prose_is_compared_as_text_without_math_verify(monkeypatch) -> None:
    from reasonlib import answers

    def never(*args):
        raise AssertionError("math-verify asked about prose")

    monkeypatch.setattr(answers, "_mv_equal", never)
    assert check_answer("10+John's age", "50") is False
    assert check_answer("10 + John's age", "10 + john's age") is True
    assert check_answer("50", "Tom's 50") is False


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


# --------------------------------------------------------------------------
# Answers as reasoning models write them (issue 30; gpt-oss-120b on GSM8K)
# --------------------------------------------------------------------------


def test_answer_label_with_a_sentence_gives_its_stressed_number() -> None:
    text = "**Answer:** He will be **21 years old** in three years."
    assert extract_answer(text) == "21"
    assert answer_only(text) == "21"
    assert check_answer(extract_answer(text), "21") is True


def test_a_bold_closing_sentence_is_the_answer() -> None:
    assert extract_answer("Work.\n\n**Kylar needs to pay \\$64.**") == "64"
    assert extract_answer("Work.\n\nSo the doorbell rang **175 times**.") == "175"


def test_the_first_gpt_oss_record_reads_right() -> None:
    record = json.loads((THINKING_DATA / "gsm8k_gpt-oss-120b_head3.jsonl").read_text(encoding="utf-8").splitlines()[0])
    split = thinking.split_thinking(record["response"], reasoning_field=record["raw_message"]["reasoning"])
    found = thinking.parse_channels(record["response"], split, "lines", "paragraphs").final_answer
    assert found == "18"
    assert check_answer(found, "18") is True


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # Thousands separators: "{,}", ",\!", a narrow no-break space; currency in LaTeX.
        ("**Answer:** Each student raised **\\$6{,}250**.", "6250"),
        ("**Answer:** Bentley paid **\\$11,\\!050** in all.", "11050"),
        ("**Answer:** The playlists will last **60\u202f000 hours** in total.", "60000"),
        # A duration in two units is read in the smaller one; a clock time on the hour is its hour.
        ("**Answer:** It will take Bob **3 minutes and 36 seconds** to dig the hole.", "216"),
        ("Work.\n\n**Therefore, the latest time Jordan can start is 2:00 PM.**", "2"),
        # A leading clause is scene-setting, an aside in parentheses is not the answer.
        ("Work.\n\n**So after 10 hours, the sun will be at an angle of 82 degrees.**", "82"),
        ("Work.\n\n**Tim was off by 36 red jelly beans (about a 4 % underestimate).**", "36"),
        # "8-sandwich" describes the package; the price answers.
        ("Work.\n\n**The 8\u2011sandwich package will cost \\$12.**", "12"),
        # A list and its sum.
        ("Work.\n\nSo they have **84 sofas, 88 chairs, for a combined total of 172 pieces.**", "172"),
        # A number in words.
        ("**Answer:** Each child will have **one bowl of soup** from the leftovers.", "1"),
        # A closing display completing the sentence before it.
        ("Since there were 80 votes, the loser got\n\n\\[\n80 - 60 = 20 \\text{ votes}.\n\\]", "20"),
        # A computation stated as a sentence.
        ("Work.\n\nTotal \\(14 + 9 + 8 = 31\\) slices.", "31"),
    ],
)
def test_answer_sentences(text: str, expected: str) -> None:
    assert extract_answer(text) == expected


def test_an_answer_heading_after_the_last_box_outranks_it() -> None:
    text = "Spent: \\[ 50 + 80 = \\boxed{\\$130} \\]\n\n## Answer\nColby can see **1 more movie** that night."
    assert extract_answer(text) == "1"
    # Before the box, a heading does not: R1's "**Final Answer**" then "... \boxed{88572}".
    assert extract_answer("**Final Answer**\nThe value is \\boxed{88572}.") == "88572"


def test_a_cut_off_computation_or_a_bare_one_is_no_answer() -> None:
    assert extract_answer("So the price will be $41.472+$8.2944 = $<<41.472+8.") is None
    assert extract_answer("16 - 3 = 13\n13 * 2 = 26") is None
    # A computation the text goes on from (an intervention's continuation) states no answer.
    assert extract_answer("Ann has 2 apples.\n2 + 3 = 6. and so the reasoning goes on.") is None


def test_a_value_with_words_in_an_expression_stays_as_written() -> None:
    assert answer_only("A: 10+John's age") == "10+John's age"


@pytest.mark.parametrize(
    ("predicted", "gold", "expected"),
    [
        ("He will be 21 years old in three years", "21", True),
        ("He paid \\$360", "360", True),
        ("130\u202f000 people", "130000", True),
        ("\\text{₱250}", "250", True),
        ("\\$245 \\text{ (or }24{,}500\\text{ cents)}", "245", True),
        ("She makes 19 dollars a day", "18", False),
    ],
)
def test_check_answer_reads_sentences_and_separators(predicted: str, gold: str, expected: bool) -> None:
    assert check_answer(predicted, gold) is expected
