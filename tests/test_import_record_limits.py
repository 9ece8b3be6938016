"""What one imported record may hold (issue 29: statement, raw output and thought sizes per record):
a line over a limit is refused with its line number, like any other bad line."""

from __future__ import annotations

import pytest

from tests.conftest import jsonl

pytestmark = pytest.mark.django_db

PROBLEM = {"kind": "problem", "problem_id": "p", "statement": "What is 2 + 2?", "gold_answer": "4"}


@pytest.fixture(autouse=True)
def small_limits(settings):
    settings.IMPORT_MAX_STATEMENT_CHARS = 100
    settings.IMPORT_MAX_OUTPUT_CHARS = 200
    settings.IMPORT_MAX_THOUGHT_CHARS = 300


def trace(**fields) -> dict:
    return {"kind": "trace", "problem_id": "p", "model": "m", "raw": "2 + 2 = 4. The answer is 4.", **fields}


def test_records_within_the_limits_import(do_import):
    report = do_import(jsonl({**PROBLEM, "statement": "x" * 100}, trace(raw="y" * 200, thought="z" * 300)))
    assert report.committed and report.traces_created == 1, report.rejected


@pytest.mark.parametrize("record, words", [
    ({**PROBLEM, "statement": "x" * 101}, ['"statement" is 101 characters', "REASONAUDIT_IMPORT_MAX_STATEMENT_CHARS"]),
    (trace(raw="y" * 201), ["the output", "201 characters", "REASONAUDIT_IMPORT_MAX_OUTPUT_CHARS"]),
    (trace(raw=None, steps=["y" * 150, "y" * 51]), ["201 characters", "REASONAUDIT_IMPORT_MAX_OUTPUT_CHARS"]),
    (trace(thought="z" * 301), ["the thought is 301", "REASONAUDIT_IMPORT_MAX_THOUGHT_CHARS"]),
    (trace(reasoning_content="z" * 301), ["the thought is 301", "REASONAUDIT_IMPORT_MAX_THOUGHT_CHARS"]),
    (trace(thought_steps=["z" * 200, "z" * 101]), ["the thought is 301", "THOUGHT"]),
    (trace(thought_blocks=[{"text": "z" * 200}, {"text": "z" * 101}]), ["the thought is 301", "THOUGHT"]),
])
def test_a_record_over_a_limit_is_refused_with_its_line(do_import, record, words):
    report = do_import(jsonl(PROBLEM, trace(), record))
    assert not report.committed
    (refused,) = report.rejected
    assert refused["line"] == 3
    for word in words:
        assert word in refused["reason"], refused["reason"]


def test_skip_invalid_keeps_the_other_lines(do_import):
    report = do_import(jsonl(PROBLEM, trace(raw="y" * 500), trace(trace_id="ok")), skip_invalid=True)
    assert report.committed and report.traces_created == 1
    assert [r["line"] for r in report.rejected] == [2]
