"""The evidence tier of every verifier of a study (validity SVR/VSR under a neutral policy, halting,
IFR) and the section-6 report built from it; the formulas are in core/.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

from django.db import transaction
from django.db.models import Avg, Count, Exists, Min, OuterRef, Q, QuerySet
from django.db.models.fields.json import KT
from django.utils import timezone

from annotation.gate import Source
from annotation.jobs import recompute_pending
from annotation.models import Job, Step, StepLabel, Study, Trace
from faithfulness import stored_evidence
from faithfulness.core import halting as halt_core
from faithfulness.core import tiers as tier_core
from faithfulness.core import validity as val_core
from faithfulness.core.numbers import to_fraction
from faithfulness.core.step_counts import StepCounts
from faithfulness.models import EvidenceSummary, FaithfulnessRun
from faithfulness.summaries import anytime_summary, early_summary, ifr_of_runs, latest_runs, thinking_budget_summary
from judges.models import JudgeConfig
from reasonlib.refusals import FieldInvalid
from runs.version import code_version
from scoring.score_jobs import chunk_traces
from subjects.models import Generation

#: The evidence (its tier, SVR/VSR and report) reads the judges' and the annotators' labels and the
#: adjudications (annotation.gate): for members who may read every source.
EVIDENCE_READS = frozenset({Source.OWN, Source.PEER, Source.JUDGE, Source.ADJUDICATION})


#: The label source of the annotators' labels (an adjudicated verdict wins over the annotators' own).
HUMAN_SOURCE = (tier_core.HUMAN, "human labels (adjudicated where adjudicated)")
SourceKey = tuple[str, str]  # (verifier kind, verifier name)
#: Rows fetched at a time from a chunk's steps and labels.
ITERATE_ROWS = 5000
#: trace pk -> step index -> (verdict, skeleton refs), per label source
SourceLabels = dict[int, dict[int, tuple[str, list[int]]]]


def _judge_sources(study: Study) -> dict[int, SourceKey]:
    """Judge configuration pk -> the label source the evidence names it by."""
    out = {}
    for j in JudgeConfig.objects.filter(study=study):
        if j.provider == JudgeConfig.Provider.MECHANISTIC:
            out[j.pk] = (tier_core.MECHANISTIC, f"mechanistic verifier {j.name} v{j.version}")
        else:
            out[j.pk] = (tier_core.JUDGE, f"LLM judge {j.name} ({j.model or j.provider}, prompt v{j.prompt_version})")
    return out


def _scope_labels(study: Study, model: str | None) -> QuerySet[StepLabel]:
    """Every label the evidence weighs (the suite variants' traces too: they decide nothing but which
    source's skeleton references halting reads, as they always did)."""
    qs = StepLabel.objects.filter(step__trace__study=study)
    return qs.filter(step__trace__model=model) if model else qs


def _chunk_labels(span: tuple[int, int], judges: dict[int, SourceKey]) -> dict[SourceKey, SourceLabels]:
    """The labels of the traces with pks in ``span`` per label source, read in pk order: a judge has one
    label a step; of the annotators' the first is kept, and an adjudication replaces them. (Traces of other
    studies or models in the span come along and are never looked up: see tally_study.)"""
    qs = StepLabel.objects.filter(step__trace_id__gte=span[0], step__trace_id__lte=span[1])
    # Skeleton references are read only where a label has some (a second, small query): decoding
    # a JSON list for every label is most of the time of a large study's report.
    refs: dict[int, list[int]] = dict(qs.exclude(skeleton_refs=[]).values_list("pk", "skeleton_refs"))
    out: dict[SourceKey, SourceLabels] = defaultdict(lambda: defaultdict(dict))
    # Iterated (a server-side cursor on PostgreSQL): the chunk's rows are not held twice, as a result and a list.
    for pk, trace, index, kind, judge, verdict in qs.order_by("pk").values_list(
            "pk", "step__trace_id", "step__index", "kind", "judge_id", "verdict").iterator(ITERATE_ROWS):
        if kind == StepLabel.Kind.JUDGE:
            key = judges.get(judge)
            if key is None:
                continue
        else:
            key = HUMAN_SOURCE
            if kind == StepLabel.Kind.HUMAN and index in out[key][trace]:
                continue
        out[key][trace][index] = (verdict, refs.get(pk) or [])
    return out


def _human_keeps_refs(labels: QuerySet[StepLabel]) -> bool:
    """Whether some step's human-source label that wins the step in _chunk_labels (its adjudication, else its
    first annotator's) has skeleton references. A judge's source needs no such look: it has one label a step."""
    with_refs = labels.exclude(skeleton_refs=[])
    if with_refs.filter(kind=StepLabel.Kind.ADJUDICATION).exists():
        return True
    adjudicated = Exists(StepLabel.objects.filter(step=OuterRef("step"), kind=StepLabel.Kind.ADJUDICATION))
    earlier = Exists(StepLabel.objects.filter(step=OuterRef("step"), kind=StepLabel.Kind.HUMAN, pk__lt=OuterRef("pk")))
    return with_refs.filter(kind=StepLabel.Kind.HUMAN).exclude(adjudicated).exclude(earlier).exists()


def _refs_source(labels: QuerySet[StepLabel], judges: dict[int, SourceKey]) -> SourceKey | None:
    """The label source whose skeleton references halting reads: the first with references among the
    mechanistic verifiers, else among the others, each source in the order of its first label (as reading
    every label in pk order would find it). Decided before the traces are read, from one grouped query,
    not by holding every label."""
    first: dict[SourceKey, int] = {}
    with_refs: set[SourceKey] = set()
    rows = labels.order_by().values("kind", "judge").annotate(
        first=Min("pk"), refs=Count("pk", filter=~Q(skeleton_refs=[])))
    for kind, judge, lo, n_refs in rows.values_list("kind", "judge", "first", "refs"):
        key = judges.get(judge) if kind == StepLabel.Kind.JUDGE else HUMAN_SOURCE
        if key is None:
            continue
        first[key] = min(first.get(key, lo), lo)
        if n_refs:
            with_refs.add(key)
    for key in sorted(first, key=lambda k: (k[0] != tier_core.MECHANISTIC, first[k])):
        if key in with_refs and (key != HUMAN_SOURCE or _human_keeps_refs(labels)):
            return key
    return None


def _scalar(value: Any) -> Any:
    """A JSON scalar read as text (PostgreSQL's ->>) back as the number or boolean it was."""
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            return value
        return parsed if isinstance(parsed, (int, float, bool)) else value
    return value


def _regimes(traces: QuerySet[Trace]) -> dict[str, list[tuple[dict[str, Any], int]]]:
    """model -> (the report's regime keys, traces with them), grouped in the database (per-sample keys such
    as messages_hash are left out)."""
    keys = (*tier_core.REGIME_KEYS, "max_steps")
    regimes: dict[str, list[tuple[dict[str, Any], int]]] = defaultdict(list)
    for row in traces.annotate(**{f"r_{k}": KT(f"regime__{k}") for k in keys}).values(
            "model", *(f"r_{k}" for k in keys)).annotate(n=Count("pk")).order_by():
        regimes[row["model"]].append(({k: _scalar(row[f"r_{k}"]) for k in keys}, row["n"]))
    return regimes


TraceRow = tuple[int, str, int, bool | None, int | None, str | None]  # pk, model, n_steps, correct, L_gold, gold


def _trace_chunks(traces: QuerySet[Trace], size: int) -> Iterator[list[TraceRow]]:
    """The traces in pk order, ``size`` at a time (each chunk a query of its own, after the last pk)."""
    rows = traces.order_by("pk").values_list("pk", "model", "n_steps", "answer_correct", "problem__l_gold",
                                             "problem__gold_answer")
    last: int | None = None
    while chunk := list((rows if last is None else rows.filter(pk__gt=last))[:size]):
        yield chunk
        last = chunk[-1][0]


@dataclass
class ModelTally:
    """What the evidence of one model adds up over its traces, read chunk by chunk in pk order."""

    traces: int = 0
    checked: int = 0  # answers checked
    correct: int = 0
    steps: StepCounts = field(default_factory=StepCounts)  # of traces with steps
    difficulty: dict[int | None, list[int]] = field(default_factory=dict)  # L_gold -> [traces, steps in them]
    halting: halt_core.HaltingTally = field(default_factory=halt_core.HaltingTally)
    with_skeleton: int = 0  # halting instances whose k* used the skeleton
    validity: dict[SourceKey, dict[str, val_core.ValidityTally]] = field(default_factory=dict)

    def add(self, row: TraceRow, labels: dict[SourceKey, SourceLabels], refs_source: SourceKey | None,
            texts: list[str], policies: tuple[str, ...]) -> None:
        pk, _model, n, correct, l_gold, gold = row
        self.traces += 1
        if correct is not None:
            self.checked += 1
            self.correct += correct
        if n > 0:
            self.steps.add(n)
        cell = self.difficulty.setdefault(l_gold, [0, 0])
        cell[0], cell[1] = cell[0] + 1, cell[1] + n
        if n == 0:
            return
        g = to_fraction((gold or "").strip().lstrip("$"))
        if g is not None:
            # k* from the skeleton references of the refs source and the first step stating the gold answer.
            mine = labels[refs_source].get(pk, {}) if refs_source in labels else {}
            refs = [mine.get(i, (None, []))[1] for i in range(1, n + 1)]
            skeleton_len = l_gold if mine and l_gold else 0
            self.with_skeleton += bool(skeleton_len)
            self.halting.add(halt_core.k_star(texts, g, refs, skeleton_len), n)
        for key, per_trace in labels.items():
            if pk not in per_trace:
                continue
            steps = per_trace[pk]
            verdicts = [steps.get(i, (None,))[0] for i in range(1, n + 1)]
            tallies = self.validity.get(key)
            if tallies is None:
                tallies = self.validity[key] = {p: val_core.ValidityTally(p) for p in policies}
            for tally in tallies.values():
                tally.add(verdicts, correct)

    def halting_rates(self) -> dict[str, Any] | None:
        """None when no trace with steps has a gold answer."""
        if not self.halting.instances:
            return None
        rates = self.halting.result().as_dict()
        rates["basis"] = (f"k* from skeleton references and the gold answer on {self.with_skeleton} traces, "
                          f"from the first step stating the gold answer on {self.halting.instances - self.with_skeleton}")
        return rates

    def verifiers(self, policy: str) -> list[tier_core.Verifier]:
        order = {tier_core.MECHANISTIC: 0, tier_core.JUDGE: 1, tier_core.HUMAN: 2}
        out = [tier_core.Verifier(kind, name, tallies[policy].result().as_dict())
               for (kind, name), tallies in self.validity.items()]
        return sorted(out, key=lambda v: (order[v.kind], v.name))


def tally_study(study: Study, model: str | None = None, policies: tuple[str, ...] = val_core.POLICIES,
                chunk_size: int | None = None) -> tuple[dict[str, ModelTally], QuerySet[Trace]]:
    """Model -> its tally, from the study's own traces (of ``model``) read ``chunk_size`` traces at a time
    (settings.SCORING_CHUNK_TRACES, as the score job's chunks): for each chunk only its traces' steps and
    labels, so memory follows the chunk, not the study. Also the traces' queryset."""
    # The evidence counts the study's own traces: fidelity variants' traces belong to their suite.
    traces = Trace.objects.of_study(study)
    if model:
        traces = traces.filter(model=model)
    judges = _judge_sources(study)
    refs_source = _refs_source(_scope_labels(study, model), judges)
    out: dict[str, ModelTally] = {}
    for chunk in _trace_chunks(traces, chunk_size or chunk_traces()):
        # A chunk's steps and labels are read by the range of its trace pks alone, without a join to the
        # traces for their study: one index range scan, the plan even on stale statistics (with the join, a
        # cursor's fast-start plan took 88 s for a chunk of 20,000 traces just imported). The chunk's own
        # traces are then looked up by pk: rows of another study's traces in the range are read, not used.
        span = (chunk[0][0], chunk[-1][0])
        by_source = _chunk_labels(span, judges)
        texts: dict[int, list[str]] = defaultdict(list)
        for trace, text in Step.objects.filter(trace_id__gte=span[0], trace_id__lte=span[1]) \
                .order_by("trace_id", "index").values_list("trace_id", "text").iterator(ITERATE_ROWS):
            texts[trace].append(text)
        for row in chunk:
            tally = out.get(row[1])
            if tally is None:
                tally = out[row[1]] = ModelTally()
            tally.add(row, by_source, refs_source, texts.get(row[0], []), policies)
        del by_source, texts  # before the next chunk is read: never two chunks held at once
    return out, traces


def evidence(study: Study, model: str | None = None, *, policy: str = val_core.EXCLUDE) -> list[tier_core.Evidence]:
    """What the study holds about each model (or one), for the tier and the report."""
    val_core.check_policy(policy)
    # The part read from every trace, step and label: stored by the score job when it is current.
    parts = stored_evidence.read(study, model, policy)
    if parts is None:
        parts = compute_summaries(study, model, (policy,))[policy]
    ifr_runs = latest_runs(study, FaithfulnessRun.Kind.INTERVENTIONS)
    early_runs = latest_runs(study, FaithfulnessRun.Kind.EARLY)
    any_runs = FaithfulnessRun.objects.filter(subject__study=study, kind=FaithfulnessRun.Kind.ANYTIME) \
        .select_related("subject").order_by("-created_at", "-pk")
    anytime_by: dict[str, list[FaithfulnessRun]] = defaultdict(list)
    seen_grids: set[tuple[str, str]] = set()
    for record in any_runs:
        if (record.subject.name, record.grid) not in seen_grids:  # the newest run per grid
            seen_grids.add((record.subject.name, record.grid))
            anytime_by[record.subject.name].append(record)
    # The mean per subject model, averaged by the database: the rows themselves were read on every request of
    # the Evidence page and the leaderboard (a row per generation).
    tokens = dict(Generation.objects.of_study(study).filter(completion_tokens__isnull=False)
                  .values("subject__name").annotate(mean=Avg("completion_tokens")).order_by()
                  .values_list("subject__name", "mean"))
    mech = JudgeConfig.objects.filter(study=study, provider=JudgeConfig.Provider.MECHANISTIC).first()
    out = []
    for name in sorted(parts):
        part = parts[name]
        ev = tier_core.Evidence(model=name, code_version=code_version(),
                                **{k: part[k] for k in stored_evidence.FIELDS if k != "verifiers"})
        ev.verifiers = stored_evidence.verifiers(part)
        if tokens.get(name) is not None:
            ev.tokens_mean = float(tokens[name])
        ev.ifr = ifr_of_runs(ifr_runs.get(name, []))
        ev.anytime = [thinking_budget_summary(f) if f.grid.startswith("thinking:") else anytime_summary(f)
                      for f in anytime_by.get(name, [])]
        ev.early = [_early_part(early_summary(f)) for f in early_runs.get(name, [])]
        ev.checker_version = f"mechanistic verifier {mech.name} v{mech.version}" if mech else None
        ev.artifact_format = f"ReasonAudit traces, steps segmented by {study.segmenter}"
        out.append(ev)
    return out


def _early_part(summary: dict[str, Any]) -> dict[str, Any]:
    """What the report reads of an early-answering run (not its per-trace rows)."""
    return {k: summary[k] for k in ("run", "mode", "grid", "traces", "aoc", "decided", "decision_fraction",
                                    "after_share", "code_version")}


def tier_cards(study: Study) -> list[dict[str, Any]]:
    """The tier card of each model (the study's leaderboard shows these)."""
    cards = []
    for ev in evidence(study):
        t = tier_core.tier(ev)
        best = next((v.validity for v in ev.verifiers if v.kind == t.qualifier and v.validity.get("n")), None)
        cards.append({"model": ev.model, "level": t.level, "label": t.label, "complete": t.complete,
                      "qualifier": t.qualifier, "badges": t.badges, "text": t.text, "scope": t.scope,
                      "traces": ev.traces, "with_steps": ev.with_steps, "answer_accuracy": ev.accuracy,
                      "svr": best["svr"] if best else None, "vsr": best["vsr"] if best else None})
    return cards


def evidence_tier_cards(study: Study, rows: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """The registration hook of scoring.analytics (the leaderboard's tier card)."""
    return tier_cards(study)


FORMATS = ("md", "tex", "json")


def report(study: Study, model: str | None = None, fmt: str = "md", *, policy: str = val_core.EXCLUDE) -> str:
    if fmt not in FORMATS:
        raise FieldInvalid("format", f"unknown report format {fmt!r}; choose {', '.join(FORMATS)}")
    evs = evidence(study, model, policy=policy)
    if model and not evs:
        names = ", ".join(sorted(set(Trace.objects.of_study(study).values_list("model", flat=True)))) or "none"
        raise FieldInvalid("model", f"no traces of model {model!r} in {study.name!r} (models: {names})")
    reps = [tier_core.template(ev) for ev in evs]
    if fmt == "json":
        return tier_core.to_json(reps)
    if fmt == "tex":
        return tier_core.to_latex(reps)
    return tier_core.to_markdown(reps, study.name)


# Stored per-model evidence (faithfulness.stored_evidence holds what pages read of it): computed from the same
# reading as the live evidence above, written by the score job.

def compute_summaries(study: Study, model: str | None = None, policies: tuple[str, ...] = val_core.POLICIES, *,
                      chunk_size: int | None = None) -> dict[str, dict[str, dict[str, Any]]]:
    """policy -> model -> the FIELDS (faithfulness.stored_evidence) of its evidence, from the data (one read for every
    policy, streamed by chunks of ``chunk_size`` traces): what the score job stores, and what a page computes when
    nothing is stored."""
    tallies, traces = tally_study(study, model, policies, chunk_size)
    regimes = _regimes(traces)
    out: dict[str, dict[str, dict[str, Any]]] = {policy: {} for policy in policies}
    for name in sorted(tallies):
        t = tallies[name]
        part: dict[str, Any] = {"traces": t.traces, "with_regime": 0, "steps_mean": None, "steps_median": None,
                                "steps_max": None}
        regime_vals: dict[str, list[Any]] = defaultdict(list)
        for regime, n in regimes.get(name, []):
            if any(v is not None for v in regime.values()):
                part["with_regime"] += n
                for key, v in regime.items():
                    if v is not None and v not in regime_vals[key] and len(regime_vals[key]) < 20:
                        regime_vals[key].append(v)
        part["regime"] = dict(regime_vals)
        part["accuracy"] = t.correct / t.checked if t.checked else None
        part["accuracy_n"] = t.checked
        part["with_steps"] = t.steps.n
        if t.steps.n:
            part["steps_mean"], part["steps_median"] = t.steps.mean(), t.steps.median()
            part["steps_max"] = t.steps.max()
        part["halting"] = t.halting_rates()
        part["difficulty"] = t.difficulty  # skeleton length -> [traces, steps in them]: the Evidence page's chart
        for policy in policies:
            out[policy][name] = {**part, "verifiers": [asdict(v) for v in t.verifiers(policy)]}
    return out


def store_summaries(study: Study, job: Job | None = None) -> int:
    """Recompute and replace the study's summaries (every model, every policy); the number of rows. Stale as
    soon as written when the data changed while they were computed (the change marked the old rows, or queued
    another score job): that job writes them anew."""
    read_at = timezone.now()
    computed = compute_summaries(study)
    rows = [EvidenceSummary(study=study, model=name, policy=policy, data=part, job=job)
            for policy, per_model in computed.items() for name, part in per_model.items()]
    n = len(rows)
    with transaction.atomic():
        old = EvidenceSummary.objects.select_for_update().filter(study=study)
        marked = max((m for m in old.values_list("marked_at", flat=True) if m is not None), default=None)
        stale = (marked is not None and marked >= read_at) or recompute_pending(study.pk, job, read_at)
        old.delete()
        if not rows:
            # A study without traces: one marker row says "computed: no models", so the pages need not read.
            rows = [EvidenceSummary(study=study, model="", policy="", data={}, job=job)]
        for row in rows:
            row.stale, row.marked_at = stale, marked if stale else None
        EvidenceSummary.objects.bulk_create(rows)
    return n


def refresh_summaries(study: Study, job: Job | None, whole: bool) -> None:
    """The score job's hook (scoring.hooks.register_summary): every job that recomputes all
    profiles (each change of the data queues one) stores anew; a job for some profiles only
    (the data unchanged) stores when there is nothing stored."""
    if whole or not EvidenceSummary.objects.filter(study=study).exists():
        store_summaries(study, job)
