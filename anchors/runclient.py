"""Step-importance runs as a client of the run engine (runs.engine, docs/runs.md), kind
"step_importance": an item is a Rollout -- a thought cut after ``position`` steps and continued through
runs.continuation in the run's mode, through the chunk's ModelPool (retries, cache, budget, cancel).

The continuation, its forced answer and the thought handling are those of the interventions on a thought
(faithfulness.runclient.FaithfulnessWork, reused): the thought re-opens before its prefix, a resample that
never closes it or writes no answer after it gets a second request with the thought closed and the answer
cued, and a forced rollout is early answering's forced answer at that cut. The commit reads each answer
with the app's answer checker and stores the measures of each trace it completes (anchors.results)."""

from __future__ import annotations

from collections.abc import Sequence

from anchors import results
from anchors.core.sentences import first_sentence
from anchors.models import ImportanceRun, Rollout, Status
from faithfulness.core import early as early_core
from faithfulness.loading import THOUGHT, load_traces
from faithfulness.runclient import SLACK_TOKENS, FaithfulnessWork, Item, Outcome, forced_answer_text
from reasonlib.answers import check_answer, extract_answer
from runs.clients import RunClient, Sizing
from runs.continuation import ContinuationSpec
from runs.models import Run

KIND = "step_importance"
JOB_KIND = "step_importance"
TARGET_REQUESTS_PER_CHUNK = 50


class ImportanceWork(FaithfulnessWork):
    """One chunk of rollouts. The record is an ImportanceRun (it has what FaithfulnessWork reads of a run:
    subject, mode, config_version and params with the channel "thought")."""

    def load(self, items: Sequence[int]) -> list[Item]:
        rows = {r.pk: r for r in Rollout.objects.filter(irun=self.record, pk__in=items, status=Status.PENDING)}
        traces = {t.pk: t for t in load_traces({r.trace_id for r in rows.values()}, with_generation=True,
                                               channel=THOUGHT)}
        cfg = self.record.params.get("decoding", {})
        temperature = self.record.params.get("temperature")
        out = []
        for pk in items:
            row = rows.get(pk)
            if row is None or row.trace_id not in traces:
                continue  # done already, or deleted since the run started
            t = traces[row.trace_id]
            messages = self._messages(t.regime, t.statement, t.problem_id)
            prefix = t.raw[:row.prefix_chars]
            if row.kind == Rollout.Kind.FORCED:
                spec = self._thought_spec(messages, prefix, row.seed)
            else:
                # The rest of the thought and the answer are to come: the whole completion's cap.
                spec = ContinuationSpec(messages, self._thought_open(messages) + prefix,
                                        max_tokens=int(cfg.get("max_tokens", self.subject.max_tokens)) + SLACK_TOKENS,
                                        temperature=float(temperature if temperature is not None
                                                          else cfg.get("temperature", 0.0)),
                                        seed=row.seed, top_p=cfg.get("top_p"), stop=tuple(cfg.get("stop") or ()))
            out.append(Item(pk, spec, t.gold))
        return out

    def _gives_no_answer(self, spec: ContinuationSpec, continuation: str) -> bool:
        """A resample that never closed the thought or wrote no answer after it (a forced rollout, whose spec
        ends in the cue, is an answer already)."""
        if spec.cue:
            return False
        _thought, closed, after = continuation.partition(early_core.CLOSE_TAG)
        return not closed or not extract_answer(after)

    def commit(self, outcomes: Sequence[Outcome]) -> None:
        done = [o for o in outcomes if o.status in ("ok", "failed") and o.result is not None]
        if not done:
            return
        rows = {r.pk: r for r in Rollout.objects.filter(pk__in=[o.item for o in done])}
        for o in done:
            row = rows[o.item]
            row.result = o.result.to_dict()
            if o.forced is not None:
                row.result["forced"] = o.forced.to_dict()
            if o.status != "ok":
                row.status, row.reason = Status.FAILED, o.reason[:1000]
                continue
            row.status = Status.OK
            if row.kind == Rollout.Kind.FORCED:
                answer = forced_answer_text(o.result.text)
            else:
                row.continuation = o.result.text
                row.first_sentence = first_sentence(o.result.text)
                if o.forced is not None:
                    answer, row.answer_forced = forced_answer_text(o.forced.text), True
                else:
                    answer = extract_answer(o.result.text.partition(early_core.CLOSE_TAG)[2]) or ""
            row.answer = answer[:200]
            row.correct = (bool(check_answer(answer, o.gold)) if answer else False) if o.gold else None
        Rollout.objects.bulk_update(list(rows.values()), ["result", "status", "reason", "continuation",
                                                          "first_sentence", "answer", "answer_forced", "correct"])
        # A trace whose last rollout this chunk answered gets its measures now, in this chunk's transaction:
        # the work spreads over the worker processes instead of waiting for the run's last transaction.
        complete = results.complete_traces(self.record, {r.trace_id for r in rows.values()})
        if complete:
            results.store(self.record, complete)


class ImportanceClient(RunClient):
    kind = KIND
    label = "Step importance"
    url_name = "anchors-run"
    noun = "rollout"
    record_model = ImportanceRun
    record_related = ("subject__study", "subject__prompt_template")

    def sizing(self, run: Run) -> Sizing:
        return Sizing(concurrency=self.record(run).subject.concurrency, target_requests=TARGET_REQUESTS_PER_CHUNK)

    def plan(self, run: Run) -> list[int]:
        from anchors import planning

        return planning.plan(self.record(run))

    def open(self, run: Run) -> ImportanceWork:
        return ImportanceWork(self.record(run))

    def failure_reasons(self, run: Run, limit: int) -> list[str]:
        rows = Rollout.objects.filter(irun__run=run, status=Status.FAILED)
        return [f"{t} after {p} steps: {r}" for t, p, r in
                rows.values_list("trace__trace_id", "position", "reason")[:limit]]

    def finished(self, run: Run) -> None:
        super().finished(run)
        results.store_missing(self.record(run))
