"""The deterministic checker and the LLM checker's verdict (spec §7)."""

from __future__ import annotations

from abstraction.core import checker


def test_it_extracts_the_answer_as_the_repository_does():
    assert checker.extract("Answer: The answer is 00000110.\n\n") == "00000110"
    assert checker.extract("so The answer is {0, 1, 2}. Done") == "{0, 1, 2}"
    assert checker.extract("The answer is 0.0017070240880065752") == "0.0017070240880065752"
    assert checker.extract("The answer is **42**.") == "42"
    assert checker.extract("no answer here") is None


def test_strict_equality_decides_a_symbolic_answer():
    assert checker.check("The answer is JJQJ.", "JJQJ", numeric=False).correct
    assert not checker.check("The answer is JJQJ0.", "JJQJ", numeric=False).correct
    assert not checker.check("I think JJQJ", "JJQJ", numeric=False).correct


def test_a_numeric_gold_is_compared_after_truncation_to_two_decimals():
    assert checker.check("The answer is 0.519", "0.5196152422706632", numeric=True).correct
    assert not checker.check("The answer is 0.52", "0.5196152422706632", numeric=True).correct
    assert checker.check("The answer is 1,234.", "1234", numeric=True).correct
    assert checker.check("The answer is -29975409.", "-29975409", numeric=True).correct
    assert not checker.check("The answer is 12.", "1234", numeric=True).correct


def test_the_llm_checker_verdict_and_prompt():
    assert checker.judge_verdict("The answer is correct.")
    assert checker.judge_verdict("The answer is approximated but should be correct. Correct Answer: 1")
    assert not checker.judge_verdict("The answer is incorrect. Correct Answer: 1 | Answer extracted: 2.")
    assert not checker.judge_verdict("The reply doesn't contain an answer.")
    msgs = checker.judge_messages("The answer is 2.", "2")
    assert msgs[1]["content"] == "Problem: \n\nReply: The answer is 2.\n\nGround truth answer: 2\n\nJudje result: "
