"""Fixtures of the judge tests: a fake OpenAI-compatible server on a real
socket, a study with traces, an LLM judge pointed at the server, and quick
retries."""

from __future__ import annotations

import pytest

from annotation.models import Job
from judges import services
from judges.models import JudgeConfig, JudgeRun
from tests.conftest import jsonl
from tests.run_fixtures import openai_server, quick_retries_fixture  # noqa: F401 (fixtures)


def trace_records(n: int, *, steps: int = 3, wrong: dict[int, int] | None = None, models=("m1", "m2")) -> bytes:
    """n traces over n/2 problems with a two-step skeleton; ``wrong`` maps a
    trace number to the step (1-based) whose text says WRONG."""
    wrong = wrong or {}
    problems = [
        {"kind": "problem", "problem_id": f"p{i}", "statement": f"What is {i} + {i}?", "gold_answer": str(2 * i),
         "skeleton": [{"text": f"{i} + {i} = {2 * i}", "check": f"{i}+{i}={2 * i}"}, {"text": f"answer {2 * i}"}]}
        for i in range(max(1, (n + 1) // 2))
    ]
    traces = []
    for t in range(n):
        i = t // 2
        texts = [f"I add {i} + {i} = {2 * i}."] + [f"step {k} of trace {t}" for k in range(2, steps + 1)]
        if t in wrong:
            texts[wrong[t] - 1] += " WRONG"
        traces.append({"kind": "trace", "problem_id": f"p{i}", "model": models[t % len(models)], "trace_id": f"t{t:04d}",
                       "steps": texts, "answer": str(2 * i)})
    return jsonl(*problems, *traces)


@pytest.fixture
def make_traces(study, do_import):
    def make(n: int, **kwargs):
        report = do_import(trace_records(n, **kwargs))
        assert report.committed, report.rejected
        return study

    return make


@pytest.fixture
def llm_judge(study, server):
    def make(name: str = "gpt", **fields) -> JudgeConfig:
        data = {"name": name, "model": "fake-model", "base_url": server.url, "concurrency": 4, "max_retries": 3,
                "timeout_seconds": 5.0, **fields}
        judge, _ = services.do_save_judge(study, data)
        return judge

    return make


def run_judge(judge: JudgeConfig, **kwargs) -> tuple[JudgeRun, Job]:
    """Start a run and process it in this process, as a worker would."""
    progress = kwargs.pop("progress", None)
    run = services.do_start_run(judge, queue=False, **kwargs)
    job = services.run_inline(run, progress=progress)
    run.refresh_from_db()
    judge.refresh_from_db()
    return run, job
