"""The run engine: chunks with leases, a heartbeat, idempotent commits,
honest statuses (docs/runs.md).

A run is a Job with a Run and its chunks. Chunks are processed one after the
other (each task goes on with the next, then queues it), so one run keeps
exactly its ``concurrency`` requests in flight. A chunk is claimed with a
conditional UPDATE; while it is worked on a heartbeat renews its lease and
looks for a cancel (runs.transport beats it at least every half second,
whatever the requests are doing); its outcomes are committed in one
transaction with the status change, and only while this process still holds
it, so a re-delivered task finds it done and does nothing and a displaced
process writes nothing. A chunk whose worker died is taken over when its
lease expires or when a worker with the same node name starts again.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from annotation import jobs
from annotation.jobs import BROKER_DOWN, RunConflict
from annotation.models import Job
from runs import identity
from runs.clients import ItemOutcome, RunClient, client_for
from runs.models import ModelCall, Run, RunChunk
from runs.params import check as check_param
from runs.transport import FatalRunError

log = logging.getLogger(__name__)

Progress = Callable[[int, int], None]  # (items done, total)

ACTIVE = (Job.Status.QUEUED, Job.Status.RUNNING)
MAX_CHUNK_ATTEMPTS = 3
#: The tasks a spread run queues when it starts: more worker processes than this do not share one run.
SPREAD_TASKS = 64
CHUNK_TASK = "runs.tasks.run_chunk"
PLAN_TASK = "runs.tasks.plan_run"


def lease_seconds() -> float:
    """How long a chunk stays with a worker that stops renewing it."""
    return float(getattr(settings, "RUN_CHUNK_LEASE_SECONDS", 300))


def _lease() -> timedelta:
    return timedelta(seconds=lease_seconds())


# --------------------------------------------------------------------------
# Creating and queueing


def create_run(job: Job, kind: str, items: Sequence[int], chunk_size: int, *, force: bool = False,
               budget_usd: float | None = None, config: dict[str, Any] | None = None, lanes: int = 1) -> Run:
    """The Run of ``job`` and its chunks (call inside the caller's transaction).
    A run with no items ends at once (succeeded). ``lanes`` chains of chunks
    are worked on at once (chunk i belongs to lane i mod lanes), each with its
    share of the run's concurrency (``lane_share``); never more lanes than chunks."""
    if budget_usd is not None and budget_usd < 0:
        raise ValueError("the budget must not be negative")
    size = max(1, chunk_size)
    n_chunks = -(-len(items) // size)
    lanes = max(1, min(lanes, n_chunks))
    run = Run.objects.create(job=job, kind=kind, force=force, budget_usd=budget_usd, config=config or {}, lanes=lanes)
    add_chunks(run, items, size)
    return run


# What runs.kinds adds to every run it starts, whatever the kind's service passes: the shared ``concurrency``
# cap and the parameters as asked (for a retry). A context, so no kind's service has to thread them through.
_OVERRIDES: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar("run_overrides", default=None)


@contextlib.contextmanager
def overrides(*, concurrency: int | None = None, request: dict[str, Any] | None = None) -> Iterator[None]:
    """Runs started inside take at most ``concurrency`` requests in flight (``config["max_concurrency"]``,
    read by RunControl, hence the pool, and by the chunk size) and keep ``request`` in their job's params."""
    token = _OVERRIDES.set({"concurrency": check_param("concurrency", concurrency), "request": request})
    try:
        yield
    finally:
        _OVERRIDES.reset(token)


def start(kind: str, *, study_id: int, job_kind: str, params: dict[str, Any],
          items: Sequence[int] | Callable[[Any], Sequence[int]] | None, record: Callable[[Job, Run], Any],
          busy: Callable[[], str | None] | None = None, user=None, force: bool = False,
          budget_usd: float | None = None, config: dict[str, Any] | None = None, lanes: int = 1,
          queue: bool = True) -> Any:
    """Start a run of ``kind``, the same way for every kind, and return the kind's row.

    In one transaction: ``busy()`` says why another run may not start now (a RunConflict: HTTP 409 on
    the web and the API), the Job, the engine's Run and the kind's row (``record(job, run)``); the
    items (a list, or ``items(row)`` for kinds that plan their items with the row, such as
    faithfulness), cut into chunks of the client's ``chunk_size``; then the first chunks are queued
    once it commits (``queue=False``: the caller works it with run_inline). A run with no items ends
    at once. With the task queue down the job ends failed with BROKER_DOWN and the broker's error
    is raised (503 on the web and the API), whatever the kind (queue_first).

    ``items=None``: the kind plans its items in the job (RunClient.plan: heavy selection or rows to
    write), not in the caller's request -- the plan task is queued instead of the first chunks, or
    (``queue=False``) the plan is made here before the caller works the run inline."""
    budget_usd = check_param("budget_usd", budget_usd)
    extra = _OVERRIDES.get() or {}
    if extra.get("concurrency"):
        config = {**(config or {}), "max_concurrency": extra["concurrency"]}
    if extra.get("request"):
        params = {**params, "request": extra["request"]}
    with transaction.atomic():
        reason = busy() if busy is not None else None
        if reason:
            raise RunConflict(reason)
        job = Job.objects.create(study_id=study_id, kind=job_kind, created_by=user, total=0, params=params)
        run = Run.objects.create(job=job, kind=kind, force=force, budget_usd=budget_usd, config=config or {},
                                 lanes=max(1, lanes))
        row = record(job, run)
        job.params["run"] = row.pk
        job.save(update_fields=["params"])
        if items is None and queue:
            transaction.on_commit(lambda: _queue_or_fail(run, PLAN_TASK, run.pk))
        else:
            _plan(run, items(row) if callable(items) else items if items is not None else None)
            launch(run, queue=queue)  # the broker down: queue_first ends the job failed
    row.refresh_from_db()  # what planning wrote to it
    row.job.refresh_from_db()
    return row


def _plan(run: Run, items: Sequence[int] | None) -> None:
    """The run's chunks: of ``items``, or of what the client plans (None). Call inside a transaction."""
    client = client_for(run.kind)
    ids = list(client.plan(run) if items is None else items)
    size = client.chunk_size(run)
    fields = ["lanes"]
    if client.sizing(run).spread:
        # A spread run: one task per chunk (up to SPREAD_TASKS) waits in the queue for any free worker
        # process, and each task, its own chunk done, takes any pending chunk of the run (spread_of).
        run.lanes = SPREAD_TASKS
        run.refresh_from_db(fields=["config"])  # what the client's plan stored on its own copy of the row
        run.config = {**(run.config or {}), "spread": True}
        fields.append("config")
    # Never more lanes than chunks.
    run.lanes = max(1, min(run.lanes, -(-len(ids) // size)))
    # Only what this function changed: a client's plan may have stored its own config on another instance
    # of the row (fidelity's originals), which saving this instance's stale config would erase.
    run.save(update_fields=fields)
    add_chunks(run, ids, size)
    Job.objects.filter(pk=run.job_id).update(total=len(ids))


def attach(job: Job, kind: str, record: Callable[[Job, Run], Any], *, config: dict[str, Any] | None = None) -> Any:
    """A run of ``kind`` for a job that exists already (the score job, created and debounced before its
    work is known): the engine's Run and the kind's row, as ``start`` makes them; then ``plan_run``."""
    with transaction.atomic():
        run = Run.objects.create(job=job, kind=kind, config=config or {})
        row = record(job, run)
        job.params["run"] = row.pk
        Job.objects.filter(pk=job.pk).update(params=job.params)
    return row


def plan_run(run_id: int, *, queue: bool = True) -> None:
    """The plan task's work: the client plans the run's items, its chunks are made and the first ones
    queued, in one transaction (a re-delivered task finds the chunks made and only queues). A plan the
    client refuses (ValueError, FatalRunError) ends the job failed with its reason. ``queue=False``: the
    caller works the run itself (run_inline)."""
    run = Run.objects.select_related("job").filter(pk=run_id).first()
    if run is None or run.job.finished:
        return
    if run.job.cancel_requested:
        finalize(run)
        return
    Job.objects.filter(pk=run.job_id, status=Job.Status.QUEUED).update(status=Job.Status.RUNNING,
                                                                       started_at=timezone.now())
    try:
        with transaction.atomic():
            Run.objects.select_for_update().filter(pk=run.pk).first()
            if not run.chunks.exists():
                _plan(run, None)
            launch(run, queue=queue)
    except (ValueError, FatalRunError) as exc:
        finalize(run, status=Job.Status.FAILED, error=f"planning failed: {exc}")


def add_chunks(run: Run, items: Sequence[int], chunk_size: int, *, first_index: int = 0) -> None:
    """The chunks of ``items``, for a run created before its items were known (faithfulness plans its
    interventions with the run's id), or items known only once earlier chunks are done (``first_index``:
    after theirs; the score run's second pass); chunk i belongs to lane i mod the run's lanes."""
    size = max(1, chunk_size)
    RunChunk.objects.bulk_create(
        [RunChunk(run=run, index=i, lane=i % run.lanes, items=list(items[start:start + size]))
         for i, start in enumerate(range(0, len(items), size), start=first_index)]
    )


def lane_share(total: int, lanes: int, lane: int) -> int:
    """A lane's part of ``total`` (concurrency, or a rate limit): the parts add up to ``total``, at least 1 each."""
    lanes = max(1, lanes)
    return max(1, total // lanes + (lane < total % lanes))


def launch(run: Run, *, queue: bool) -> None:
    """Start a run just created: a run with no items ends at once; otherwise its first chunks are
    queued once the caller's transaction commits (queue=False: the caller works it inline)."""
    if not run.chunks.exists():
        finalize(run)
    elif queue:
        queue_first(run)


def queue_first(run: Run) -> None:
    """Queue the first chunk of each lane once the caller's transaction commits. With the task queue
    down the run's job ends failed at once with BROKER_DOWN (a job nobody will ever work must not stay
    queued), then the broker's error goes on to the caller (503 on the web and the API)."""
    for lane in range(run.lanes):
        first = next_chunk(run, lane)
        if first is not None:
            transaction.on_commit(lambda first=first: _queue_or_fail(run, CHUNK_TASK, first))


def _queue_or_fail(run: Run, task: str, arg: int) -> None:
    from kombu.exceptions import OperationalError as BrokerError

    try:
        jobs.queue_task(task, arg)
    except BrokerError:
        run.chunks.filter(status=RunChunk.Status.PENDING).update(status=RunChunk.Status.SKIPPED)
        Run.objects.filter(pk=run.pk).update(stop_reason=BROKER_DOWN[:500])
        jobs.finish(run.job_id, status=Job.Status.FAILED, error=BROKER_DOWN)
        raise


def queue_chunk(chunk_id: int) -> None:
    """Queue a chunk task by name (this module is imported by the tasks, not the other way round)."""
    jobs.queue_task(CHUNK_TASK, chunk_id)


def next_chunk(run: Run, lane: int | None = None) -> int | None:
    """The lowest pending chunk (of ``lane``, when given)."""
    chunks = run.chunks.filter(status=RunChunk.Status.PENDING)
    if lane is not None:
        chunks = chunks.filter(lane=lane)
    return chunks.order_by("index").values_list("pk", flat=True).first()


def is_spread(run: Run) -> bool:
    """A run whose chunks any task of it takes (Sizing.spread): its lanes are only the tasks it started with,
    and a lane that has no pending chunk left goes on with another lane's (work stealing). Chains of an LLM
    run keep their lanes: each holds its share of the run's concurrency."""
    return bool((run.config or {}).get("spread"))


def lane_of(run: Run, lane: int) -> int | None:
    """Where a task of ``run`` looks for its next chunk: its lane, or any lane for a spread run."""
    return None if is_spread(run) else lane


def finalize_when_done(run: Run) -> None:
    """End the run if no chunk of any lane is pending or running; with one
    lane that is always so here. The run's row is locked, so of two lanes
    ending together the second sees the first one's chunks done. The lanes as the locked row has them: a
    spread run may have been given more since the caller read it (the score run's summary steps)."""
    with transaction.atomic():
        locked = Run.objects.select_for_update().filter(pk=run.pk).only("lanes").first()
        lanes = locked.lanes if locked is not None else run.lanes
        if lanes > 1 and run.chunks.filter(
                status__in=(RunChunk.Status.PENDING, RunChunk.Status.RUNNING)).exists():
            return
        finalize(run)


def run_inline(run: Run, *, progress: Progress | None = None) -> Job:
    """Process every chunk of ``run`` in this process (CLI, demo, eager mode)."""
    pipeline = ChunkPipeline(identity.inline_holder(), progress=progress)
    chunk = next_chunk(run)
    if chunk is None:
        finalize(run)
    while chunk is not None:
        # A lane that ends hands on to the next lane's chunks (this process does them all, one after the other).
        chunk = pipeline.process(chunk) or next_chunk(run)
    pipeline.flush()
    return Job.objects.get(pk=run.job_id)


def run_here(run: Run, *, progress: Progress | None = None) -> Job:
    """Work ``run`` in this process (a command with Celery eager): plan it first when its kind plans in the
    job and its plan task has not run (it waits for a commit that a caller's transaction holds back)."""
    client = client_for(run.kind)
    if type(client).plan is not RunClient.plan and not run.chunks.exists() and not run.job.finished:
        plan_run(run.pk)
    return run_inline(run, progress=progress)


# --------------------------------------------------------------------------
# The lease and the heartbeat


class RunControl:
    """What the work asks between items and the pool on every heartbeat:
    cancel requested? budget spent? lease lost? ``heartbeat()`` renews the
    chunk's lease every quarter lease (at most every minute) and reads the cancel flag every RUN_CANCEL_CHECK_SECONDS;
    the pool calls it at least every half second, whatever its requests do."""

    def __init__(self, run: Run, chunk_id: int, holder: str, lane: int = 0) -> None:
        self.run = run
        self.chunk_id = chunk_id
        self.holder = holder
        # The pool takes this lane's share of the concurrency and of the rate limit (lane_share), under the
        # run's cap when it was started with one (runs.kinds.RunParams.concurrency).
        self.lanes, self.lane = run.lanes, lane
        self.concurrency: int | None = (run.config or {}).get("max_concurrency")
        self.check_every = float(getattr(settings, "RUN_CANCEL_CHECK_SECONDS", 0.5))
        self.renew_every = min(lease_seconds() / 4, 60.0)
        self.spent = run.cost_usd
        self.cancelled = False
        self.lost = False
        self.checked = float("-inf")
        self.renewed = time.monotonic()
        self.idle_work: Callable[[], None] | None = None  # the previous chunk's commit (ChunkPipeline)

    def idle(self) -> None:
        """The requests are in flight: do the work that waited for that, once."""
        work, self.idle_work = self.idle_work, None
        if work is not None:
            work()

    def charge(self, cost_usd: float) -> None:
        self.spent += cost_usd

    def stop_reason(self) -> str | None:
        """Beats the heartbeat when due (work without requests asks between
        items), then: lost, cancelled, budget spent, or None."""
        self.heartbeat()
        return self.reason()

    def reason(self) -> str | None:
        if self.lost:
            return "lost"
        if self.cancelled:
            return "cancelled"
        budget = self.run.budget_usd
        if budget is not None and self.spent >= budget:
            return "budget"
        return None

    def heartbeat(self) -> str | None:
        now = time.monotonic()
        if now - self.renewed >= self.renew_every and not self.lost:
            self.renewed = now
            self.lost = not RunChunk.objects.filter(
                pk=self.chunk_id, holder=self.holder, status=RunChunk.Status.RUNNING
            ).update(lease_until=timezone.now() + _lease())
            if self.lost:
                log.warning("run chunk %s was taken over by another worker; this process stops", self.chunk_id)
        if now - self.checked >= self.check_every and not self.cancelled:
            self.checked = now
            self.cancelled = Job.objects.filter(pk=self.run.job_id).filter(
                Q(cancel_requested=True) | ~Q(status__in=ACTIVE)
            ).exists()
        return self.reason()


@contextlib.contextmanager
def beating(control: Any) -> Iterator[None]:
    """Renews the chunk's lease from a thread of its own while the caller does work that cannot ask between items
    (a score run's stored summary: a few long queries, minutes at 1M traces, past the lease: another worker would
    take the chunk over and do it again). Other controls (inline runs: no lease) need nothing."""
    if not isinstance(control, RunControl):
        yield
        return
    done = threading.Event()

    def beat() -> None:
        try:
            while not done.wait(control.renew_every):
                try:
                    control.heartbeat()
                except DatabaseError:  # SQLite's writer lock held by the work itself: renewed at the next beat
                    log.warning("run chunk %s: the lease could not be renewed now", control.chunk_id, exc_info=True)
        finally:
            connection.close()  # this thread's own connection

    thread = threading.Thread(target=beat, name=f"lease-of-chunk-{control.chunk_id}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


# --------------------------------------------------------------------------
# Processing a chunk


def claim_chunk(chunk_id: int, holder: str) -> bool:
    now = timezone.now()
    return bool(
        RunChunk.objects.filter(pk=chunk_id)
        .filter(Q(status=RunChunk.Status.PENDING) | Q(status=RunChunk.Status.RUNNING, lease_until__lt=now))
        .update(status=RunChunk.Status.RUNNING, holder=holder, lease_until=now + _lease(), attempts=F("attempts") + 1)
    )


def _release(chunk: RunChunk, holder: str, status: str) -> bool:
    return bool(
        RunChunk.objects.filter(pk=chunk.pk, holder=holder, status=RunChunk.Status.RUNNING)
        .update(status=status, lease_until=None)
    )


@dataclass
class _Tally:
    done: int = 0
    failed: int = 0


@dataclass
class _Pending:
    """A chunk whose requests are over and whose outcomes wait for their
    commit, which ChunkPipeline does while the next chunk's first requests are
    in flight (the commit is database work on the calling thread; the requests
    need none of it). Still held by this process, so nobody else takes it."""

    chunk: RunChunk
    holder: str
    work: Any
    outcomes: list[ItemOutcome]
    tally: _Tally
    missing: int
    committed: bool = False
    dropped: bool = False

    @property
    def cost_usd(self) -> float:
        return sum(o.cost_usd for o in self.outcomes)

    def commit(self) -> None:
        if self.committed or self.dropped:
            return
        self.dropped = not _commit_chunk(self.chunk, self.holder, self.work, self.outcomes, self.tally, self.missing)
        self.committed = not self.dropped


def _commit_chunk(chunk: RunChunk, holder: str, work, outcomes: Sequence[ItemOutcome], tally: _Tally,
                  missing: int) -> bool:
    """The chunk's outcomes, its release and the job's counters in one
    transaction, only while this process still holds the chunk (False: it does not; nothing is written)."""
    with transaction.atomic():
        if not _release(chunk, holder, RunChunk.Status.DONE):
            transaction.set_rollback(True)
            log.warning("run chunk %s is no longer held by %s; its outcomes are dropped", chunk.pk, holder)
            return False
        work_commit(work, outcomes)
        record_outcomes(chunk.run, outcomes)
        Job.objects.filter(pk=chunk.run.job_id).update(done=F("done") + tally.done + missing,
                                                       failed=F("failed") + tally.failed)
    return True


def process_chunk(chunk_id: int, holder: str, *, progress: Progress | None = None) -> int | None:
    """Do one chunk and commit its outcomes. Returns the next chunk to queue,
    or None (run over, or the chunk was not ours to do). Safe to call twice."""
    return _process(chunk_id, holder, progress, None, defer=False)[0]


class ChunkPipeline:
    """Processes a run's chunks one after the other, as process_chunk does,
    but commits each chunk while the first requests of the next one are in
    flight, so the server never waits for the database between chunks (see
    docs/runs.md). ``flush()`` commits the last one; after an exception
    ``release_failed`` gives back every chunk not committed."""

    def __init__(self, holder: str, *, progress: Progress | None = None) -> None:
        self.holder = holder
        self.progress = progress
        self.pending: _Pending | None = None
        self.current: int | None = None

    def process(self, chunk_id: int) -> int | None:
        self.current = chunk_id
        nxt, pending = _process(chunk_id, self.holder, self.progress, self.pending, defer=True)
        self.pending = pending
        return nxt

    def flush(self) -> None:
        if self.pending is not None:
            self.pending.commit()
            self.pending = None

    def release_failed(self, error: str) -> int | None:
        """After an unexpected error: the chunks not committed go back (or fail
        the run after MAX_CHUNK_ATTEMPTS); returns the one to queue again."""
        chunks = [self.pending.chunk.pk] if self.pending is not None and not self.pending.committed else []
        if self.current is not None:
            chunks.append(self.current)
        again = [c for c in dict.fromkeys(chunks) if release_failed_chunk(c, self.holder, error) is not None]
        self.pending = None
        # One task at a time per run: the others are found by next_chunk.
        return min(again) if again else None


def _process(chunk_id: int, holder: str, progress: Progress | None, previous: _Pending | None, *,
             defer: bool) -> tuple[int | None, _Pending | None]:
    try:
        return _process_chunk(chunk_id, holder, progress, previous, defer=defer)
    except BaseException:
        # Keep what the previous chunk finished, whatever went wrong with this one.
        if previous is not None and not previous.committed and not previous.dropped:
            try:
                previous.commit()
            except Exception:
                log.exception("run chunk %s: could not commit its outcomes", previous.chunk.pk)
        raise


def _process_chunk(chunk_id: int, holder: str, progress: Progress | None, previous: _Pending | None, *,
                   defer: bool) -> tuple[int | None, _Pending | None]:
    if not claim_chunk(chunk_id, holder):
        if previous is not None:
            previous.commit()
        # A spread run's task that finds its chunk taken (another task stole it, or this task came twice)
        # goes on with any pending one: its work is not over while the run has some.
        taken = RunChunk.objects.select_related("run").filter(pk=chunk_id).first()
        return (next_chunk(taken.run) if taken is not None and is_spread(taken.run) else None), None
    chunk = RunChunk.objects.select_related("run__job").get(pk=chunk_id)
    run, job = chunk.run, chunk.run.job
    if job.cancel_requested or job.finished:
        if previous is not None:
            previous.commit()
        _release(chunk, holder, RunChunk.Status.SKIPPED)
        finalize(run)
        return None, None
    if job.status == Job.Status.QUEUED:
        Job.objects.filter(pk=job.pk, status=Job.Status.QUEUED).update(status=Job.Status.RUNNING,
                                                                       started_at=timezone.now())
    client = client_for(run.kind)
    control = RunControl(run, chunk.pk, holder, chunk.lane)
    # What the previous chunk did is not in the rows read above until it commits.
    base_done, base_failed = job.done, job.failed
    if previous is not None and not previous.committed:
        control.spent += previous.cost_usd
        base_done += previous.tally.done + previous.missing
        base_failed += previous.tally.failed
        control.idle_work = previous.commit
    tally = _Tally()
    outcomes: list[ItemOutcome] = []
    fatal = ""
    last_report = 0.0

    def report(done: int, failed: int, force: bool = False) -> None:
        nonlocal last_report
        now = time.monotonic()
        if force or now - last_report >= 0.25:
            last_report = now
            jobs.report_progress(job.pk, done, job.total, failed)
            if progress:
                progress(done, job.total)

    work = None
    inputs: list = []
    try:
        work = client.open(run)
        inputs = work.load(chunk.items)
        for outcome in work.execute(inputs, control):
            outcomes.append(outcome)  # a skipped item (stopped mid-retry) still had calls that cost
            if outcome.status == "skipped":
                continue
            tally.done += 1
            tally.failed += outcome.status == "failed"
            report(base_done + tally.done, base_failed + tally.failed)
    except FatalRunError as exc:
        fatal = str(exc)
    finally:
        if work is not None:
            work.close()
    control.idle()  # no request was made (all cached, or nothing to do): the previous chunk commits now
    if control.heartbeat() == "lost" or control.lost:
        log.warning("run chunk %s: dropping %d outcomes of a displaced holder", chunk.pk, tally.done)
        return None, None
    # Only items with an outcome are done (a stop leaves the rest for another run);
    # items deleted since the run started count as done.
    missing = len(chunk.items) - len(inputs) if work is not None and not fatal else 0
    stop = control.reason()
    if defer and not fatal and stop is None:
        pending = run.chunks.filter(status=RunChunk.Status.PENDING).exclude(pk=chunk.pk)
        if not is_spread(run):
            pending = pending.filter(lane=chunk.lane)
        nxt = pending.order_by("index").values_list("pk", flat=True).first()
        if nxt is not None:
            report(base_done + tally.done + missing, base_failed + tally.failed, force=True)
            return nxt, _Pending(chunk, holder, work, outcomes, tally, missing)
    if not _commit_chunk(chunk, holder, work, outcomes, tally, missing):
        return None, None
    job.refresh_from_db(fields=["done", "failed", "total"])
    report(job.done, job.failed, force=True)
    nxt = next_chunk(run, lane_of(run, chunk.lane))
    stop = control.reason()  # no heartbeat: the chunk is released
    if fatal:
        return finalize(run, status=Job.Status.FAILED, error=fatal), None
    if stop == "cancelled":
        return finalize(run), None
    if stop == "budget" and (tally.done < len(inputs) or next_chunk(run) is not None):
        run.refresh_from_db(fields=["cost_usd"])
        return finalize(run, status=Job.Status.FAILED,
                        error=f"stopped: the budget of ${run.budget_usd:g} is spent (${run.cost_usd:.4f})"), None
    if nxt is None:
        return finalize_when_done(run), None
    return nxt, None


def work_commit(work, outcomes: Sequence[ItemOutcome]) -> None:
    if work is not None and outcomes:
        work.commit(outcomes)


def record_outcomes(run: Run, outcomes: Sequence[ItemOutcome]) -> None:
    """Store every call and add the outcomes to the run's counters (inside the chunk's transaction)."""
    now = timezone.now()
    ModelCall.objects.bulk_create(
        [ModelCall(run=run, item=o.item, attempt=c.attempt, output_mode=c.output_mode, outcome=c.outcome,
                   http_status=c.http_status, error=c.error[:2000], latency_ms=c.latency_ms,
                   prompt_tokens=c.prompt_tokens, completion_tokens=c.completion_tokens, cost_usd=c.cost_usd, at=now)
         for o in outcomes for c in o.calls],
        batch_size=1000,
    )
    notes = Counter(note for o in outcomes for note in dict.fromkeys(o.notes))
    updates: dict[str, Any] = dict(
        requests=F("requests") + sum(len(o.calls) for o in outcomes),
        cache_hits=F("cache_hits") + sum(o.cached for o in outcomes),
        prompt_tokens=F("prompt_tokens") + sum(o.prompt_tokens for o in outcomes),
        completion_tokens=F("completion_tokens") + sum(o.completion_tokens for o in outcomes),
        unknown_token_calls=F("unknown_token_calls") + sum(o.unknown_token_calls for o in outcomes),
        cost_usd=F("cost_usd") + sum(o.cost_usd for o in outcomes),
        warnings=F("warnings") + sum(len(o.warnings) for o in outcomes),
    )
    modes = [o.output_mode for o in outcomes if o.output_mode and not o.cached]
    if modes:
        updates["output_mode"] = modes[-1]
    Run.objects.filter(pk=run.pk).update(**updates)
    if notes:
        # A JSON merge: the chunk's transaction holds the row, so read-modify-write is safe.
        current = Run.objects.select_for_update().values_list("notes", flat=True).get(pk=run.pk) or {}
        for note, n in notes.items():
            current[note] = current.get(note, 0) + n
        Run.objects.filter(pk=run.pk).update(notes=current)


def release_failed_chunk(chunk_id: int, holder: str, error: str) -> int | None:
    """After an unexpected error: give the chunk back to be tried again, or
    fail the run after MAX_CHUNK_ATTEMPTS. Returns the chunk to re-queue."""
    chunk = RunChunk.objects.select_related("run").filter(pk=chunk_id, holder=holder).first()
    if chunk is None:
        return None
    if chunk.attempts >= MAX_CHUNK_ATTEMPTS:
        _release(chunk, holder, RunChunk.Status.SKIPPED)
        finalize(chunk.run, status=Job.Status.FAILED, error=f"chunk {chunk.index} failed {chunk.attempts} times: {error}")
        return None
    RunChunk.objects.filter(pk=chunk.pk, holder=holder).update(status=RunChunk.Status.PENDING, holder="",
                                                               lease_until=None)
    return chunk.pk


# --------------------------------------------------------------------------
# The end of a run


def final_status(done: int, failed: int) -> str:
    """succeeded: every item done succeeded (or there were none); failed: every
    item failed; partial: some did."""
    if failed == 0:
        return Job.Status.SUCCEEDED
    if failed >= done:
        return Job.Status.FAILED
    return Job.Status.PARTIAL


def finalize(run: Run, *, status: str | None = None, error: str = "") -> None:
    """End the run's job once (later calls do nothing) with a status that says
    what happened, and tell the run's client."""
    run.refresh_from_db()
    job = Job.objects.get(pk=run.job_id)
    if job.status not in ACTIVE:
        return None
    client = client_for(run.kind)
    noun = client.noun
    if job.cancel_requested and status is None:
        status = Job.Status.CANCELLED
    if status is None:
        status = final_status(job.done, job.failed)
        if status != Job.Status.SUCCEEDED:
            reasons = client.failure_reasons(run, 3) or ["unknown reason"]
            if status == Job.Status.FAILED:
                error = f"every {noun} failed; for example: {reasons[0]}"
            else:
                error = (f"{job.failed} of {job.done} {noun}s failed; first reasons: "
                         + "; ".join(dict.fromkeys(reasons)))
    run.chunks.filter(status=RunChunk.Status.PENDING).update(status=RunChunk.Status.SKIPPED)
    if error:
        Run.objects.filter(pk=run.pk).update(stop_reason=error[:500])
        run.stop_reason = error[:500]
    jobs.finish(job.pk, status=status, result=client.summary(run), error=error)
    client.finished(run)
    return None


def resume_stalled(nodename: str | None = None, boot: str | None = None) -> list[int]:
    """Re-queue the work of unfinished runs whose worker is gone: chunks with
    an expired lease, and (when a worker starts) chunks held by an earlier
    start of a worker with this node name. Returns the chunks queued."""
    now = timezone.now()
    queued = []
    dead = Q(status=RunChunk.Status.RUNNING, lease_until__lt=now)
    if nodename:
        dead |= Q(status=RunChunk.Status.RUNNING, holder__startswith=f"{nodename}/") & ~Q(
            holder__startswith=f"{nodename}/{boot}/"
        )
    for run in Run.objects.filter(job__status__in=ACTIVE).select_related("job"):
        if not run.chunks.exists():
            # Not planned yet (a plan task lost with its worker): plan it again (plan_run is safe twice).
            if run.job.cancel_requested:
                finalize(run)
            elif run.job.created_at < now - _lease():
                jobs.queue_task(PLAN_TASK, run.pk)
            continue
        run.chunks.filter(dead).update(status=RunChunk.Status.PENDING, holder="", lease_until=None)
        running = set(run.chunks.filter(status=RunChunk.Status.RUNNING).values_list("lane", flat=True))
        if run.job.cancel_requested and not running:
            finalize(run)
            continue
        if next_chunk(run) is None and not running:
            finalize(run)
            continue
        for lane in range(run.lanes):
            if lane in running:
                continue  # a live worker is on this lane
            nxt = next_chunk(run, lane)
            if nxt is not None and not run.job.cancel_requested:
                queue_chunk(nxt)
                queued.append(nxt)
    return queued
