"""The run engine moved to the runs app: every JudgeRun gets a runs.Run (same
pk) holding the engine's figures, JudgeRunChunk rows become runs.RunChunk,
JudgeCall rows runs.ModelCall (item = trace pk), the judges' ResponseCache
rows runs.ResponseCache (scope "judge:<pk>"), all with their pks kept (a
chunk message queued before the upgrade still names the right chunk).
Reversible: backwards copies everything back. The schema changes around it
are in 0004 and 0006, each in a transaction of its own: PostgreSQL refuses to
alter a table with pending deferred constraint checks from rows written in the
same transaction."""

from django.core.management.color import no_style
from django.db import migrations

ENGINE_FIELDS = ("force", "budget_usd", "config", "requests", "cache_hits", "prompt_tokens", "completion_tokens",
                 "cost_usd", "warnings", "stop_reason")


def _reset_sequences(schema_editor, models_) -> None:
    connection = schema_editor.connection
    for sql in connection.ops.sequence_reset_sql(no_style(), models_):
        schema_editor.execute(sql)


def forwards(apps, schema_editor):
    JudgeRun = apps.get_model("judges", "JudgeRun")
    JudgeRunChunk = apps.get_model("judges", "JudgeRunChunk")
    JudgeCall = apps.get_model("judges", "JudgeCall")
    OldCache = apps.get_model("judges", "ResponseCache")
    Run = apps.get_model("runs", "Run")
    RunChunk = apps.get_model("runs", "RunChunk")
    ModelCall = apps.get_model("runs", "ModelCall")
    NewCache = apps.get_model("runs", "ResponseCache")
    for jr in JudgeRun.objects.order_by("pk").iterator():
        config = jr.config or {}
        Run.objects.create(
            pk=jr.pk, job_id=jr.job_id, kind="judge", created_at=jr.created_at,
            output_mode=config.get("output_mode_resolved") or "",
            **{name: getattr(jr, name) for name in ENGINE_FIELDS},
        )
        JudgeRun.objects.filter(pk=jr.pk).update(run_id=jr.pk)
    RunChunk.objects.bulk_create(
        [RunChunk(pk=c.pk, run_id=c.run_id, index=c.index, items=c.trace_ids, status=c.status, holder=c.holder,
                  lease_until=c.lease_until, attempts=c.attempts) for c in JudgeRunChunk.objects.order_by("pk")],
        batch_size=1000,
    )
    batch = []
    for c in JudgeCall.objects.order_by("pk").iterator(chunk_size=2000):
        batch.append(ModelCall(pk=c.pk, run_id=c.run_id, item=c.trace_id, attempt=c.attempt, output_mode=c.output_mode,
                               outcome=c.outcome, http_status=c.http_status, error=c.error, latency_ms=c.latency_ms,
                               prompt_tokens=c.prompt_tokens, completion_tokens=c.completion_tokens,
                               cost_usd=c.cost_usd, at=c.at))
        if len(batch) >= 2000:
            ModelCall.objects.bulk_create(batch)
            batch = []
    ModelCall.objects.bulk_create(batch)
    NewCache.objects.bulk_create(
        [NewCache(pk=c.pk, key=c.key, scope=f"judge:{c.judge_id}", content=c.content, output_mode=c.output_mode,
                  prompt_tokens=c.prompt_tokens, completion_tokens=c.completion_tokens, created_at=c.created_at)
         for c in OldCache.objects.order_by("pk").iterator()],
        batch_size=1000,
    )
    _reset_sequences(schema_editor, [Run, RunChunk, ModelCall, NewCache])


def backwards(apps, schema_editor):
    JudgeRun = apps.get_model("judges", "JudgeRun")
    JudgeRunChunk = apps.get_model("judges", "JudgeRunChunk")
    JudgeCall = apps.get_model("judges", "JudgeCall")
    OldCache = apps.get_model("judges", "ResponseCache")
    JudgeConfig = apps.get_model("judges", "JudgeConfig")
    Run = apps.get_model("runs", "Run")
    RunChunk = apps.get_model("runs", "RunChunk")
    ModelCall = apps.get_model("runs", "ModelCall")
    NewCache = apps.get_model("runs", "ResponseCache")
    runs = {r.pk: r for r in Run.objects.filter(kind="judge")}
    by_run = {}
    for jr in JudgeRun.objects.all():
        run = runs.get(jr.run_id)
        if run is None:
            continue
        by_run[run.pk] = jr.pk
        JudgeRun.objects.filter(pk=jr.pk).update(**{name: getattr(run, name) for name in ENGINE_FIELDS})
    JudgeRunChunk.objects.bulk_create(
        [JudgeRunChunk(pk=c.pk, run_id=by_run[c.run_id], index=c.index, trace_ids=c.items, status=c.status,
                       holder=c.holder, lease_until=c.lease_until, attempts=c.attempts)
         for c in RunChunk.objects.filter(run_id__in=list(by_run)).order_by("pk")],
        batch_size=1000,
    )
    JudgeCall.objects.bulk_create(
        [JudgeCall(pk=c.pk, run_id=by_run[c.run_id], trace_id=c.item, attempt=c.attempt, output_mode=c.output_mode,
                   outcome=c.outcome, http_status=c.http_status, error=c.error, latency_ms=c.latency_ms,
                   prompt_tokens=c.prompt_tokens or 0, completion_tokens=c.completion_tokens or 0,
                   cost_usd=c.cost_usd, at=c.at)
         for c in ModelCall.objects.filter(run_id__in=list(by_run)).order_by("pk")],
        batch_size=1000,
    )
    judges = set(JudgeConfig.objects.values_list("pk", flat=True))
    rows = []
    for c in NewCache.objects.filter(scope__startswith="judge:").order_by("pk"):
        judge = int(c.scope.split(":")[1])
        if judge in judges:
            rows.append(OldCache(pk=c.pk, key=c.key, judge_id=judge, content=c.content, output_mode=c.output_mode,
                                 prompt_tokens=c.prompt_tokens or 0, completion_tokens=c.completion_tokens or 0,
                                 created_at=c.created_at))
    OldCache.objects.bulk_create(rows, batch_size=1000)
    # The engine's rows of judge runs go (the judge rows hold everything again).
    JudgeRun.objects.update(run=None)
    ModelCall.objects.filter(run_id__in=list(by_run))._raw_delete(schema_editor.connection.alias)
    RunChunk.objects.filter(run_id__in=list(by_run))._raw_delete(schema_editor.connection.alias)
    NewCache.objects.filter(scope__startswith="judge:")._raw_delete(schema_editor.connection.alias)
    Run.objects.filter(pk__in=list(by_run))._raw_delete(schema_editor.connection.alias)
    _reset_sequences(schema_editor, [JudgeRunChunk, JudgeCall, OldCache])


class Migration(migrations.Migration):
    dependencies = [
        ("judges", "0004_runs_engine"),
    ]

    operations = [
        migrations.RunPython(forwards, backwards),
    ]
