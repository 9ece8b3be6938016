"""Judge runs are done by the run engine's task (runs.tasks.run_chunk).
This name stays for chunk messages queued before the engine moved (chunk ids
were kept by the migration)."""

from __future__ import annotations

from celery import shared_task

from runs import engine


@shared_task(name="judges.tasks.judge_chunk")
def judge_chunk(chunk_id: int) -> None:
    engine.queue_chunk(chunk_id)
