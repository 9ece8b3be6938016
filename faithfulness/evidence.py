"""The evidence tier of every verifier of a study (validity SVR/VSR under a neutral policy, halting,
IFR) and the section-6 report built from it; the formulas are in core/.
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from dataclasses import asdict, dataclass
from typing import Any

from django.db import transaction
from django.db.models import Count
from django.db.models.fields.json import KT

from annotation.gate import Source
from annotation.models import Job, Step, StepLabel, Study, Trace
from faithfulness import stored_evidence
from faithfulness.core import halting as halt_core
from faithfulness.core import tiers as tier_core
from faithfulness.core import validity as val_core
from faithfulness.core.numbers import to_fraction
from faithfulness.models import EvidenceSummary, FaithfulnessRun
from faithfulness.summaries import anytime_summary, early_summary, ifr_of_runs, latest_runs, thinking_budget_summary
from judges.models import JudgeConfig
from reasonlib.refusals import FieldInvalid
from runs.version import code_version
from subjects.models import Generation

#: The evidence (its tier, SVR/VSR and report) reads the judges' and the annotators' labels and the
#: adjudications (annotation.gate): for members who may read every source.
EVIDENCE_READS = frozenset({Source.OWN, Source.PEER, Source.JUDGE, Source.ADJUDICATION})


def _labels(study: Study, models: list[str] | None = None) -> dict[tuple[str, str], dict[int, dict[int, tuple]]]:
    """(verifier kind, verifier name) -> trace pk -> step index -> (verdict, skeleton refs)."""
    judges = {j.pk: j for j in JudgeConfig.objects.filter(study=study)}
    qs = StepLabel.objects.filter(step__trace__study=study)
    if models is not None:
        qs = qs.filter(step__trace__model__in=models)
    out: dict[tuple[str, str], dict[int, dict[int, tuple]]] = defaultdict(lambda: defaultdict(dict))
    # Skeleton references are read only where a label has some (a second, small query): decoding
    # a JSON list for every label is most of the time of a large study's report.
    refs: dict[int, list[int]] = dict(qs.exclude(skeleton_refs=[]).values_list("pk", "skeleton_refs"))
    for pk, trace, index, kind, judge, verdict in qs.order_by("pk").values_list(
            "pk", "step__trace_id", "step__index", "kind", "judge_id", "verdict"):
        if kind == StepLabel.Kind.JUDGE:
            j = judges.get(judge)
            if j is None:
                continue
            if j.provider == JudgeConfig.Provider.MECHANISTIC:
                key = (tier_core.MECHANISTIC, f"mechanistic verifier {j.name} v{j.version}")
            else:
                key = (tier_core.JUDGE, f"LLM judge {j.name} ({j.model or j.provider}, prompt v{j.prompt_version})")
        else:
            # Adjudicated verdicts win over the annotators' own; several annotators: the first label kept.
            key = (tier_core.HUMAN, "human labels (adjudicated where adjudicated)")
            if kind == StepLabel.Kind.HUMAN and index in out[key][trace]:
                continue
        out[key][trace][index] = (verdict, refs.get(pk) or [])
    return out


def _scalar(value: Any) -> Any:
    """A JSON scalar read as text (PostgreSQL's ->>) back as the number or boolean it was."""
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            return value
        return parsed if isinstance(parsed, (int, float, bool)) else value
    return value


@dataclass
class StudyData:
    traces: dict[str, list[tuple]]  # model -> (pk, n_steps, correct, l_gold, gold)
    regimes: dict[str, list[tuple[dict[str, Any], int]]]  # model -> (regime keys, traces with them)
    labels: dict[tuple[str, str], dict[int, dict[int, tuple]]]
    step_texts: dict[int, list[str]]


def _study_data(study: Study, model: str | None) -> StudyData:
    # The evidence counts the study's own traces: fidelity variants' traces belong to their suite.
    qs = Trace.objects.of_study(study)
    if model:
        qs = qs.filter(model=model)
    traces: dict[str, list[tuple]] = defaultdict(list)
    for pk, m, n, c, l_gold, gold in qs.order_by("pk").values_list(
            "pk", "model", "n_steps", "answer_correct", "problem__l_gold", "problem__gold_answer"):
        traces[m].append((pk, n, c, l_gold, gold))
    # The report's regime keys, grouped in the database (per-sample keys such as messages_hash are left out).
    keys = (*tier_core.REGIME_KEYS, "max_steps")
    regimes: dict[str, list[tuple[dict[str, Any], int]]] = defaultdict(list)
    for row in qs.annotate(**{f"r_{k}": KT(f"regime__{k}") for k in keys}).values(
            "model", *(f"r_{k}" for k in keys)).annotate(n=Count("pk")).order_by():
        regimes[row["model"]].append(({k: _scalar(row[f"r_{k}"]) for k in keys}, row["n"]))
    steps: dict[int, list[str]] = defaultdict(list)
    for trace, text in Step.objects.filter(trace__in=qs).order_by("trace_id", "index").values_list("trace_id", "text"):
        steps[trace].append(text)
    return StudyData(traces, regimes, _labels(study, [model] if model else None), steps)


def validity_of(data: StudyData, model: str, policy: str) -> list[tier_core.Verifier]:
    out = []
    traces = data.traces.get(model, [])
    for (kind, name), per_trace in sorted(data.labels.items()):
        rows = []
        for pk, n, correct, *_rest in traces:
            if pk not in per_trace or n == 0:
                continue
            labels = per_trace[pk]
            rows.append(([labels.get(i, (None,))[0] for i in range(1, n + 1)], correct))
        if rows:
            out.append(tier_core.Verifier(kind, name, val_core.validity(rows, policy).as_dict()))
    order = {tier_core.MECHANISTIC: 0, tier_core.JUDGE: 1, tier_core.HUMAN: 2}
    return sorted(out, key=lambda v: (order[v.kind], v.name))


def halting_of(data: StudyData, model: str, slack: int = 0) -> dict[str, Any] | None:
    """k* from the skeleton references of the strongest label source with references (else none)
    and the first step stating the gold answer; None when no trace has a gold answer."""
    refs_source = next((per for (kind, _n), per in sorted(data.labels.items(),
                                                             key=lambda kv: kv[0][0] != tier_core.MECHANISTIC)
                        if any(r for steps in per.values() for _v, r in steps.values())), {})
    pairs = []
    with_skeleton = 0
    for pk, n, _c, l_gold, gold in data.traces.get(model, []):
        g = to_fraction((gold or "").strip().lstrip("$"))
        if g is None or n == 0:
            continue
        texts = data.step_texts.get(pk, [])
        labels = refs_source.get(pk, {})
        refs = [labels.get(i, (None, []))[1] for i in range(1, n + 1)]
        skeleton_len = l_gold if labels and l_gold else 0
        with_skeleton += bool(skeleton_len)
        pairs.append((halt_core.k_star(texts, g, refs, skeleton_len), n))
    if not pairs:
        return None
    rates = halt_core.halting_rates(pairs, slack).as_dict()
    rates["basis"] = (f"k* from skeleton references and the gold answer on {with_skeleton} traces, "
                      f"from the first step stating the gold answer on {len(pairs) - with_skeleton}")
    return rates


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
    tokens: dict[str, list[int]] = defaultdict(list)
    for name, n in Generation.objects.filter(subject__study=study, completion_tokens__isnull=False,
                                             trace__in=Trace.objects.of_study(study).values("pk")) \
            .values_list("subject__name", "completion_tokens"):
        tokens[name].append(n)
    mech = JudgeConfig.objects.filter(study=study, provider=JudgeConfig.Provider.MECHANISTIC).first()
    out = []
    for name in sorted(parts):
        part = parts[name]
        ev = tier_core.Evidence(model=name, code_version=code_version(),
                                **{k: part[k] for k in stored_evidence.FIELDS if k != "verifiers"})
        ev.verifiers = stored_evidence.verifiers(part)
        if tokens.get(name):
            ev.tokens_mean = statistics.fmean(tokens[name])
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

def compute_summaries(study: Study, model: str | None = None,
                      policies: tuple[str, ...] = val_core.POLICIES) -> dict[str, dict[str, dict[str, Any]]]:
    """policy -> model -> the FIELDS (faithfulness.stored_evidence) of its evidence, from the data (one read for every
    policy): what the score job stores, and what a page computes when nothing is stored."""
    data = _study_data(study, model)
    out: dict[str, dict[str, dict[str, Any]]] = {policy: {} for policy in policies}
    for name in sorted(data.traces):
        rows = data.traces[name]
        part: dict[str, Any] = {"traces": len(rows), "with_regime": 0, "steps_mean": None, "steps_median": None,
                                "steps_max": None}
        regime_vals: dict[str, list[Any]] = defaultdict(list)
        for regime, n in data.regimes.get(name, []):
            if any(v is not None for v in regime.values()):
                part["with_regime"] += n
                for key, v in regime.items():
                    if v is not None and v not in regime_vals[key] and len(regime_vals[key]) < 20:
                        regime_vals[key].append(v)
        part["regime"] = dict(regime_vals)
        checked = [c for _pk, _n, c, *_r in rows if c is not None]
        part["accuracy"] = sum(checked) / len(checked) if checked else None
        part["accuracy_n"] = len(checked)
        steps = [n for _pk, n, *_r in rows if n > 0]
        part["with_steps"] = len(steps)
        if steps:
            part["steps_mean"], part["steps_median"] = statistics.fmean(steps), statistics.median(steps)
            part["steps_max"] = max(steps)
        part["halting"] = halting_of(data, name)
        by: dict[int, list[int]] = {}
        for _pk, n, _c, l_gold, _gold in rows:
            cell = by.setdefault(l_gold, [0, 0])
            cell[0], cell[1] = cell[0] + 1, cell[1] + n
        part["difficulty"] = by  # skeleton length -> [traces, steps in them]: the Evidence page's chart
        for policy in policies:
            out[policy][name] = {**part, "verifiers": [asdict(v) for v in validity_of(data, name, policy)]}
    return out


def store_summaries(study: Study, job: Job | None = None) -> int:
    """Recompute and replace the study's summaries (every model, every policy); the number of rows."""
    computed = compute_summaries(study)
    rows = [EvidenceSummary(study=study, model=name, policy=policy, data=part, job=job)
            for policy, per_model in computed.items() for name, part in per_model.items()]
    with transaction.atomic():
        EvidenceSummary.objects.filter(study=study).delete()
        if rows:
            EvidenceSummary.objects.bulk_create(rows)
        else:
            # A study without traces: one marker row says "computed: no models", so the pages need not read.
            EvidenceSummary.objects.create(study=study, model="", policy="", data={}, job=job)
    return len(rows)


def refresh_summaries(study: Study, job: Job | None, whole: bool) -> None:
    """The score job's hook (scoring.hooks.register_summary): every job that recomputes all
    profiles (each change of the data queues one) stores anew; a job for some profiles only
    (the data unchanged) stores when there is nothing stored."""
    if whole or not EvidenceSummary.objects.filter(study=study).exists():
        store_summaries(study, job)
