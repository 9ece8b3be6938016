"""Reading JSON out of model answers (reasonlib.json_answer, issue 29 M5/L2): linear time on hostile
answers, a cap on what is read, and every failure a malformed ITEM -- never an exception that fails
the chunk or the run."""

from __future__ import annotations

import json

import pytest

from judges import protocol
from reasonlib import json_answer
from runs.transport import Choice, Malformed, ModelRequest
from search.core import scan
from tests.linear import assert_linear

N = 200_000  # the size of the slow answer (200 kB)

# Answers that made the old readers quadratic: a fence regex retried from every ``` and a raw_decode
# at every ``{`` that read to the end of the text before failing.
HOSTILE = {
    "braces": "{" * N,
    "open fences": "```json {" * (N // 9),
    "unclosed strings": '{"a": "' * (N // 7),
    "nested keys": '{"steps": ' * (N // 10),
    "fence then braces": "```" + '{"x": 1, ' * (N // 9),
    "key quotes": '{"' * (N // 2),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_the_judges_reader_is_linear_on_hostile_answers(name):
    def read(text: str) -> None:
        with pytest.raises(protocol.MalformedOutput):
            protocol.extract_json(text)

    assert_linear(read, HOSTILE[name])


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_the_scanners_reader_is_linear_on_hostile_answers(name):
    def read(text: str) -> None:
        with pytest.raises(scan.BadAnswer):
            scan.parse(text, [1, 2])

    assert_linear(read, HOSTILE[name])


def test_an_answer_over_the_cap_is_refused_unread():
    text = json.dumps({"steps": [], "pad": "x" * json_answer.MAX_ANSWER_CHARS})
    with pytest.raises(protocol.MalformedOutput, match="more than 1,000,000"):
        protocol.extract_json(text)
    with pytest.raises(scan.BadAnswer, match="more than 1,000,000"):
        scan.parse(text, [1])


@pytest.mark.parametrize("content", [
    '```json\n{"answer": "yes", "steps": [1], "explan',  # cut by max_tokens inside the fence
    'Here: ```json\n{"answer": "yes", "steps": [1',
    '```\n{"answer": "yes"',
    "```",
    "{",
    "",
    '{"answer": ' + "[" * 100_000 + "]" * 100_000 + "}",  # nested past the recursion limit
    "[" * 100_000,
])
def test_a_cut_or_deeply_nested_scanner_answer_is_a_bad_answer(content):
    with pytest.raises(scan.BadAnswer):
        scan.parse(content, [1])


@pytest.mark.parametrize("content", [
    '```json\n{"steps": [{"step": 1, "verdict": "valid"',
    '{"steps": ' + "[" * 100_000 + "]" * 100_000 + "}",
    'Verdicts: {"steps": ' + '{"a": ' * 50_000,
    "[" * 100_000 + "]" * 100_000,
])
def test_a_cut_or_deeply_nested_judge_answer_is_malformed(content):
    with pytest.raises(protocol.MalformedOutput):
        protocol.parse_output(content, 1, 0, "reference-free")


@pytest.mark.parametrize("content", [
    '{"result": {"steps": [{"step": 1, "verdict": "neutral"}]}}',  # wrapped in another object
    '[{"steps": [{"step": 1, "verdict": "neutral"}]}]',
    'Text with a stray { brace, then {"steps": [{"step": 1, "verdict": "neutral"}]}',
    '```\n[1, 2]\n``` and ```json\n{"steps": [{"step": 1, "verdict": "neutral"}]}\n```',
])
def test_the_judges_answer_is_still_found_around_prose_fences_and_wrappers(content):
    assert protocol.parse_output(content, 1, 0, "reference-free").labels[0].verdict == "neutral"


@pytest.mark.parametrize("content", [
    'Sure.\n```json\n{"answer": "yes", "steps": [2], "explanation": "e"}\n```\nDone.',
    'I think {"answer": "yes", "steps": [2], "explanation": "e"} is right.',
    '{"answer": "yes", "steps": [2], "explanation": "e"}',
])
def test_the_scanners_answer_is_still_found(content):
    got = scan.parse(content, [1, 2])
    assert got.answer is True and got.cited == (2,)


@pytest.mark.parametrize("error", [ValueError("substring not found"), RecursionError("too deep"), KeyError("x"),
                                   TypeError("bad")])
def test_any_exception_of_a_parser_is_a_malformed_answer(error):
    """The transport's one door to every parser: whatever a parser raises fails the item's attempt as
    malformed (retried, then the item failed), never the chunk."""
    def parse(content: str):
        raise error

    with pytest.raises(Malformed, match=type(error).__name__):
        ModelRequest(item=1, build=lambda mode: {}, parse=parse).parse_answer(Choice("text"))
    with pytest.raises(Malformed, match=type(error).__name__):
        ModelRequest(item=1, build=lambda mode: {}, parse_choice=parse).parse_answer(Choice("text"))


def test_a_malformed_answer_keeps_its_own_message():
    def parse(content: str):
        raise Malformed("expected 3 forms")

    with pytest.raises(Malformed, match="^expected 3 forms$"):
        ModelRequest(item=1, build=lambda mode: {}, parse=parse).parse_answer(Choice("text"))
