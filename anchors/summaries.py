"""What the pages and exports read of step importance: the values of a source per step, the function tags a
member may read, the table of importance by function tag per model (the paper's headline) and its chart.

Visibility (annotation.gate): measured values are the trace's (a model run's outputs, or a published
analysis's per-sentence numbers: Source.TRACE). Function tags are verdicts of a source: a member's own human
tags are hers (OWN), other annotators' are PEER, and a judge's or a published analysis's tags are JUDGE --
a blinded annotator reads only her own."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from anchors.core.measures import MEASURES
from anchors.models import ImportanceRun, StepImportance
from annotation import gate
from annotation.gate import Source
from annotation.models import Membership, StepTag, Study
from reasonlib.step_functions import FUNCTION_LABELS, FUNCTION_NAMES
from scoring.charts import COLORS, _layout
from scoring.core.bootstrap import bootstrap_ci

MEASURE_CHOICES = [(m, m.replace("_", " ")) for m in MEASURES if m != "accuracy"] + [("accuracy", "accuracy")]
DEFAULT_MEASURE = "counterfactual_importance_kl"
RUNS, IMPORTED = "run", "imported"
UNTAGGED = "untagged"
BOOTSTRAP_RESAMPLES = 1000
BOOTSTRAP_SEED = 0


def tag_source_reads(source: str) -> frozenset[Source]:
    """What reading the tags of ``source`` reads: "own" (the member's human tags), "human" (every
    annotator's), "judge:<id>" or "imported:<origin>"."""
    if source == "own":
        return frozenset({Source.OWN})
    if source == "human":
        return frozenset({Source.OWN, Source.PEER})
    return frozenset({Source.JUDGE})


def tag_filter(source: str, membership: Membership | None) -> dict[str, Any]:
    if source == "own":
        return {"kind": StepTag.Kind.HUMAN, "annotator_id": membership.user_id if membership else None}
    if source == "human":
        return {"kind": StepTag.Kind.HUMAN}
    kind, _, name = source.partition(":")
    if kind == "judge" and name.isdigit():
        return {"kind": StepTag.Kind.JUDGE, "judge_id": int(name)}
    return {"kind": StepTag.Kind.IMPORTED, "origin": name}


def readable_tags(step_ids: Iterable[int], membership: Membership | None) -> dict[int, list[tuple[str, str]]]:
    """{step id: [(source, tag)]} of every tag of those steps the member may read: her own human tags
    always; other annotators', judges' and published analyses' only where the gate lets her read them."""
    ids = list(step_ids)
    out: dict[int, list[tuple[str, str]]] = defaultdict(list)
    qs = StepTag.objects.filter(step_id__in=ids)
    peers, others = gate.may_read(membership, {Source.PEER}), gate.may_read(membership, {Source.JUDGE})
    for step, kind, annotator, judge, origin, tag in qs.order_by("step_id", "kind", "tag").values_list(
            "step_id", "kind", "annotator_id", "judge_id", "origin", "tag"):
        if kind == StepTag.Kind.HUMAN:
            own = membership is not None and annotator == membership.user_id
            if not (own or peers or membership is None):
                continue
            out[step].append(("own" if own else "human", tag))
        elif others:
            out[step].append((f"judge:{judge}" if kind == StepTag.Kind.JUDGE else f"imported:{origin}", tag))
    return out


def tag_sources(study: Study, membership: Membership | None) -> list[tuple[str, str]]:
    """The tag sources of the study's steps the member may choose (value, text)."""
    out = [("own", "my tags")]
    if gate.may_read(membership, {Source.PEER}):
        out.append(("human", "every annotator's tags"))
    if gate.may_read(membership, {Source.JUDGE}):
        tags = StepTag.objects.filter(step__trace__study=study)
        for judge, name in tags.filter(kind=StepTag.Kind.JUDGE).values_list("judge_id", "judge__name").distinct():
            out.append((f"judge:{judge}", f"judge {name}"))
        for origin in tags.filter(kind=StepTag.Kind.IMPORTED).values_list("origin", flat=True).distinct():
            out.append((f"imported:{origin}", f"imported from {origin}"))
    return out


def value_sources(study: Study) -> list[tuple[str, str]]:
    out = [(RUNS, "step-importance runs (the newest per step)")]
    origins = (StepImportance.objects.filter(trace__study=study, source=StepImportance.Source.IMPORTED)
               .values_list("origin", flat=True).distinct())
    return out + [(f"{IMPORTED}:{o}", f"imported from {o}") for o in sorted(set(origins))]


@dataclass(frozen=True)
class Choice:
    measure: str = DEFAULT_MEASURE
    tags: str = "own"
    values: str = RUNS


def parse_choice(study: Study, query: Mapping[str, str], membership: Membership | None = None) -> Choice:
    """The page's menus; an unknown value falls back to the default (the menus offer only known ones)."""
    measure = query.get("measure") or DEFAULT_MEASURE
    if measure not in MEASURES:
        measure = DEFAULT_MEASURE
    tags = query.get("tags") or default_tag_source(study, membership)
    values = query.get("values") or RUNS
    return Choice(measure, tags, values)


def default_tag_source(study: Study, membership: Membership | None) -> str:
    """A published analysis's tags when the study has some and the member may read them, else every
    annotator's, else (blind mode) her own."""
    origin = (StepTag.objects.filter(step__trace__study=study, kind=StepTag.Kind.IMPORTED)
              .values_list("origin", flat=True).first())
    if origin and gate.may_read(membership, {Source.JUDGE}):
        return f"imported:{origin}"
    return "human" if gate.may_read(membership, {Source.PEER}) else "own"


def reads(choice: Choice) -> frozenset[Source]:
    return frozenset({Source.TRACE}) | tag_source_reads(choice.tags)


def values_of(study: Study, values: str, *, model: str = "") -> list[StepImportance]:
    """The StepImportance rows of a value source: of runs, the newest run's row per step; of an import, its rows."""
    qs = StepImportance.objects.filter(trace__study=study).select_related("trace", "step")
    if model:
        qs = qs.filter(trace__model=model)
    if values.startswith(f"{IMPORTED}:"):
        return list(qs.filter(source=StepImportance.Source.IMPORTED, origin=values.split(":", 1)[1])
                    .order_by("trace__trace_id", "step__index"))
    newest: dict[int, StepImportance] = {}
    for row in qs.filter(source=StepImportance.Source.RUN).order_by("-irun_id"):
        newest.setdefault(row.step_id, row)
    return sorted(newest.values(), key=lambda r: (r.trace.trace_id, r.step.index))


def by_tag(study: Study, choice: Choice, membership: Membership | None = None) -> list[dict[str, Any]]:
    """Per model and function tag: steps, mean of the measure, its 95% bootstrap interval over steps
    (the project's bootstrap, seed 0). A step with several tags counts under each; untagged steps apart."""
    rows = values_of(study, choice.values)
    tag_rows = StepTag.objects.filter(step_id__in=[r.step_id for r in rows], **tag_filter(choice.tags, membership))
    tags: dict[int, set[str]] = defaultdict(set)
    for step, tag in tag_rows.values_list("step_id", "tag"):
        tags[step].add(tag)
    groups: dict[tuple[str, str], list[float]] = defaultdict(list)
    for r in rows:
        value = getattr(r, choice.measure)
        if value is None:
            continue
        for tag in tags.get(r.step_id) or {UNTAGGED}:
            groups[(r.trace.model, tag)].append(value)
    order = {name: i for i, name in enumerate((*FUNCTION_NAMES, UNTAGGED))}
    out = []
    for (model, tag), values in sorted(groups.items(), key=lambda kv: (kv[0][0], order.get(kv[0][1], 99))):
        ci = bootstrap_ci(np.array(values), n_resamples=BOOTSTRAP_RESAMPLES, seed=BOOTSTRAP_SEED)
        out.append({"model": model, "tag": tag, "label": FUNCTION_LABELS.get(tag, tag), "steps": len(values),
                    "mean": float(np.mean(values)), "ci_low": ci[0] if ci else None, "ci_high": ci[1] if ci else None,
                    "measure": choice.measure, "values": choice.values, "tags": choice.tags})
    return out


def chart(table: list[dict[str, Any]], measure: str) -> dict[str, Any]:
    """Bars of the mean measure per function tag, one trace per model (the table above is the same data)."""
    data = []
    for i, model in enumerate(dict.fromkeys(r["model"] for r in table)):
        rows = [r for r in table if r["model"] == model]
        data.append({"type": "bar", "name": model, "x": [r["label"] for r in rows], "y": [r["mean"] for r in rows],
                     "marker": {"color": COLORS[i % len(COLORS)]},
                     "error_y": {"type": "data", "symmetric": False,
                                 "array": [(r["ci_high"] - r["mean"]) if r["ci_high"] is not None else 0 for r in rows],
                                 "arrayminus": [(r["mean"] - r["ci_low"]) if r["ci_low"] is not None else 0
                                                for r in rows]}})
    return {"data": data, "layout": _layout(f"Step importance by function tag: mean {measure.replace('_', ' ')}",
                                            barmode="group", xaxis={"title": {"text": "function tag"}},
                                            yaxis={"title": {"text": measure.replace("_", " ")}})}


def manifest_meta(study: Study, values: str) -> dict[str, Any]:
    """The regime behind a value source, for the manifest: per run its model, N, temperature, seed, mode
    and code version; an import names its origin."""
    if values.startswith(f"{IMPORTED}:"):
        return {"regime": {"source": values, "note": "published per-sentence values, as imported"}}
    runs = ImportanceRun.objects.filter(subject__study=study, importance__isnull=False).distinct().select_related("subject")
    return {"runs": [{"run": r.pk, "model": r.subject.name, "samples": r.params.get("samples"),
                      "temperature": r.params.get("temperature") if r.params.get("temperature") is not None
                      else (r.params.get("decoding") or {}).get("temperature"),
                      "seed": r.params.get("seed"), "mode": r.mode, "similarity": r.params.get("similarity"),
                      "threshold": r.params.get("threshold"), "code_version": r.params.get("code_version")}
                     for r in runs]}
