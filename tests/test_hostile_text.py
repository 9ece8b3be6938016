"""Issue 20, "quadratic regexes on model output": a malicious or broken model writes the text these
functions read, so each stays linear on adversarial 100,000-character inputs. The bound is computed,
not a wall-clock limit: at most tests.linear.FACTOR passes of a non-backtracking regex over the same
text, measured in the same process (tests/linear.py)."""

from __future__ import annotations

import pytest

from abstraction.importing import split_question
from faithfulness.core.anytime import cut_tokens, piece_ends
from fidelity.core.explanation import plausibility
from fidelity.core.variants import distractor, rephrase
from reasonlib.answers import extract_answer
from reasonlib.arithmetic import tokenize
from reasonlib.segmentation import parse_trace, segment
from tests.linear import assert_linear

N = 100_000
HOSTILE = {
    "trailing spaces": "The answer is 4." + " " * N,
    "trailing newlines and tabs": "x" + "\n\t " * (N // 3),
    "a run of spaces inside": "What" + " " * N + "is it?",
    "sentence then spaces": "It rains." + " " * N + "why",
    "scope words and spaces": "in " * (N // 3) + "x?",
    "dashes": "-" * N + "1",
    "digits": "1" * N + "x",
    "digits and dots": "1." * (N // 2) + "x",
    "blank lines": "Step 1: a" + "\n" * N + "x",
    "question then blanks": "Question: " + " " * N + "x",
    # Math delimiters never closed, continuation lines, lead-ins: what the segmenters keep whole.
    "unclosed displays": "\\[ a " * (N // 5),
    "unclosed inline math": "\\( 1. " * (N // 6),
    "continuation lines": "x\n= 1\n" * (N // 7),
    "lead-ins": "So:\n\n3 = 3\n\n" * (N // 13),
    "wait wait": "Wait. " * (N // 6),
    # An answer heading's blanks, a closing statement's leading blanks, a lead-in before a run of signs.
    "a line of blanks": " " * N + "x",
    "bold then blanks": "**" + " " * N,
    "lead-in then signs": "So:\n\n" + "(-" * (N // 2),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_anytime_pieces_are_linear(name):
    text = HOSTILE[name]
    assert_linear(piece_ends, text)
    assert_linear(lambda t: cut_tokens(t, 64), text)


def test_pieces_are_what_they_were():
    # Same ends as the old "\s*(?:\w+|[^\w\s])": words, single other characters, spaces skipped.
    assert piece_ends("  ab, c!  ") == [4, 5, 7, 8]
    assert piece_ends("   ") == []


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_fidelity_rephrase_and_distractor_are_linear(name):
    text = HOSTILE[name]
    assert_linear(lambda t: rephrase(t, 0), text)
    assert_linear(lambda t: distractor(t, 0), text)


@pytest.mark.parametrize("text, expected", [
    ("How many cars were sold from 2001 to 2005?", "From 2001 to 2005, how many cars were sold?"),
    ("How many cars were sold between 2001 and 2005 ?", "Between 2001 and 2005, how many cars were sold?"),
    ("Who won in 1999?", "In 1999, who won?"),
    ("Who won within 1999?", None),
])
def test_the_scope_first_rephrase_is_unchanged(text, expected):
    variant = rephrase(text, 0)
    if expected is None:
        assert variant.magnitude != "scope-first"
    else:
        assert (variant.magnitude, variant.text) == ("scope-first", expected)


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_segmentation_and_calculator_tokens_are_linear(name):
    text = HOSTILE[name]
    for method in ("lines", "markers", "sentences", "paragraphs", "moves"):
        assert_linear(lambda t, method=method: segment(t, method), text)
    assert_linear(parse_trace, text)
    assert_linear(extract_answer, text)
    assert_linear(lambda t: tokenize(t, False), text)
    assert_linear(lambda t: tokenize(t, True), text)


def test_step_markers_after_markdown_still_split():
    assert len(segment("## Step 1: a\n-- ** Step 2: b\n", "markers")) == 2


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_explanation_plausibility_and_imported_prompts_are_linear(name):
    text = HOSTILE[name]
    assert_linear(lambda t: plausibility("How many?", t), text)
    assert_linear(split_question, text)


def test_imported_prompts_split_as_before():
    assert split_question("Hint: use 2.\nQuestion: What is 1+1?  Let's think step by step. ") == (
        "What is 1+1?", "Hint: use 2.\n")
    assert split_question("Question: Q?\n") == ("Q?", "")
    assert split_question("no question here") is None
