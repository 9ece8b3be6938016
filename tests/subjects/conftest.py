"""Fixtures of the subject-model tests: a fake OpenAI-compatible server in
generation mode on a real socket, a study with problems whose answer is the
sum of their numbers, and quick retries."""

from __future__ import annotations

import pytest

from annotation.models import Job
from subjects import services
from subjects.models import GenerationRun, SubjectModel
from tests.conftest import jsonl
from tests.run_fixtures import generation_server, quick_retries_fixture  # noqa: F401 (fixtures)


def problem_records(n: int) -> bytes:
    """Problem p{i}: "Ann has {i+2} apples and buys {i+3} more" -- the fake's sum is the gold answer."""
    return jsonl(*[
        {"kind": "problem", "problem_id": f"p{i}",
         "statement": f"Ann has {i + 2} apples and buys {i + 3} more. How many apples does she have?",
         "gold_answer": str(2 * i + 5)}
        for i in range(n)
    ])


@pytest.fixture
def make_problems(study, do_import):
    def make(n: int):
        report = do_import(problem_records(n))
        assert report.committed, report.rejected
        return study

    return make


@pytest.fixture
def subject(study, server):
    def make(name: str = "tiny", **fields) -> SubjectModel:
        data = {"name": name, "model": "tiny-model", "base_url": server.url, "concurrency": 4, "max_retries": 2,
                "timeout_seconds": 5.0, **fields}
        made, _ = services.do_save_subject(study, data)
        return made

    return make


def generate(subject: SubjectModel, **kwargs) -> tuple[GenerationRun, Job]:
    """Start a generation run and process it in this process, as a worker would."""
    record = services.do_start_generation(subject, queue=False, **kwargs)
    job = services.run_inline(record)
    record.refresh_from_db()
    record.run.refresh_from_db()
    return record, job
