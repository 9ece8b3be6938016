"""The engine's promises for every kind, shown with stub kinds: honest statuses, exact progress, a
displaced holder that commits nothing, and calls whose tokens are unknown. The trivial kind of
test_kinds.py squares numbers without a model; the echo kind below asks the fake server once per item.
What a judge run adds to these (labels, per-trace results, reasons) is tested in tests/judges."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence

import pytest
from django.core.management import call_command

from annotation.models import Job
from runs import engine, transport
from runs.clients import ChunkWork, ItemOutcome, RunClient, register
from runs.models import ModelCall, Run, RunChunk
from runs.transport import Control, Endpoint, ModelPool, ModelRequest
from tests.runs.fake_openai import Fault
from tests.runs.test_kinds import SquareCommand, start_square

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("quick_retries")]


class EchoWork(ChunkWork):
    """One chat request per item to the server the run's config names; nothing to store of its own."""

    def __init__(self, run: Run) -> None:
        self.pool = ModelPool(Endpoint(**run.config), "echo", None, force=True)

    def load(self, items: Sequence[int]) -> list[int]:
        return list(items)

    def execute(self, inputs: Sequence[int], control: Control) -> Iterator[ItemOutcome]:
        requests = [ModelRequest(item=n, build=lambda mode, n=n: {"messages": [{"role": "user", "content": f"{n}"}]})
                    for n in inputs]
        for done in self.pool.run(requests, control):
            yield ItemOutcome(item=done.request.item, status=done.status, reason=done.reason, calls=done.calls)

    def commit(self, outcomes: Sequence[ItemOutcome]) -> None:
        pass

    def close(self) -> None:
        self.pool.close()


class EchoClient(RunClient):
    kind = "echo"

    def open(self, run: Run) -> EchoWork:
        return EchoWork(run)


register(EchoClient())


def start_echo(study, numbers: Sequence[int], **endpoint) -> Run:
    return engine.start("echo", study_id=study.pk, job_kind="echo", params={}, items=numbers,
                        record=lambda job, run: run, config=endpoint, queue=False)


def test_a_run_with_some_failed_items_is_partial_and_the_cli_exits_non_zero(study, capsys):
    with pytest.raises(SystemExit) as exit_:
        call_command(SquareCommand(), "--study", study.name, "--upto", "13", "--wait")
    assert exit_.value.code == 1
    out, err = capsys.readouterr()
    assert "partial: 13 of 13 numbers done, 1 failed" in out and "1 of 13 numbers failed" in err
    job = Job.objects.get(kind="square")
    assert job.status == Job.Status.PARTIAL and job.error.startswith("1 of 13 numbers failed")


def test_a_run_where_every_item_failed_is_failed(study):
    job = engine.run_inline(start_square(study, [13], queue=False))
    assert job.status == Job.Status.FAILED and job.error.startswith("every number failed")


def test_progress_counts_every_item_once_across_chunks(study):
    run = start_square(study, range(1, 9), queue=False)  # 3 numbers a chunk: three chunks
    seen: list[tuple[int, int]] = []
    job = engine.run_inline(run, progress=lambda done, total: seen.append((done, total)))
    assert run.chunks.count() == 3
    assert seen[-1] == (8, 8) and (job.done, job.total) == (8, 8)
    assert [done for done, _ in seen] == sorted(done for done, _ in seen)  # never goes back


def test_a_displaced_holder_stops_and_commits_nothing(study, monkeypatch):
    original = engine.RunControl.heartbeat
    beats = []

    def stolen(self):
        beats.append(1)
        if len(beats) == 2:  # another worker took the chunk over while ours was at work
            RunChunk.objects.filter(pk=self.chunk_id).update(holder="celery@other/boot/1-x")
        self.renewed = float("-inf")  # renew now: the theft is found at this beat
        return original(self)

    monkeypatch.setattr(engine.RunControl, "heartbeat", stolen)
    run = start_square(study, [1, 2, 3], queue=False)
    job = engine.run_inline(run)
    run.refresh_from_db()
    chunk = run.chunks.get()
    assert chunk.holder == "celery@other/boot/1-x" and chunk.status == RunChunk.Status.RUNNING
    assert job.done == 0 and not job.finished
    assert run.notes == {}  # the one item squared before the theft was not committed


def test_a_timed_out_call_is_counted_as_unknown_tokens_not_zero(study, server):
    server.inject(Fault(delay=1.0))
    run = start_echo(study, [1, 2], base_url=server.url, model="m", concurrency=1, max_retries=1,
                     timeout_seconds=0.3)
    job = engine.run_inline(run)
    run.refresh_from_db()
    assert job.status == Job.Status.SUCCEEDED
    assert run.unknown_token_calls == 1 and run.requests == 3
    answered = ModelCall.objects.filter(run=run, http_status=200)
    assert answered.count() == 2
    assert (run.prompt_tokens, run.completion_tokens) == (sum(c.prompt_tokens for c in answered),
                                                          sum(c.completion_tokens for c in answered))
    timed_out = ModelCall.objects.get(run=run, http_status=None)
    assert timed_out.prompt_tokens is None and timed_out.completion_tokens is None


@pytest.mark.django_db(transaction=True)  # the beating thread has a connection of its own: it sees what is committed
def test_work_without_items_to_ask_between_keeps_its_lease_from_a_thread(study):
    """engine.beating: while the work runs (a score run's stored summary: minutes at 1M traces, no item to ask
    between), a thread renews the chunk's lease, so no other worker takes the chunk over; it ends with the work."""
    run = start_square(study, [1, 2, 3], queue=False)
    chunk = run.chunks.get()
    assert engine.claim_chunk(chunk.pk, "celery@here/boot/1-x")
    control = engine.RunControl(run, chunk.pk, "celery@here/boot/1-x")
    control.renew_every = 0.01
    claimed = RunChunk.objects.get(pk=chunk.pk).lease_until
    before = {t.name for t in threading.enumerate()}
    with engine.beating(control):
        for _ in range(3000):  # the work: until the thread has renewed the lease (at most 30 s)
            if RunChunk.objects.get(pk=chunk.pk).lease_until > claimed:
                break
            time.sleep(0.01)
    assert RunChunk.objects.get(pk=chunk.pk).lease_until > claimed and not control.lost
    assert {t.name for t in threading.enumerate()} == before  # the thread is gone
    with engine.beating(transport.NoStop()):  # an inline run's control: no lease, no thread
        assert {t.name for t in threading.enumerate()} == before
