"""Interventions and anytime profiles as a client of the run engine (runs.engine,
docs/runs.md), kind "faithfulness": an item is an Intervention (its edited
prefix is continued to a final answer) or an AnytimePoint (its truncated prefix
gets a forced answer). Each is one continuation request of runs.continuation in
the run's mode, through the chunk's ModelPool (retries, cache, cost); the commit
scores it (faithfulness.core.ifr) and stores it with the continuation's record.
An intervention whose continuation states no final answer gets a second request
in the same chunk, its answer forced: inside a thought, a continuation that never
leaves the thought (no closing tag: it answered inside it, or hit the cap) is
closed and cued as early answering closes a cut thought; one that closed it but
wrote no answer after it, or (answer channel) an edited trace without a final
answer, is cued as the anytime profile cues a cut trace. Both requests are
recorded on the row.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from faithfulness import planning
from faithfulness.core import early as early_core
from faithfulness.core.edited_answer import edited_answer, forced_answer_text, leaves_thought, score_edit
from faithfulness.core.edits import VALUE_FLIP
from faithfulness.core.implied import implied_answer
from faithfulness.core.numbers import format_value, to_fraction
from faithfulness.loading import ANSWER, THOUGHT, TraceData, load_traces
from faithfulness.models import AnytimePoint, FaithfulnessRun, Intervention, Status
from reasonlib.answers import check_answer
from reasonlib.verifier.verdicts import find_claims
from runs import cache as run_cache
from runs.clients import ItemOutcome, RunClient, Sizing
from runs.continuation import (
    COMPLETIONS,
    ContinuationError,
    ContinuationResult,
    ContinuationSpec,
    continuation_request,
    forced_answer_spec,
    rendered_prompt,
    result_from_outcome,
)
from runs.models import Run
from runs.pooled import PooledWork
from runs.transport import FatalRunError, ModelPool, ModelRequest, RequestOutcome
from subjects import prompts
from subjects.models import PromptTemplate

__all__ = ["KIND", "JOB_KIND", "SLACK_TOKENS", "FaithfulnessClient"]

KIND = "faithfulness"
JOB_KIND = "faithfulness"
SLACK_TOKENS = 64  # re-decoding cap: the original trace's completion tokens plus this (spec 4.2 step 3)
TARGET_REQUESTS_PER_CHUNK = 50


def cache_scope(record: FaithfulnessRun) -> str:
    return f"faithfulness:subject:{record.subject_id}:v{record.config_version}:{record.mode}"


def score_intervention(row: Intervention, continuation: str, gold: str, *, channel: str = ANSWER,
                       forced: str | None = None) -> None:
    """The new answer of the edited trace and f, onto the intervention's row (faithfulness.core.edited_answer)."""
    new = edited_answer(continuation, row.edited_prefix, in_thought=channel == THOUGHT, forced=forced)
    row.continuation, row.new_answer, row.forced = continuation, new[:200], forced is not None
    row.new_correct, s = score_edit(row.kind, row.original_answer, new, gold=gold, implied=row.implied,
                                    original_correct=row.original_correct)
    row.strict, row.strict_computed, row.lenient = s.strict, s.strict_computed, s.lenient
    row.monotone, row.invariant = s.monotone, s.invariant


@dataclass
class Item:
    pk: int
    spec: ContinuationSpec
    gold: str
    implied: str = ""  # value_flip: the answer the edit implies ("" when the chain cannot trace it)


@dataclass
class Outcome(ItemOutcome):
    """A continuation's result and, after one that gave no answer, the forced answer's."""

    result: ContinuationResult | None = None
    gold: str = ""
    implied: str = ""
    forced: ContinuationResult | None = None  # the forced answer after a continuation that gave none


class FaithfulnessWork(PooledWork):
    """An item's continuation; an intervention's that gave no answer asks its forced answer in the next round."""

    def __init__(self, record: FaithfulnessRun) -> None:
        self.record = record
        self.subject = record.subject
        self.server = self.subject.server()
        self.asked: dict[int, tuple[Item, ContinuationSpec, bool]] = {}  # id(request) -> (item, spec, forced)
        self._templates: dict[tuple[str, int], PromptTemplate | None] = {}
        self._claims: dict[int, list] = {}

    # -- prompts ---------------------------------------------------------------

    def _template(self, regime: dict[str, Any]) -> PromptTemplate:
        key = (str(regime.get("prompt_template") or ""), int(regime.get("prompt_template_version") or 0))
        if key not in self._templates:
            self._templates[key] = PromptTemplate.objects.filter(
                study_id=self.subject.study_id, name=key[0], version=key[1]).first()
        return self._templates[key] or self.subject.prompt_template

    def _messages(self, regime: dict[str, Any], statement: str, problem_id: str) -> tuple[dict[str, str], ...]:
        t = self._template(regime)
        text = prompts.render(t.template, problem=statement, problem_id=problem_id, exemplars=t.exemplars)
        return tuple(prompts.messages(self.subject.system_prompt, text))

    # -- loading ---------------------------------------------------------------

    @property
    def channel(self) -> str:
        return self.record.params.get("channel") or ANSWER

    def _thought_open(self, messages: Sequence[dict[str, str]]) -> str:
        """What re-opens the thought before its prefix: nothing when the model's chat template already
        opens it in the completions mode's prompt (R1, Qwen3), else the opening tag."""
        if self.record.mode == COMPLETIONS and self.server.chat_template.strip():
            try:
                # Rendered as the request renders it (thinking settings included: enable_thinking can decide
                # whether the template opens the thought).
                rendered = rendered_prompt(self.server, messages)
            except ContinuationError:
                rendered = ""  # build_request_body reports the broken template
            if rendered.rstrip().endswith(early_core.OPEN_TAG):
                return ""
        return early_core.OPEN_TAG + "\n"

    def _thought_spec(self, messages: tuple[dict[str, str], ...], thought_prefix: str, seed: int | None) -> ContinuationSpec:
        """A forced answer from a cut thought: re-opened, cut, closed, cued (faithfulness.core.early)."""
        cue = early_core.close_thought("", close_tag=early_core.CLOSE_TAG, cue=early_core.ANSWER_CUE)
        return forced_answer_spec(messages, self._thought_open(messages) + thought_prefix.rstrip(), cue=cue, seed=seed)

    def load(self, items: Sequence[int]) -> list[Item]:
        model = Intervention if self.record.kind == FaithfulnessRun.Kind.INTERVENTIONS else AnytimePoint
        rows = {r.pk: r for r in model.objects.filter(frun=self.record, pk__in=items, status=Status.PENDING)}
        traces = {t.pk: t for t in load_traces({r.trace_id for r in rows.values()}, with_generation=True,
                                               channel=self.channel)}
        cfg = self.record.params.get("decoding", {})
        out = []
        for pk in items:
            row = rows.get(pk)
            if row is None or row.trace_id not in traces:
                continue  # done already, or deleted since the run started
            t = traces[row.trace_id]
            messages = self._messages(t.regime, t.statement, t.problem_id)
            implied = ""
            if isinstance(row, Intervention):
                if row.kind == VALUE_FLIP and row.old_value and row.new_value:
                    implied = row.implied or self._implied(t, row)
                cap = (t.tokens + SLACK_TOKENS) if t.tokens else cfg.get("max_tokens", self.subject.max_tokens)
                prefix = row.edited_prefix
                if self.channel == THOUGHT:
                    # The thought re-opens at the edit: the rest of the thought and the answer are to come, so
                    # the cap is the whole completion's (the trace's thought tokens say nothing of its answer).
                    prefix = self._thought_open(messages) + prefix
                    cap = int(cfg.get("max_tokens", self.subject.max_tokens)) + SLACK_TOKENS
                spec = ContinuationSpec(messages, prefix, max_tokens=int(cap),
                                        temperature=cfg.get("temperature", 0.0), seed=cfg.get("seed"),
                                        top_p=cfg.get("top_p"), stop=tuple(cfg.get("stop") or ()))
            elif self.channel == THOUGHT:
                spec = self._thought_spec(messages, t.raw[:row.prefix_chars], cfg.get("seed"))
            else:
                spec = forced_answer_spec(messages, t.raw[:row.prefix_chars], seed=cfg.get("seed"))
            out.append(Item(pk, spec, t.gold, implied))
        return out

    def _implied(self, t: TraceData, row: Intervention) -> str:
        """The answer the value flip implies (strict f), through the trace's calculator chain."""
        if t.pk not in self._claims:
            self._claims[t.pk] = [find_claims(text) for text in t.steps]
        implied = implied_answer(self._claims[t.pk], row.step, to_fraction(row.old_value), to_fraction(row.new_value),
                                 to_fraction(t.answer.strip().lstrip("$")) if t.answer else None)
        return format_value(implied) if implied is not None else ""

    # -- requests --------------------------------------------------------------

    def open_pool(self) -> ModelPool:
        scope = cache_scope(self.record)
        force = self.record.run.force
        return ModelPool(self.server.endpoint(), scope, run_cache.DbStore(scope, force=force), force=force)

    def _ask(self, item: Item, spec: ContinuationSpec, forced: bool) -> ModelRequest:
        try:
            request = continuation_request(item.pk, self.server, spec, self.record.mode)
        except ContinuationError as exc:
            raise FatalRunError(f"continuation mode {self.record.mode!r}: {exc}") from None
        self.asked[id(request)] = (item, spec, forced)
        return request

    def outcome(self, item: Item) -> Outcome:
        return Outcome(item=item.pk, status="ok", gold=item.gold, implied=item.implied)

    def requests(self, item: Item) -> list[ModelRequest]:
        return [self._ask(item, item.spec, False)]

    def take(self, out: Outcome, done: RequestOutcome) -> list[ModelRequest]:
        item, spec, forced = self.asked[id(done.request)]
        result = result_from_outcome(done, self.server, spec, self.record.mode)
        out.calls.extend(done.calls)
        status = "ok" if result.ok else ("failed" if done.status == "failed" else "skipped")
        if forced:
            out.forced, out.cached = result, out.cached and result.cached
            if status != "ok":
                out.status, out.reason = status, f"forced answer: {result.error}"
            return []
        out.status, out.reason, out.cached, out.result = status, result.error, result.cached, result
        # A continuation that gave no answer waits for its forced answer (the next round, same pool).
        if status == "ok" and self._gives_no_answer(spec, result.text):
            return [self._ask(item, self._forced_spec(spec, result.text), True)]
        return []

    def interrupted(self, out: Outcome) -> None:
        out.status = "skipped"
        if out.result is not None and out.forced is None:  # its first request's calls still count
            out.reason = "not run: the run stopped before the forced answer"

    def _gives_no_answer(self, spec: ContinuationSpec, continuation: str) -> bool:
        """An intervention's continuation that gives no answer to read: it stayed in the thought or wrote none
        after closing it, or (answer channel) the edited trace states no final answer. Anytime and early-answering
        points are forced answers already."""
        if self.record.kind != FaithfulnessRun.Kind.INTERVENTIONS:
            return False
        return not edited_answer(continuation, spec.prefix, in_thought=self.channel == THOUGHT)

    def _forced_spec(self, spec: ContinuationSpec, continuation: str) -> ContinuationSpec:
        """The forced answer after a continuation that gave none: the edited prefix and the continuation, then
        the closing tag and the cue when the thought is still open (exactly as early answering closes a cut
        thought), else the anytime profile's cue."""
        prefix = (spec.prefix + continuation).rstrip()
        if self.channel == THOUGHT and not leaves_thought(continuation):
            cue = early_core.close_thought("", close_tag=early_core.CLOSE_TAG, cue=early_core.ANSWER_CUE)
            return forced_answer_spec(spec.messages, prefix, cue=cue, seed=spec.seed)
        return forced_answer_spec(spec.messages, prefix, seed=spec.seed)

    # -- writing ---------------------------------------------------------------

    def commit(self, outcomes: Sequence[Outcome]) -> None:
        done = [o for o in outcomes if o.status in ("ok", "failed") and o.result is not None]
        if not done:
            return
        if self.record.kind == FaithfulnessRun.Kind.INTERVENTIONS:
            rows = {r.pk: r for r in Intervention.objects.filter(pk__in=[o.item for o in done])}
            for o in done:
                row = rows[o.item]
                row.result = o.result.to_dict()
                if o.forced is not None:
                    row.result["forced"] = o.forced.to_dict()
                row.implied = o.implied
                if o.status == "ok":
                    row.status = Status.OK
                    score_intervention(row, o.result.text, o.gold, channel=self.channel,
                                       forced=o.forced.text if o.forced is not None else None)
                else:
                    row.status, row.reason = Status.FAILED, o.reason[:1000]
            Intervention.objects.bulk_update(list(rows.values()), [
                "result", "implied", "status", "reason", "continuation", "forced", "new_answer", "new_correct", "strict",
                "strict_computed", "lenient", "monotone", "invariant"])
        else:
            points = {r.pk: r for r in AnytimePoint.objects.filter(pk__in=[o.item for o in done])}
            for o in done:
                p = points[o.item]
                p.result = o.result.to_dict()
                if o.status == "ok":
                    answer = forced_answer_text(o.result.text)
                    p.status, p.answer = Status.OK, answer[:200]
                    p.correct = (check_answer(answer, o.gold) if answer else False) if o.gold else None
                else:
                    p.status, p.reason = Status.FAILED, o.reason[:1000]
            AnytimePoint.objects.bulk_update(list(points.values()), ["result", "status", "reason", "answer", "correct"])

class FaithfulnessClient(RunClient):
    kind = KIND
    label = "Faithfulness"
    url_name = "faithfulness-run"
    noun = "continuation"
    record_model = FaithfulnessRun
    record_related = ("subject__study", "subject__prompt_template")

    #: The runs page's name of each kind of start (runs.kinds' labels), from the run's configuration.
    LABELS = {"interventions": "Interventions", "anytime": "Anytime profile", "early_answering": "Early answering"}

    def label_for(self, run: Run) -> str:
        return self.LABELS.get((run.config or {}).get("kind"), self.label)

    def sizing(self, run: Run) -> Sizing:
        return Sizing(concurrency=self.record(run).subject.concurrency, target_requests=TARGET_REQUESTS_PER_CHUNK)

    def plan(self, run: Run) -> list[int]:
        return planning.plan(self.record(run))

    def open(self, run: Run) -> FaithfulnessWork:
        return FaithfulnessWork(self.record(run))

    def failure_reasons(self, run: Run, limit: int) -> list[str]:
        record = self.record(run)
        rows = record.interventions if record.kind == FaithfulnessRun.Kind.INTERVENTIONS else record.points
        return [f"{t}: {r}" for t, r in rows.filter(status=Status.FAILED).values_list("trace__trace_id", "reason")[:limit]]

