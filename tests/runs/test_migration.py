"""The engine's move to the runs app keeps every row: from the judges schema
before it (judges 0003, no runs app) with runs, chunks, calls and cached
answers in it, forwards to the current schema, and back again."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from annotation.models import Job, Trace
from tests.judges.conftest import trace_records

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("judges", "0003_mechanistic_judge_for_every_study"), ("runs", None)]
AFTER = [("judges", "0006_drop_moved_engine_fields"), ("runs", "0001_initial")]


def _migrate(targets):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return MigrationExecutor(connection).loader.project_state([t for t in targets if t[1] is not None]).apps


@pytest.fixture(autouse=True)
def latest_schema_afterwards():
    """Leave the schema at the newest migrations, whatever came after the move
    (e.g. judges 0007), as the other tests expect it."""
    yield
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())


def test_judge_runs_chunks_calls_and_cached_answers_move_to_runs_without_loss(study, do_import):
    assert do_import(trace_records(3)).committed
    traces = list(Trace.objects.filter(study=study).order_by("pk").values_list("pk", flat=True))
    job = Job.objects.create(study=study, kind="judge", status="succeeded", total=3, done=3, failed=1)
    old = _migrate(BEFORE)
    try:
        JudgeConfig = old.get_model("judges", "JudgeConfig")
        judge = JudgeConfig.objects.create(study_id=study.pk, name="gpt", provider="llm", model="m",
                                           base_url="http://h/v1", prompt_version="1")
        JudgeRun = old.get_model("judges", "JudgeRun")
        lease = timezone.now() + timedelta(minutes=5)
        run = JudgeRun.objects.create(
            job_id=job.pk, judge_id=judge.pk, scope="all", filters={"model": "m1"}, force=True, budget_usd=2.5,
            judge_version=3, prompt_version="1", config={"output_mode_resolved": "json_object", "concurrency": 4},
            requests=5, cache_hits=1, prompt_tokens=500, completion_tokens=80, cost_usd=0.0123, warnings=2,
            labels_created=6, stop_reason="every trace failed",
        )
        Chunk = old.get_model("judges", "JudgeRunChunk")
        Chunk.objects.create(run_id=run.pk, index=0, trace_ids=traces[:2], status="done", holder="w/a", attempts=1)
        running = Chunk.objects.create(run_id=run.pk, index=1, trace_ids=traces[2:], status="running",
                                       holder="celery@box/boot", lease_until=lease, attempts=2)
        Call = old.get_model("judges", "JudgeCall")
        Call.objects.create(run_id=run.pk, trace_id=traces[0], attempt=1, output_mode="json_schema",
                            outcome="rejected_format", http_status=500, error="json_object only")
        Call.objects.create(run_id=run.pk, trace_id=traces[0], attempt=2, output_mode="json_object", outcome="ok",
                            http_status=200, latency_ms=1200, prompt_tokens=100, completion_tokens=16, cost_usd=0.001)
        Cache = old.get_model("judges", "ResponseCache")
        Cache.objects.create(key="k" * 64, judge_id=judge.pk, content='{"steps": []}', output_mode="json_object",
                             prompt_tokens=100, completion_tokens=16)
        new = _migrate(AFTER)
    finally:
        new = _migrate(AFTER)  # leave the schema as the other tests expect it

    Run = new.get_model("runs", "Run")
    moved = Run.objects.get(pk=run.pk)
    assert (moved.job_id, moved.kind, moved.force, moved.budget_usd, moved.requests, moved.cache_hits) == (
        job.pk, "judge", True, 2.5, 5, 1)
    assert (moved.prompt_tokens, moved.completion_tokens, moved.cost_usd, moved.warnings) == (500, 80, 0.0123, 2)
    assert moved.stop_reason == "every trace failed" and moved.config["concurrency"] == 4
    assert moved.output_mode == "json_object" and moved.unknown_token_calls == 0
    record = new.get_model("judges", "JudgeRun").objects.get(pk=run.pk)
    assert (record.run_id, record.job_id, record.labels_created, record.judge_version) == (run.pk, job.pk,
                                                                                                       6, 3)
    chunks = list(new.get_model("runs", "RunChunk").objects.filter(run_id=run.pk).order_by("index").values(
        "pk", "items", "status", "holder", "lease_until", "attempts"))
    assert [c["items"] for c in chunks] == [traces[:2], traces[2:]]
    assert chunks[1] == {"pk": running.pk, "items": traces[2:], "status": "running", "holder": "celery@box/boot",
                         "lease_until": lease, "attempts": 2}
    calls = list(new.get_model("runs", "ModelCall").objects.filter(run_id=run.pk).order_by("attempt").values_list(
        "item", "attempt", "outcome", "http_status", "prompt_tokens", "completion_tokens", "latency_ms"))
    assert calls == [(traces[0], 1, "rejected_format", 500, 0, 0, 0), (traces[0], 2, "ok", 200, 100, 16, 1200)]
    cached = new.get_model("runs", "ResponseCache").objects.get(key="k" * 64)
    assert (cached.scope, cached.content, cached.prompt_tokens) == (f"judge:{judge.pk}", '{"steps": []}', 100)
    # new rows do not collide with the kept primary keys
    extra = Run.objects.create(job_id=Job.objects.create(study=study, kind="judge").pk, kind="judge")
    assert extra.pk > run.pk


def test_the_move_can_be_undone(study):
    job = Job.objects.create(study=study, kind="judge")
    old = _migrate(BEFORE)
    try:
        JudgeConfig = old.get_model("judges", "JudgeConfig")
        judge = JudgeConfig.objects.create(study_id=study.pk, name="gpt", provider="llm", prompt_version="1")
        run = old.get_model("judges", "JudgeRun").objects.create(job_id=job.pk, judge_id=judge.pk, judge_version=1,
                                                                 requests=7, cost_usd=0.5)
        _migrate(AFTER)
        again = _migrate(BEFORE)
        back = again.get_model("judges", "JudgeRun").objects.get(pk=run.pk)
        assert (back.requests, back.cost_usd) == (7, 0.5)
    finally:
        _migrate(AFTER)
