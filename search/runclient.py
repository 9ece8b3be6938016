"""Scanner runs: the runs client of kind "scanner" (docs/search.md). One request per trace through the
engine's ModelPool, which owns retries, the response cache, the budget, progress and cancel; this
module renders the question (search.core.scan), reads the answer and stores ScanResult rows."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass

from django.utils import timezone

from annotation.models import Step, Trace
from judges.providers.openai_compat import endpoint
from runs import cache
from runs.clients import ItemOutcome, RunClient
from runs.models import Run
from runs.pooled import PooledWork, Unaskable
from runs.transport import Malformed, ModelPool, ModelRequest
from search.core import scan
from search.models import ScannerRun, ScanResult

KIND = "scanner"
CHUNK = 50


@dataclass
class TraceIn:
    pk: int
    problem: str
    answer: str
    steps: list[scan.StepText]


def cache_scope(scanner) -> str:
    """What besides the request decides an answer: the scanner's question and the judge's version."""
    judge = scanner.judge
    question = hashlib.sha256(scanner.question.encode()).hexdigest()[:16]
    return f"scanner:{question}:judge:{judge.pk}:v{judge.version}"


def load_inputs(trace_ids: Sequence[int]) -> list[TraceIn]:
    traces = {t.pk: t for t in Trace.objects.filter(pk__in=list(trace_ids)).select_related("problem")}
    steps: dict[int, list[scan.StepText]] = {pk: [] for pk in traces}
    for trace_id, index, channel, text in (Step.objects.filter(trace_id__in=list(traces)).order_by("trace_id", "index")
                                           .values_list("trace_id", "index", "channel", "text")):
        steps[trace_id].append(scan.StepText(index, channel, text))
    return [TraceIn(pk, traces[pk].problem.statement, traces[pk].answer, steps[pk]) for pk in trace_ids if pk in traces]


class ScanWork(PooledWork):
    def __init__(self, record: ScannerRun) -> None:
        self.record = record
        self.scanner = record.scanner

    def load(self, items: Sequence[int]) -> list[TraceIn]:
        return load_inputs(items)

    def open_pool(self) -> ModelPool:
        force = self.record.run.force
        return ModelPool(endpoint(self.scanner.judge), cache_scope(self.scanner),
                         cache.DbStore(f"scanner:{self.scanner.pk}", force=force), force=force)

    def request(self, trace: TraceIn) -> ModelRequest:
        if not trace.steps:
            raise Unaskable("the trace has no steps; nothing to scan")
        judge = self.scanner.judge
        existing = [st.index for st in trace.steps]
        msgs = scan.messages(self.scanner.question, trace.problem, trace.steps, trace.answer)

        def build(output_mode: str) -> dict:
            return {"messages": msgs, "temperature": judge.temperature, "max_tokens": judge.max_tokens or 400}

        def parse(content: str) -> scan.ScanAnswer:
            try:
                return scan.parse(content, existing)
            except scan.BadAnswer as exc:
                raise Malformed(str(exc)) from None

        return ModelRequest(item=trace.pk, build=build, parse=parse, schema=scan.SCHEMA, schema_name="scan")

    def warnings(self, result: scan.ScanAnswer) -> list[str]:
        return [f"cited steps the trace does not have: {list(result.bad_citations)}"] if result.bad_citations else []

    def commit(self, outcomes: Sequence[ItemOutcome]) -> None:
        now = timezone.now()
        rows = []
        for o in outcomes:
            if o.status == "skipped":
                continue
            r = o.result
            rows.append(ScanResult(
                scanner=self.scanner, trace_id=o.item, scanner_run=self.record,
                status=ScanResult.Status.OK if o.status == "ok" else ScanResult.Status.FAILED,
                answer=r.answer if r else None, cited=list(r.cited) if r else [],
                bad_citations=list(r.bad_citations) if r else [], explanation=r.explanation if r else "",
                reason=o.reason, cached=o.cached, updated_at=now,
            ))
        ScanResult.objects.bulk_create(
            rows, update_conflicts=True, unique_fields=["scanner", "trace"],
            update_fields=["scanner_run", "status", "answer", "cited", "bad_citations", "explanation", "reason",
                           "cached", "updated_at"],
        )

class ScannerClient(RunClient):
    kind = KIND
    label = "Scanner"
    noun = "trace"
    record_model = ScannerRun
    record_related = ("scanner__judge", "scanner__study")

    def page(self, run: Run) -> str | None:
        """The scanner's page (its runs, answers and validation): a scanner run has no page of its own."""
        from django.urls import reverse

        scanner = run.job.params.get("scanner_id")
        return reverse("search-scanner", args=[scanner]) if scanner else None

    def chunk_size(self, run: Run) -> int:
        return chunk_size(self.record(run).scanner.judge)

    def open(self, run: Run) -> ScanWork:
        return ScanWork(self.record(run))

    def failure_reasons(self, run: Run, limit: int) -> list[str]:
        return list(ScanResult.objects.filter(scanner_run__run=run, status=ScanResult.Status.FAILED)
                    .order_by("trace_id").values_list("reason", flat=True)[:limit])


def chunk_size(judge) -> int:
    # Whole rounds of `concurrency` requests, as the LLM judge does.
    concurrency = max(1, judge.concurrency)
    return concurrency * math.ceil(CHUNK / concurrency)
