"""Fixtures of the faithfulness tests: the fake OpenAI-compatible server as a
generating model (chat) that also continues raw prompts (/v1/completions), a
study with problems whose gold answer is the sum of their numbers, a subject
model with SmolLM2's chat template, probed, and its generated traces."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest

from subjects import services as subject_services
from subjects.models import SubjectModel
from tests.run_fixtures import quick_retries_fixture  # noqa: F401 (fixtures)
from tests.runs.fake_openai import FakeOpenAI
from tests.runs.fake_thinking import FakeThinking
from tests.subjects.conftest import generate, problem_records

SMOLLM2 = (Path(__file__).parent.parent / "runs" / "data" / "smollm2_chat_template.jinja").read_text()


@contextmanager
def probed_reasoners(study, do_import, behaviours: Sequence[str], *, problems: int,
                     concurrency: int) -> Iterator[dict[str, tuple[SubjectModel, FakeThinking]]]:
    """{behaviour: (subject, server)}: one fake reasoning model per behaviour (tests/runs/fake_thinking.py, its
    thought in a separate field), probed, with ``problems`` problems generated each ("Ann has i+2 apples and
    buys i+3 more"); the servers stop on exit. Shared by the faithfulness and step-importance tests."""
    assert do_import(problem_records(problems)).committed
    servers, made = [], {}
    try:
        for behaviour in behaviours:
            server = FakeThinking(form="field", behaviour=behaviour).start()
            servers.append(server)
            subject, _ = subject_services.do_save_subject(study, {
                "name": behaviour, "model": "r1-fake", "base_url": server.url, "concurrency": concurrency,
                "max_retries": 1, "timeout_seconds": 5.0, "seed": 0, "chat_template": SMOLLM2, "thinking": "on"})
            subject_services.do_probe_subject_model(subject)
            assert subject.continuation == "completions"
            assert generate(subject)[1].status == "succeeded"
            made[behaviour] = (subject, server)
        yield made
    finally:
        for s in servers:
            s.stop()


@pytest.fixture
def server():
    fake = FakeOpenAI(generation=True, continue_completions=True).start()
    yield fake
    fake.stop()


@pytest.fixture
def generated(study, do_import, server) -> SubjectModel:
    """Subject model "tiny": probed (completions), 4 problems generated once each."""
    report = do_import(problem_records(4))
    assert report.committed, report.rejected
    subject, _ = subject_services.do_save_subject(study, {
        "name": "tiny", "model": "tiny-model", "base_url": server.url, "concurrency": 2, "max_retries": 1,
        "timeout_seconds": 5.0, "seed": 0, "chat_template": SMOLLM2})
    subject_services.do_probe_subject_model(subject)
    assert subject.continuation == "completions"
    _run, job = generate(subject)
    assert job.status == "succeeded"
    return subject
