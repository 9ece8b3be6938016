"""The score recompute as runs of the run engine (kind "score", docs/runs.md): a spread run, so every
free worker process, on every machine, takes its chunks of traces, with the engine's progress, cancel
and resume. A chunk is one item: item i < K adds up chunk i's hazard counts, item K + i scores and writes
chunk i, item 2K + j stores the j-th summary of the scores or warms the cache (scoring.score_jobs:
chunk_tally, chunk_scores, summary_step, merge)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from annotation.models import Job
from runs import engine
from runs.clients import ChunkWork, ItemOutcome, RunClient, Sizing
from runs.models import Run
from runs.transport import Control
from scoring.models import ScoreRun

# pandas and the scoring core load only when a chunk is worked (scoring.score_jobs, scoring.storage,
# imported in the methods): a web process registers this client without them.


class ScoreWork(ChunkWork):
    def __init__(self, record: ScoreRun) -> None:
        from scoring import score_jobs

        self.record = record
        self.plan = score_jobs.plan_of(record)

    def load(self, items: Sequence[int]) -> list[Any]:
        return list(items)

    def execute(self, inputs: Sequence[Any], control: Control) -> Iterator[ItemOutcome]:
        from scoring import score_jobs

        k = len(self.plan.spans)

        def stop() -> bool:
            return control.stop_reason() is not None

        for item in inputs:
            if stop():
                return
            if item < k:
                yield ItemOutcome(item=item, status="ok", result=score_jobs.chunk_tally(self.plan, self.plan.spans[item]))
                continue
            if item >= 2 * k:
                # Committed by itself, before the chunk is (score_jobs.summary_step): done twice (a worker
                # displaced, or its lease lost), it is stored again in the same way.
                whole = self.record.job.params.get("profiles") is None
                with engine.beating(control):  # no item to ask between: the lease is renewed from a thread
                    score_jobs.summary_step(self.record.summaries[item - 2 * k], self.plan.study, self.record.job,
                                            whole)
                yield ItemOutcome(item=item, status="ok")
                continue
            try:
                written = score_jobs.chunk_scores(self.plan, self.plan.spans[item - k], should_stop=stop)
            except score_jobs.JobCancelled:
                return
            yield ItemOutcome(item=item, status="ok", result=written)

    def commit(self, outcomes: Sequence[ItemOutcome]) -> None:
        from scoring import score_jobs

        done = [(o.item, o.result) for o in outcomes if o.status == "ok"]
        if done:
            score_jobs.merge(self.record.pk, done)


class ScoreClient(RunClient):
    kind = ScoreRun.KIND
    noun = "chunk of traces"
    label = "Scores"
    record_model = ScoreRun
    listed = False  # one after every change of the data: the jobs list shows them, not the runs of model calls

    def sizing(self, run: Run) -> Sizing:
        # One chunk of traces per run chunk; CPU and database work only: spread over every worker process.
        return Sizing(target_requests=1, spread=True)

    def plan(self, run: Run) -> list[int]:
        from scoring import score_jobs, storage

        record = self.record(run)
        plan = score_jobs.make_plan(record.job.study, record.job.params.get("profiles"), str(record.job_id))
        record.profiles = {name: plan.current[name].pk for name in plan.names}
        record.spans = [list(span) for span in plan.spans]
        # The third phase's steps, fixed here so that every process numbers its items alike.
        record.summaries = score_jobs.summary_steps()
        record.save(update_fields=["profiles", "spans", "summaries"])
        storage.delete_staging(record.job.study, str(record.job_id))  # of an earlier attempt
        return list(range(len(plan.spans)))

    def open(self, run: Run) -> ChunkWork:
        return ScoreWork(self.record(run))

    def finished(self, run: Run) -> None:
        from scoring import storage

        record = self.record(run)
        if record.job.status != Job.Status.SUCCEEDED or record.phase != ScoreRun.Phase.PUBLISHED:
            # Cancelled or failed before the sets were published: the old sets stay (after: nothing is staged).
            storage.delete_staging(record.job.study, str(record.job_id))
