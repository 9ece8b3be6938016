"""Fixtures of the fidelity tests: GSM8K-style problems whose skeleton checks carry the
calculator chain, the fake OpenAI server in generation mode (it answers the sum of the
question's numbers) and a subject model on it."""

from __future__ import annotations

import pytest

from subjects import services as subject_services
from tests.conftest import jsonl
from tests.run_fixtures import generation_server, quick_retries_fixture  # noqa: F401 (fixtures)


def problem_records(n: int) -> bytes:
    """p{i}: "Ann has {i+2} apples and buys {i+3} more" with the chain "{i+2}+{i+3}={2i+5}"; and one problem
    without any number."""
    recs = [{"kind": "problem", "problem_id": f"p{i}",
             "statement": f"Ann has {i + 2} apples and buys {i + 3} more. How many apples does she have?",
             "gold_answer": str(2 * i + 5),
             "skeleton": [{"text": "Add what she had and what she bought.", "check": f"{i + 2}+{i + 3}={2 * i + 5}"}]}
            for i in range(n)]
    recs.append({"kind": "problem", "problem_id": "z-words", "statement": "Is the sky blue on a clear day?",
                 "gold_answer": "yes"})
    return jsonl(*recs)


@pytest.fixture
def problems(study, do_import):
    def make(n: int = 3):
        report = do_import(problem_records(n))
        assert report.committed, report.rejected
        return study

    return make


@pytest.fixture
def subject(study, server):
    made, _ = subject_services.do_save_subject(study, {"name": "tiny", "model": "tiny-model", "base_url": server.url,
                                                       "concurrency": 4, "max_retries": 2, "timeout_seconds": 5.0})
    return made
