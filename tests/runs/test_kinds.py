"""A kind of run is one declaration: a trivial kind written here in a few dozen lines gets the engine's
start, its one conflict error, its one broker-down behaviour, the chunk size, the CLI base (--wait,
--cancel, --budget, the report) and the job page's link, with nothing else written for it."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from kombu.exceptions import OperationalError as BrokerError

from annotation import jobs
from annotation.models import Job
from runs import engine
from runs.cli import RunCommand
from runs.clients import ChunkWork, ItemOutcome, RunClient, Sizing, register
from runs.models import Run
from runs.transport import Control

pytestmark = pytest.mark.django_db

# ---------------------------------------------------------------- the whole new kind (about 40 lines)


class SquareWork(ChunkWork):
    """Squares each item; an item of 13 fails. The results go into the run's notes."""

    def load(self, items: Sequence[int]) -> list[int]:
        return list(items)

    def execute(self, inputs: Sequence[int], control: Control) -> Iterator[ItemOutcome]:
        for n in inputs:
            if control.stop_reason():
                return
            yield ItemOutcome(item=n, status="failed" if n == 13 else "ok", reason="unlucky" if n == 13 else "",
                              notes=[] if n == 13 else [f"{n}^2={n * n}"])

    def commit(self, outcomes: Sequence[ItemOutcome]) -> None:
        pass  # the engine stores the notes


class SquareClient(RunClient):
    kind = "square"
    noun = "number"

    def sizing(self, run: Run) -> Sizing:
        return Sizing(target_requests=3)

    def open(self, run: Run) -> SquareWork:
        return SquareWork()


def start_square(study, numbers: Sequence[int], *, user=None, queue: bool = True) -> Run:
    return engine.start(
        "square", study_id=study.pk, job_kind="square", params={"numbers": len(numbers)}, items=numbers,
        record=lambda job, run: run, user=user, queue=queue,
        busy=lambda: "a square run is in progress" if Run.objects.filter(
            kind="square", job__study=study, job__status__in=engine.ACTIVE).exists() else None)


class SquareCommand(RunCommand):
    noun = "number"

    def add_kind_arguments(self, parser) -> None:
        parser.add_argument("--upto", type=int, default=5)

    def handle(self, *args, **opts):
        study = self.find_study(opts)
        if opts["cancel"]:
            return self.cancel_runs(Run.objects.filter(kind="square", job__status__in=engine.ACTIVE), "square")
        _, job = self.start_and_follow(lambda queue: start_square(study, range(1, opts["upto"] + 1), queue=queue),
                                       opts, label="square")
        self.exit_status(job)


register(SquareClient())

# ---------------------------------------------------------------- what it gets


def test_a_new_kind_starts_chunks_and_ends_through_the_engine(study):
    run = start_square(study, [1, 2, 3, 4, 13, 5, 6], queue=False)
    assert run.job.total == 7 and list(run.chunks.values_list("items", flat=True)) == [[1, 2, 3], [4, 13, 5], [6]]
    job = engine.run_inline(run)
    run.refresh_from_db()
    assert (job.status, job.done, job.failed) == (Job.Status.PARTIAL, 7, 1)
    assert run.notes["6^2=36"] == 1 and "1 of 7 numbers failed" in job.error
    assert run.job.params["run"] == run.pk


def test_a_second_start_is_the_one_conflict_error(study):
    start_square(study, [1, 2], queue=False)
    with pytest.raises(engine.RunConflict, match="in progress"):
        start_square(study, [3], queue=False)
    assert Job.objects.filter(kind="square").count() == 1  # nothing of the refused run was written


def test_with_the_broker_down_the_job_ends_failed(study, monkeypatch, django_capture_on_commit_callbacks):
    def down(*args, **kwargs):
        raise BrokerError("connection refused")

    monkeypatch.setattr(jobs, "queue_task", down)
    with pytest.raises(BrokerError), django_capture_on_commit_callbacks(execute=True):
        start_square(study, [1, 2])
    job = Job.objects.get(kind="square")
    assert job.status == Job.Status.FAILED and job.error == jobs.BROKER_DOWN and job.finished_at is not None
    assert not Run.objects.get(job=job).chunks.filter(status="pending").exists()


def test_the_cli_base_starts_waits_and_reports(study, capsys):
    call_command(SquareCommand(), "--study", study.name, "--upto", "4", "--wait")
    out = capsys.readouterr().out
    assert "square run" in out and "succeeded: 4 of 4 numbers done, 0 failed" in out and "0 requests" in out


def test_the_cli_base_refuses_a_budget_beyond_its_maximum(study):
    with pytest.raises(CommandError, match=r"--budget: must lie in 0\.\.100000"):
        call_command(SquareCommand(), "--study", study.name, "--budget", "1e9")


def test_the_cli_base_exits_1_unless_every_item_succeeded(study):
    with pytest.raises(SystemExit) as stop:
        call_command(SquareCommand(), "--study", study.name, "--upto", "13", "--wait")
    assert stop.value.code == 1


def test_chunk_size_is_one_formula_for_every_kind():
    class Fake(RunClient):
        kind = "fake"

        def __init__(self, sizing: Sizing) -> None:
            self._sizing = sizing

        def sizing(self, run):
            return self._sizing

        def open(self, run):
            raise NotImplementedError

    run = Run(lanes=1)
    # A whole number of rounds of the concurrency, about target_requests requests, per item's requests.
    assert Fake(Sizing(concurrency=4, target_requests=50)).chunk_size(run) == 52
    assert Fake(Sizing(concurrency=16, requests_per_item=4, target_requests=50, min_rounds=8)).chunk_size(run) == 32
    assert Fake(Sizing(target_requests=1000)).chunk_size(run) == 1000  # no model calls (mechanistic judge)
    run.lanes = 2  # a lane's share of the concurrency
    assert Fake(Sizing(concurrency=64, target_requests=50, min_rounds=8)).chunk_size(run) == 256
