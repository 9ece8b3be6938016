"""Export kinds of labels and agreement.

Kinds (``--what``; registered in ``scoring.exports`` through ``AgreementConfig.export_kinds``, all restricted to owners
and adjudicators -- docs/exports.md explains why):

* ``labels``: every stored label, one row per (step, source); streamed from
  the database (flat memory). ``--source judge:NAME|annotator:USER`` keeps
  that source's rows; ``--source human|final|adjudicated`` gives the
  derived labels of that source instead, one row per step.
* ``agreement``: the metrics object of ``--candidate`` against ``--reference``.
* ``agreement-steps``: one row per step, every source's verdict, refs,
  confidence, who and when.
* ``agreement-traces``: one row per trace, every source's first error and
  scores, and the holistic ratings.
* ``prm-training``: TRL's stepwise-supervision rows (``prompt``,
  ``completions``, ``labels``) from the final labels of traces labelled
  completely; re-imports with ``--format trl-stepwise``.

Export jobs, which build these kinds as they build every app's, are scoring.export_jobs.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd
from django.db.models import Exists, OuterRef

from agreement import data as ad
from agreement import services as svc
from agreement import tags
from agreement.models import CalibrationStudy
from annotation import scopes
from annotation.models import Problem, Step, StepLabel, Study, Trace, TraceReview
from scoring import services
from scoring.core import labels as core_labels
from scoring.core.labels import INVALID, complete_traces, determined_first_errors
from scoring.exports import ExportError, ExportRequest, Table, register

#: Rows read from the database per round trip of a streamed export.
CHUNK_ROWS = 5000

LABEL_FIELDS = ["trace_id", "step", "source", "annotator", "verdict", "skeleton_refs", "confidence", "reason",
                "problem_id", "model", "origin", "review_complete", "updated_at", "channel"]
LABEL_SCHEMA = {"trace_id": "string", "step": "int64", "source": "string", "annotator": "string",
                "verdict": "string", "skeleton_refs": "list<int64>", "confidence": "float64", "reason": "string",
                "problem_id": "string", "model": "string", "origin": "string", "review_complete": "bool",
                "updated_at": "string", "channel": "string"}
PRM_FIELDS = ["prompt", "completions", "labels", "meta"]
PRM_SCHEMA = {"prompt": "string", "completions": "list<string>", "labels": "list<bool>", "meta": "json"}
DERIVED_SOURCES = (ad.HUMAN, ad.FINAL, ad.ADJUDICATED)


# ---------------------------------------------------------------------------
# Request helpers
# ---------------------------------------------------------------------------
def _calibration(request: ExportRequest) -> CalibrationStudy | None:
    value = request.extra.get("calibration")
    if value in (None, ""):
        return None
    try:
        return svc._calibration(request.study, value)
    except svc.BadSelection as exc:
        raise ExportError(f"--calibration: {exc.message}") from None


def _scope_traces(request: ExportRequest):
    """The Trace queryset an export covers: the study, a calibration sample,
    a model, a domain."""
    qs = Trace.objects.of_study(request.study)
    if request.extra.get("cohort"):
        try:
            qs = qs.filter(pk__in=scopes.scope_trace_ids(request.study, "cohort", str(request.extra["cohort"])))
        except scopes.ScopeError as exc:
            raise ExportError(f"--cohort: {exc}") from None
    cal = _calibration(request)
    if cal is not None:
        qs = qs.filter(pk__in=cal.items.values("trace"))
    if request.model:
        qs = qs.filter(model=request.model)
    if request.domain:
        qs = qs.filter(problem__domain=request.domain)
    return qs


def _scope(request: ExportRequest) -> list[int] | None:
    if not (request.extra.get("calibration") or request.extra.get("cohort") or request.model or request.domain):
        return None
    return list(_scope_traces(request).order_by("pk").values_list("pk", flat=True))


def _source(request: ExportRequest, value: str | None, option: str = "--source") -> str:
    try:
        return ad.check_source(request.study, value)
    except ad.UnknownSource as exc:
        raise ExportError(f"{option}: {exc.message}") from None


def _profile(request: ExportRequest):
    try:
        return services.resolve_profile(request.study, request.profile)
    except services.UnknownProfile as exc:
        raise ExportError(f"--profile: {exc.message}") from None


def _profile_meta(profile) -> dict[str, Any]:
    return {"name": profile.name, "version": profile.version, "params": profile.params}


def _trace_info(scope_qs) -> dict[int, tuple[str, str, str, str]]:
    """Trace pk -> (trace_id, problem_id, model, domain), one query."""
    return {pk: (tid, pid, model, domain) for pk, tid, pid, model, domain in
            scope_qs.values_list("pk", "trace_id", "problem__problem_id", "model", "problem__domain")}


def _iso(value) -> str | None:
    return value.isoformat() if value is not None else None


# ---------------------------------------------------------------------------
# labels
# ---------------------------------------------------------------------------
def _check_labels(request: ExportRequest) -> None:
    if request.source and request.source != "all":
        _source(request, request.source)
    _calibration(request)


def _raw_label_rows(request: ExportRequest, table: Table, **filters: Any) -> Iterator[dict[str, Any]]:
    qs = StepLabel.objects.filter(step__trace__in=_scope_traces(request), **filters)
    table.meta["expected_rows"] = qs.count()
    qs = (qs.annotate(review_complete=Exists(TraceReview.objects.filter(
              trace=OuterRef("step__trace"), annotator=OuterRef("annotator"), complete=True)))
          .order_by("step__trace_id", "step__index", "kind", "annotator__username", "judge__name")
          .values_list("step__trace__trace_id", "step__index", "kind", "annotator__username", "judge__name",
                       "verdict", "skeleton_refs", "confidence", "reason", "step__trace__problem__problem_id",
                       "step__trace__model", "review_complete", "updated_at", "step__channel"))
    traces: set[str] = set()
    sources: set[str] = set()
    n = 0
    for (tid, step, kind, username, judge, verdict, refs, conf, reason, pid, model, complete,
         updated, channel) in qs.iterator(chunk_size=CHUNK_ROWS):
        if kind == StepLabel.Kind.JUDGE:
            source, who = f"{ad.JUDGE_PREFIX}{judge}", judge
        elif kind == StepLabel.Kind.ADJUDICATION:
            source, who = ad.FINAL, username
        else:
            source, who = ad.HUMAN, username
        traces.add(tid)
        sources.add(source)
        n += 1
        yield {"trace_id": tid, "step": step, "channel": channel, "source": source, "annotator": who, "verdict": verdict,
               "skeleton_refs": list(refs or []), "confidence": conf, "reason": reason or None, "problem_id": pid,
               "model": model, "origin": kind, "review_complete": bool(complete) if kind == StepLabel.Kind.HUMAN else None,
               "updated_at": _iso(updated)}
    table.meta["sources"] = sorted(sources)
    table.meta["counts"] = {"labels": n, "traces": len(traces)}


def _deciding_labels(study: Study, scope_qs, primary_judge: int | None) -> dict[tuple[int, int, str], tuple]:
    """(trace pk, step, origin) -> (who, confidence, reason, updated_at) of the
    adjudications and the primary judge's labels (what ``final`` falls back to)."""
    kinds = StepLabel.objects.filter(step__trace__in=scope_qs, kind=StepLabel.Kind.ADJUDICATION)
    if primary_judge is not None:
        kinds = kinds | StepLabel.objects.filter(step__trace__in=scope_qs, kind=StepLabel.Kind.JUDGE,
                                                 judge_id=primary_judge)
    out = {}
    for tpk, step, kind, username, judge, conf, reason, updated in kinds.values_list(
            "step__trace_id", "step__index", "kind", "annotator__username", "judge__name", "confidence", "reason",
            "updated_at"):
        origin = core_labels.ORIGIN_ADJUDICATED if kind == StepLabel.Kind.ADJUDICATION else core_labels.ORIGIN_JUDGE
        out[(tpk, step, origin)] = (username if kind == StepLabel.Kind.ADJUDICATION else judge, conf, reason or None,
                                    _iso(updated))
    return out


def _channel(step: int, n_thought_steps: int) -> str:
    """The channel of a step from its reading-order number: thought steps come first."""
    return Step.Channel.THOUGHT if step <= n_thought_steps else Step.Channel.ANSWER


def _derived_label_rows(request: ExportRequest, source: str, table: Table) -> list[dict[str, Any]]:
    scope = _scope(request)
    data = ad.AgreementData.read(request.study, scope)
    steps = data.steps(source)
    scope_qs = _scope_traces(request)
    info = _trace_info(scope_qs)
    deciding = _deciding_labels(request.study, scope_qs, data.inputs.primary_judge)
    n_thought = dict(zip(data.inputs.traces["trace_id"].tolist(), data.inputs.traces["n_thought_steps"].tolist(),
                         strict=True))
    origins = steps["origin"].tolist() if "origin" in steps.columns else [
        "consensus" if source == ad.HUMAN else None] * len(steps)
    rows = []
    for tpk, step, verdict, refs, origin in zip(steps["trace_id"].tolist(), steps["step"].tolist(),
                                                steps["verdict"].astype(object).tolist(),
                                                steps["skeleton_refs"].tolist(), origins, strict=True):
        if tpk not in info:
            continue
        who, conf, reason, updated = deciding.get((tpk, int(step), origin), (None, None, None, None))
        tid, pid, model, _ = info[tpk]
        rows.append({"trace_id": tid, "step": int(step), "channel": _channel(int(step), n_thought.get(tpk, 0)),
                     "source": source, "annotator": who, "verdict": verdict,
                     "skeleton_refs": [int(r) for r in (refs or ())], "confidence": conf, "reason": reason,
                     "problem_id": pid, "model": model, "origin": origin, "review_complete": None,
                     "updated_at": updated})
    table.meta["sources"] = [source]
    table.meta["counts"] = {"labels": len(rows), "traces": len({r["trace_id"] for r in rows})}
    table.meta["expected_rows"] = len(rows)
    return rows


@register("labels", restricted=True, check=_check_labels,
          help="one row per stored label (trace_id, step, source, annotator, verdict, skeleton_refs, confidence, "
               "reason, ...); --source human|final|adjudicated for that source's derived labels")
def labels(request: ExportRequest) -> Table:
    _check_labels(request)
    table = Table(LABEL_FIELDS, [], schema=LABEL_SCHEMA, meta={"profile": None})
    source = request.source if request.source and request.source != "all" else None
    if source is None:
        table.rows = _raw_label_rows(request, table)
    elif source.startswith(ad.JUDGE_PREFIX):
        source = _source(request, source)
        table.rows = _raw_label_rows(request, table, kind=StepLabel.Kind.JUDGE,
                                     judge__name=source[len(ad.JUDGE_PREFIX):])
    elif source.startswith(ad.ANNOTATOR_PREFIX):
        source = _source(request, source)
        table.rows = _raw_label_rows(request, table, kind=StepLabel.Kind.HUMAN,
                                     annotator__username=source[len(ad.ANNOTATOR_PREFIX):])
    else:
        table.rows = _derived_label_rows(request, _source(request, source), table)
    return table


# ---------------------------------------------------------------------------
# agreement: the metrics object
# ---------------------------------------------------------------------------
def _check_agreement(request: ExportRequest) -> None:
    _source(request, request.reference or svc.DEFAULT_REFERENCE, "--reference")
    if not request.candidate:
        judges = ad.judge_pks(request.study)
        if svc.default_candidate(request.study, judges) is None:
            raise ExportError("--candidate: give the candidate label source")
    else:
        _source(request, request.candidate, "--candidate")
    _profile(request)
    _calibration(request)
    svc.parse_seed(request.extra.get("seed"))


AGREEMENT_COLUMNS = ["reference", "candidate", "profile", "profile_version", "seed", "metric", "group", "value",
                     "ci_low", "ci_high", "n", "undefined"]
AGREEMENT_SCHEMA = {"reference": "string", "candidate": "string", "profile": "string", "profile_version": "int64",
                    "seed": "int64", "metric": "string", "group": "string", "value": "float64", "ci_low": "float64",
                    "ci_high": "float64", "n": "int64", "undefined": "string"}
# Scalar metrics, with the count each is over and the key of its interval.
_SCALARS = [
    ("percent_agreement", "steps_compared", "percent_agreement_ci"),
    ("kappa", "steps_compared", "kappa_ci"),
    ("kappa_binary", "steps_compared", "kappa_binary_ci"),
    ("first_error_exact", "traces_compared", "first_error_exact_ci"),
    ("first_error_within_1", "traces_compared", "first_error_within_1_ci"),
    ("pb_error_acc", "pb_error_traces", "pb_error_acc_ci"),
    ("pb_correct_acc", "pb_correct_traces", "pb_correct_acc_ci"),
    ("pb_f1", "traces_compared", "pb_f1_ci"),
    ("pearson_r", "traces_compared", "pearson_ci"),
    ("spearman_rho", "traces_compared", "spearman_ci"),
    ("ece", "steps_calibrated", "ece_ci"),
    ("brier", "steps_calibrated", "brier_ci"),
]
_COUNTS = ["traces_in_scope", "steps_compared", "traces_compared", "pb_error_traces", "pb_correct_traces",
           "steps_calibrated"]


def _f(v: Any) -> float | None:
    return None if v is None else float(v)


def agreement_rows(metrics: dict[str, Any]) -> list[dict[str, Any]]:
    """The metrics object as a tidy long table: one row per (metric, group),
    scalar cells only (value, its interval, the count it is over and why it
    is undefined). Per-group figures (agreement by step position, the
    confusion matrix, the reliability bins, ratings and annotator agreement)
    are rows with a ``group`` each, ready for a plot."""
    head = {"reference": metrics["reference"], "candidate": metrics["candidate"], "profile": metrics["profile"],
            "profile_version": metrics["profile_version"], "seed": metrics["seed"]}
    why = metrics.get("undefined", {})
    rows: list[dict[str, Any]] = []

    def add(metric: str, value: Any, *, group: str = "", ci: Any = None, n: Any = None, undefined: str = "") -> None:
        lo, hi = (ci if isinstance(ci, (list, tuple)) and len(ci) == 2 else (None, None))
        rows.append({**head, "metric": metric, "group": group, "value": _f(value), "ci_low": _f(lo),
                     "ci_high": _f(hi), "n": None if n is None else int(n), "undefined": undefined or None})

    for key in _COUNTS:
        add(key, metrics.get(key))
    for key, count, ci in _SCALARS:
        add(key, metrics.get(key), ci=metrics.get(ci), n=metrics.get(count), undefined=why.get(key, ""))
    for name, split in (metrics.get("pb_splits") or {}).items():  # ProcessBench items by split
        for key, count in (("pb_error_acc", "pb_error_traces"), ("pb_correct_acc", "pb_correct_traces"),
                           ("pb_f1", "traces_compared")):
            add(key, split.get(key), group=f"split={name}", n=split.get(count),
                undefined=why.get(f"pb_splits.{name}.{key}", ""))
    if "pb_average_f1" in metrics:
        add("pb_average_f1", metrics["pb_average_f1"], n=metrics.get("traces_compared"),
            undefined=why.get("pb_average_f1", ""))
    for ref, row in (metrics.get("confusion") or {}).items():
        for cand, k in row.items():
            add("confusion", k, group=f"reference={ref}; candidate={cand}")
    for r in metrics.get("by_position") or []:
        add("agreement_by_position", r.get("agreement"), group=f"step {r['step']}", n=r.get("steps"))
    for b in metrics.get("reliability") or []:
        group = f"bin {b['bin']}: [{b['lower']:.1f}, {b['upper']:.1f})"
        add("reliability_accuracy", b.get("accuracy"), group=group, n=b.get("count"))
        add("reliability_mean_confidence", b.get("mean_confidence"), group=group, n=b.get("count"))
    ratings = metrics.get("ratings") or {}
    for side in ("reference", "candidate"):
        block = ratings.get(side) or {}
        for key, ci in (("pearson_r", "pearson_ci"), ("spearman_rho", "spearman_ci")):
            if key in block:
                add(f"ratings.{key}", block.get(key), group=side, ci=block.get(ci), n=block.get("n"),
                    undefined=why.get(f"ratings.{side}.{key}", ""))
    ann = metrics.get("annotators") or {}
    for key in ("krippendorff_alpha", "fleiss_kappa"):
        if key in ann:
            add(f"annotators.{key}", ann.get(key), n=ann.get("items_paired"), undefined=why.get(f"annotators.{key}", ""))
    return rows


@register("agreement", restricted=True, check=_check_agreement,
          help="the metrics of --candidate against --reference: one row per metric (and per group for "
               "per-position, confusion and reliability figures), scalar columns")
def agreement(request: ExportRequest) -> Table:
    _check_agreement(request)
    study = request.study
    reference = _source(request, request.reference or svc.DEFAULT_REFERENCE, "--reference")
    candidate = _source(request, request.candidate or svc.default_candidate(study, ad.judge_pks(study)),
                        "--candidate")
    profile = _profile(request)
    seed = svc.parse_seed(request.extra.get("seed"))
    metrics = svc.agreement(study, reference, candidate, profile, scope=_scope(request), seed=seed,
                            calibration=_calibration(request))
    return Table(list(AGREEMENT_COLUMNS), agreement_rows(metrics), schema=dict(AGREEMENT_SCHEMA), meta={
        "profile": _profile_meta(profile), "sources": [reference, candidate], "seed": seed,
        "bootstrap": metrics["bootstrap"], "scores": metrics.get("scores"), "notes": metrics.get("notes"),
        "calibration": metrics.get("calibration"),
        "applied": ["reference", "candidate", "profile", "model", "domain", "calibration", "seed"],
        "counts": {"steps_compared": metrics["steps_compared"], "traces_compared": metrics["traces_compared"],
                   "traces_in_scope": metrics["traces_in_scope"]},
    })


# ---------------------------------------------------------------------------
# agreement-steps and agreement-traces: every source side by side
# ---------------------------------------------------------------------------
def _check_scope(request: ExportRequest) -> None:
    _profile(request)
    _calibration(request)
    _scope_traces(request)  # a bad --cohort is refused before anything is written


def _label_extras(scope_qs) -> pd.DataFrame:
    """Per stored label: trace_id (pk), step, kind, annotator (pk), judge (pk), confidence, updated_at,
    reason (a judge's reason, an annotator's note, an adjudicator's reason)."""
    qs = StepLabel.objects.filter(step__trace__in=scope_qs)
    rows = list(qs.values_list("step__trace_id", "step__index", "kind", "annotator_id", "judge_id", "confidence",
                               "updated_at", "reason"))
    return pd.DataFrame.from_records(rows, columns=["trace_id", "step", "kind", "annotator", "judge", "confidence",
                                                    "updated_at", "reason"])


STEP_LEAD = ["trace_id", "problem_id", "model", "domain", "step", "channel", "step_text", "reference", "candidate",
             "reference_verdict", "candidate_verdict", "agree"]


def _step_columns(names: list[str]) -> list[str]:
    cols = list(STEP_LEAD)
    for s in names:
        cols += [f"{s}.verdict", f"{s}.skeleton_refs"]
        if s in (ad.FINAL, ad.ADJUDICATED):
            cols.append(f"{s}.origin")
        if s == ad.HUMAN:
            cols += [f"{s}.n_annotators", f"{s}.n_agree"]
        if s.startswith((ad.JUDGE_PREFIX, ad.ANNOTATOR_PREFIX)):
            cols += [f"{s}.confidence", f"{s}.reason", f"{s}.updated_at"]
    return cols + ["adjudication.by", "adjudication.reason", "adjudication.updated_at"]


def _pair_sources(request: ExportRequest) -> tuple[str, str]:
    """The reference and candidate an agreement-steps export compares (the page's defaults)."""
    study = request.study
    reference = _source(request, request.reference or svc.DEFAULT_REFERENCE, "--reference")
    candidate = request.candidate or svc.default_candidate(study, ad.judge_pks(study))
    if not candidate:
        raise ExportError("--candidate: give the candidate label source")
    return reference, _source(request, candidate, "--candidate")


@register("agreement-steps", restricted=True, check=_check_scope,
          help="one row per step that --reference and --candidate both labelled: the step's text, both verdicts, "
               "every source's verdict, refs, confidence, reason or note, and the adjudication with its reason")
def agreement_steps(request: ExportRequest) -> Table:
    _check_scope(request)
    study = request.study
    reference, candidate = _pair_sources(request)
    scope = _scope(request)
    data = ad.AgreementData.read(study, scope)
    names = data.sources()
    traces = data.traces()
    info = _trace_info(_scope_traces(request))
    n = traces["n_steps"].to_numpy(dtype=np.int64)
    t_n = traces["n_thought_steps"].to_numpy(dtype=np.int64)
    base = pd.DataFrame({"trace_id": np.repeat(traces["trace_id"].to_numpy(dtype=np.int64), n),
                         "step": np.concatenate([np.arange(1, k + 1) for k in n]) if len(n) else np.array([], int)})
    base["channel"] = np.where(base["step"].to_numpy() <= np.repeat(t_n, n), Step.Channel.THOUGHT.value,
                               Step.Channel.ANSWER.value)
    out = base.copy()
    for s in names:
        steps = data.steps(s)
        keep = ["trace_id", "step", "verdict", "skeleton_refs"] + [c for c in ("origin", "n_annotators", "n_agree")
                                                                  if c in steps.columns]
        part = steps[keep].rename(columns={c: f"{s}.{c}" for c in keep[2:]})
        part["step"] = part["step"].astype(np.int64)
        out = out.merge(part, on=["trace_id", "step"], how="left")
    extras = _label_extras(_scope_traces(request))
    users = data.annotators
    for s in names:
        if s.startswith(ad.JUDGE_PREFIX):
            pk = data.inputs.judges.get(s[len(ad.JUDGE_PREFIX):])
            sub = extras.loc[(extras["kind"] == StepLabel.Kind.JUDGE) & (extras["judge"] == pk)]
        elif s.startswith(ad.ANNOTATOR_PREFIX):
            pk = data.user_pk(s[len(ad.ANNOTATOR_PREFIX):])
            sub = extras.loc[(extras["kind"] == StepLabel.Kind.HUMAN) & (extras["annotator"] == pk)]
        else:
            continue
        sub = sub[["trace_id", "step", "confidence", "reason", "updated_at"]].rename(
            columns={"confidence": f"{s}.confidence", "reason": f"{s}.reason", "updated_at": f"{s}.updated_at"})
        out = out.merge(sub, on=["trace_id", "step"], how="left")
    adj = extras.loc[extras["kind"] == StepLabel.Kind.ADJUDICATION,
                     ["trace_id", "step", "annotator", "reason", "updated_at"]]
    adj = adj.assign(annotator=adj["annotator"].map(users)).rename(
        columns={"annotator": "adjudication.by", "reason": "adjudication.reason",
                 "updated_at": "adjudication.updated_at"})
    out = out.merge(adj, on=["trace_id", "step"], how="left")
    if ad.ADJUDICATED in names:
        # adjudicated.* holds adjudications only: where nothing was adjudicated the
        # source falls back to the human consensus, which has its own columns.
        not_adj = out[f"{ad.ADJUDICATED}.origin"].to_numpy(dtype=object) != core_labels.ORIGIN_ADJUDICATED
        for c in [c for c in out.columns if c.startswith(f"{ad.ADJUDICATED}.")]:
            out[c] = out[c].astype(object).where(~not_adj, None)
    # The rows the manifest names: the steps both the reference and the candidate labelled.
    ref_v, cand_v = data.steps(reference), data.steps(candidate)
    pair = ref_v[["trace_id", "step", "verdict"]].rename(columns={"verdict": "reference_verdict"}).merge(
        cand_v[["trace_id", "step", "verdict"]].rename(columns={"verdict": "candidate_verdict"}),
        on=["trace_id", "step"], how="inner")
    pair = pair.loc[pair["reference_verdict"].notna() & pair["candidate_verdict"].notna()]
    pair["step"] = pair["step"].astype(np.int64)
    out = out.merge(pair, on=["trace_id", "step"], how="inner")
    texts = dict(((t, i), x) for t, i, x in Step.objects.filter(trace_id__in=out["trace_id"].unique().tolist())
                 .values_list("trace_id", "index", "text"))
    columns = _step_columns(names)
    rows = []
    for r in out.to_dict("records"):
        tid, pid, model, domain = info.get(r["trace_id"], (str(r["trace_id"]), None, None, None))
        row: dict[str, Any] = {"trace_id": tid, "problem_id": pid, "model": model, "domain": domain or None,
                               "step": int(r["step"]), "step_text": texts.get((r["trace_id"], int(r["step"]))),
                               "reference": reference, "candidate": candidate,
                               "reference_verdict": r["reference_verdict"], "candidate_verdict": r["candidate_verdict"],
                               "agree": r["reference_verdict"] == r["candidate_verdict"]}
        for c in columns[len(STEP_LEAD):]:
            v = r.get(c)
            if isinstance(v, float) and np.isnan(v):
                v = None
            elif v is pd.NaT or (not isinstance(v, (list, tuple, np.ndarray, str)) and pd.isna(v)):
                v = None
            if c.endswith(".skeleton_refs") and v is not None:
                v = [int(x) for x in v]
            elif c.endswith("updated_at") and v is not None:
                v = v.isoformat()
            elif c.endswith((".n_annotators", ".n_agree")) and v is not None:
                v = int(v)
            row[c] = v
        row["channel"] = r["channel"]
        rows.append(row)
    schema = {"trace_id": "string", "problem_id": "string", "model": "string", "domain": "string", "step": "int64",
              "channel": "string", "step_text": "string", "reference": "string", "candidate": "string",
              "reference_verdict": "string", "candidate_verdict": "string", "agree": "bool"}
    for c in columns[len(STEP_LEAD):]:
        schema[c] = ("list<int64>" if c.endswith(".skeleton_refs") else "float64" if c.endswith(".confidence")
                     else "int64" if c.endswith((".n_annotators", ".n_agree")) else "string")
    return Table(columns, rows, schema=schema, meta={
        "profile": None, "sources": names,
        "rows_are": f"the steps labelled by both {reference} (reference) and {candidate} (candidate)",
        "applied": ["reference", "candidate", "model", "domain", "calibration"],
        "counts": {"steps": len(rows), "traces": int(len({r['trace_id'] for r in rows})),
                   "traces_in_scope": int(len(traces)),
                   "disagreements": int(sum(1 for r in rows if not r["agree"]))},
        "expected_rows": len(rows)})


SCORE_PARTS = ["complete", "first_error", "process", "s_hcrs", "s_prm", "holistic"]


@register("agreement-traces", restricted=True, check=_check_scope,
          help="one row per trace: every source's first error and scores, and the holistic ratings")
def agreement_traces(request: ExportRequest) -> Table:
    _check_scope(request)
    study = request.study
    profile = _profile(request)
    data = ad.AgreementData.read(study, _scope(request))
    names = data.sources()
    traces = data.traces()
    info = _trace_info(_scope_traces(request))
    ratings = data.scoped_ratings()
    by_trace: dict[int, list[tuple[str, float]]] = {}
    for tid, rating, who in ratings.itertuples(index=False):
        by_trace.setdefault(int(tid), []).append((who, float(rating)))
    frames, origins, first_errors = {}, {}, {}
    for s in names:
        frame, origin = data.scores(s, profile)
        frames[s] = frame.set_index("trace_id")
        origins[s] = origin
        # A trace whose labels stop at its first error (ProcessBench's reference) has no scores (they need every
        # step) but its first error is determined, as the agreement metrics count it: the row gives it too.
        det = determined_first_errors(traces[["trace_id", "n_steps"]], data.steps(s))
        det = det.loc[det["determined"].to_numpy() & det["first_error"].notna().to_numpy()]
        first_errors[s] = dict(zip(det["trace_id"].tolist(), det["first_error"].astype(int).tolist(), strict=True))
    columns = ["trace_id", "problem_id", "model", "domain", "n_steps", "answer_correct", "rating_mean", "ratings",
               "raters"]
    for s in names:
        columns += [f"{s}.{p}" for p in SCORE_PARTS]
    rows = []
    for tpk, n_steps, correct in zip(traces["trace_id"].tolist(), traces["n_steps"].tolist(),
                                     traces["answer_correct"].tolist(), strict=True):
        tid, pid, model, domain = info.get(tpk, (str(tpk), None, None, None))
        rated = by_trace.get(tpk, [])
        row: dict[str, Any] = {"trace_id": tid, "problem_id": pid, "model": model, "domain": domain or None,
                               "n_steps": int(n_steps), "answer_correct": bool(correct),
                               "rating_mean": float(np.mean([r for _, r in rated])) if rated else None,
                               "ratings": [r for _, r in rated], "raters": [w for w, _ in rated]}
        for s in names:
            f = frames[s]
            present = tpk in f.index
            row[f"{s}.complete"] = bool(present)
            for p in SCORE_PARTS[1:]:
                v = f.at[tpk, p] if present else (first_errors[s].get(tpk) if p == "first_error" else None)
                if v is None or v is pd.NA or (isinstance(v, float) and np.isnan(v)):
                    v = None
                elif p == "first_error":
                    v = int(v)
                else:
                    v = float(v)
                row[f"{s}.{p}"] = v
        rows.append(row)
    schema = {"trace_id": "string", "problem_id": "string", "model": "string", "domain": "string",
              "n_steps": "int64", "answer_correct": "bool", "rating_mean": "float64", "ratings": "list<float64>",
              "raters": "list<string>"}
    for s in names:
        schema.update({f"{s}.complete": "bool", f"{s}.first_error": "int64"})
        schema.update({f"{s}.{p}": "float64" for p in SCORE_PARTS[2:]})
    return Table(columns, rows, schema=schema, meta={
        "profile": _profile_meta(profile), "sources": names, "scores": origins,
        "applied": ["profile", "model", "domain", "calibration"],
        "counts": {"traces": len(rows), "rated": len(by_trace)}, "expected_rows": len(rows)})


# ---------------------------------------------------------------------------
# prm-training: TRL stepwise supervision
# ---------------------------------------------------------------------------
def _check_prm(request: ExportRequest) -> None:
    _source(request, request.source or ad.FINAL)
    _calibration(request)


def _prm_rows(request: ExportRequest, source: str, table: Table) -> Iterator[dict[str, Any]]:
    study = request.study
    scope_qs = _scope_traces(request)
    data = ad.AgreementData.read(study, _scope(request))
    traces = data.traces()
    steps = data.steps(source)
    complete = complete_traces(traces[["trace_id", "n_steps"]], steps).to_numpy()
    keep = traces.loc[complete & (traces["n_steps"].to_numpy() >= 1)]
    n_by_trace = dict(zip(keep["trace_id"].tolist(), keep["n_steps"].tolist(), strict=True))
    s = steps.loc[steps["trace_id"].isin(n_by_trace)]
    ok: dict[int, np.ndarray] = {}
    for tpk, grp in s.groupby("trace_id", sort=False):
        n = n_by_trace[tpk]
        flags = np.ones(n, dtype=bool)
        idx = grp["step"].to_numpy(dtype=np.int64)
        inside = (idx >= 1) & (idx <= n)
        flags[idx[inside] - 1] = grp["verdict"].astype(object).to_numpy()[inside] != INVALID
        ok[int(tpk)] = flags
    del data, steps, s
    table.meta["expected_rows"] = len(ok)
    # No id lists in the queries (SQLite caps the parameters of one query):
    # the scope's traces and the study's problems, steps of other traces skipped.
    trace_rows = {pk: (tid, model, ppk) for pk, tid, model, ppk in
                  scope_qs.values_list("pk", "trace_id", "model", "problem_id") if pk in ok}
    problems = {pk: (pid, statement, gold) for pk, pid, statement, gold in Problem.objects.filter(
        study=study).values_list("pk", "problem_id", "statement", "gold_answer")}
    texts = (Step.objects.filter(trace__in=scope_qs).order_by("trace_id", "index")
             .values_list("trace_id", "index", "text").iterator(chunk_size=CHUNK_ROWS))
    n_rows = n_steps = 0
    current, buffer = None, []

    def emit(tpk: int, completions: list[str]) -> dict[str, Any]:
        tid, model, ppk = trace_rows[tpk]
        pid, statement, gold = problems[ppk]
        return {"prompt": statement, "completions": completions, "labels": [bool(x) for x in ok[tpk]],
                "meta": {"trace_id": tid, "problem_id": pid, "model": model, "gold_answer": gold, "source": source}}

    for tpk, _index, text in texts:
        if tpk not in ok:
            continue
        if tpk != current:
            if current is not None and len(buffer) == len(ok[current]):
                n_rows += 1
                n_steps += len(buffer)
                yield emit(current, buffer)
            current, buffer = tpk, []
        buffer.append(text)
    if current is not None and len(buffer) == len(ok[current]):
        n_rows += 1
        n_steps += len(buffer)
        yield emit(current, buffer)
    table.meta["counts"] = {"traces": n_rows, "steps": n_steps}


@register("prm-training", restricted=True, check=_check_prm,
          help="TRL stepwise-supervision rows (prompt, completions, labels) from --source (default final), "
               "traces labelled completely; neutral counts as a correct step")
def prm_training(request: ExportRequest) -> Table:
    _check_prm(request)
    source = _source(request, request.source or ad.FINAL)
    table = Table(PRM_FIELDS, [], schema=PRM_SCHEMA, meta={"profile": None, "sources": [source],
                                                           "neutral_as": True})
    table.rows = _prm_rows(request, source, table)
    return table


# ---------------------------------------------------------------------------
# tag-agreement and tag-confusion: step-function tags (agreement.tags)
# ---------------------------------------------------------------------------
def _tag_table(request: ExportRequest, part: str, columns: list[str], schema: dict[str, str]) -> Table:
    """One table of the tag report (``kappa`` or ``confusion``): the rows the annotators page shows."""
    _check_scope(request)
    report = tags.tag_report(request.study, _scope(request))
    return Table(list(columns), report[part], schema=dict(schema), meta={
        "sources": report["sources"], "applied": ["model", "domain", "calibration", "cohort"],
        "expected_rows": len(report[part])})


@register("tag-agreement", restricted=True, check=_check_scope, reads=tags.READS,
          help="Cohen's kappa per step-function category between every pair of tag sources (annotators, judges, "
               "imported analyses), on the steps both tagged: one row per pair and category")
def tag_agreement(request: ExportRequest) -> Table:
    return _tag_table(request, "kappa", tags.KAPPA_COLUMNS, tags.KAPPA_SCHEMA)


@register("tag-confusion", restricted=True, check=_check_scope, reads=tags.READS,
          help="the confusion matrix of every pair of tag sources on the steps each gave exactly one tag: one row "
               "per pair and non-zero cell")
def tag_confusion(request: ExportRequest) -> Table:
    return _tag_table(request, "confusion", tags.CONFUSION_COLUMNS, tags.CONFUSION_SCHEMA)
