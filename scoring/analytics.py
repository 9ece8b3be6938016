"""What the analytics pages, the API and the exports show, computed from
stored scores (never by rescoring) and cached per score-set version.

Answer accuracy and trace counts come from the traces themselves (one
grouped query, always fresh): they do not depend on labels, so a model
with traces but no labels still has a leaderboard row, with null process
metrics. Everything else aggregates the stored scores of traces whose
labels from the chosen source are complete.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from django.core.cache import cache

from annotation import access, gate, study_summary
from annotation.gate import Source
from annotation.models import Membership, Study, Trace
from reasonlib.refusals import FieldInvalid
from scoring import hooks, services, sources, storage
from scoring.core import aggregate
from scoring.core.aggregate import (
    LEADERBOARD_COLUMNS,
    answer_process_quadrants,
    box_statistics,
    first_error_histogram,
    to_records,
)
from scoring.core.hazard import HAZARD_COLUMNS, hazard_from_scores
from scoring.core.labels import determined_first_errors
from scoring.core.thought import (
    RECOVERY_COLUMNS,
    RECOVERY_SUMMARY_COLUMNS,
    RELATIVE_HAZARD_COLUMNS,
    recovery_summary,
    relative_hazard_profile,
)
from scoring.models import ScoreSet, ScoringProfile, TraceScore

CACHE_SECONDS = 24 * 3600
SCATTER_MAX_POINTS = 2000
GROUPS = ("model", "domain")
#: The API's leaderboard row, in order (docs/analytics.md, docs/api.md).
LEADERBOARD_FIELDS = ["model"] + LEADERBOARD_COLUMNS
SCORE_EXPORT_FIELDS = [
    "trace_id", "problem_id", "model", "source", "profile", "n_steps", "n_thought_steps", "l_gold", "coverage",
    "first_error", "answer_correct", "s_base", "p_fmt", "p_haz", "s_hcrs", "s_prm", "s_prm_haz", "process", "holistic",
    "lucky_guess", "empty",
]
HAZARD_FIELDS = list(HAZARD_COLUMNS)
#: The hazard export: the page's tables, one per model, stacked with a model column.
HAZARD_EXPORT_FIELDS = ["model", *HAZARD_FIELDS]
#: Bins of the hazard by relative position (tenths of the trace).
RELATIVE_BINS = 10
RELATIVE_HAZARD_FIELDS = ["model"] + RELATIVE_HAZARD_COLUMNS
RECOVERY_FIELDS = ["model"] + RECOVERY_SUMMARY_COLUMNS


class BadFilter(FieldInvalid):
    """A filter value that names nothing in the study; str() starts with the field."""


# ---------------------------------------------------------------------------
# The selection every page, endpoint and export works on
# ---------------------------------------------------------------------------
@dataclass
class Selection:
    study: Study
    source: str
    profile: ScoringProfile
    profiles: dict[str, ScoringProfile]
    judges: list[str]
    model: str = ""
    domain: str = ""
    group: str = "model"
    membership: Membership | None = None
    _score_sets: dict[tuple[str, int], ScoreSet | None] = field(default_factory=dict)

    @property
    def sources(self) -> list[str]:
        return sources.available_sources(self.study, self.judges)

    @property
    def score_set(self) -> ScoreSet | None:
        return self.score_set_for(self.source, self.profile)

    def score_set_for(self, source: str, profile: ScoringProfile) -> ScoreSet | None:
        key = (source, profile.pk)
        if key not in self._score_sets:
            self._score_sets[key] = ScoreSet.objects.filter(study=self.study, source=source, profile=profile).first()
        return self._score_sets[key]

    def prefetch_score_sets(self, profiles: list[ScoringProfile]) -> None:
        """Load the score sets of several profiles for the current source in one query."""
        found = {
            (s.source, s.profile_id): s
            for s in ScoreSet.objects.filter(study=self.study, source=self.source, profile__in=profiles)
        }
        for p in profiles:
            self._score_sets[(self.source, p.pk)] = found.get((self.source, p.pk))

    def params(self, **changes: str) -> dict[str, str]:
        """The GET parameters of this selection (for links), with changes."""
        base = {"source": self.source, "profile": self.profile.name, "model": self.model, "domain": self.domain}
        if self.group != "model":
            base["group"] = self.group
        base.update(changes)
        return {k: v for k, v in base.items() if v}

    @property
    def restricted_user(self):
        """The annotator of a blind study, who sees trace-level scores only on
        traces they have labelled completely; None when all are visible."""
        m = self.membership
        if m is None or access.sees_everything(m):
            return None
        return m.user


#: What every analytics page, endpoint and export reads (annotation.gate): stored scores, computed from the
#: labels of every source (``final``: adjudications, the annotators, the primary judge).
ANALYTICS_READS = frozenset({Source.SCORES})


def select(study: Study, params, membership: Membership | None = None) -> Selection:
    """Parse source, profile, model, domain and group from GET parameters, after the visibility gate:
    a member who may not read scores (a blinded annotator) is refused with its one message."""
    gate.check(membership, "score analytics", ANALYTICS_READS)
    profiles = services.ensure_profiles(study)
    judges = sources.judge_names(study)
    try:
        source = services.resolve_source(study, params.get("source"), judges)
    except sources.UnknownSource as exc:
        raise BadFilter("source", exc.message) from None
    try:
        profile = services.resolve_profile(study, params.get("profile"), profiles)
    except services.UnknownProfile as exc:
        raise BadFilter("profile", exc.message) from None
    group = params.get("group") or "model"
    if group not in GROUPS:
        raise BadFilter("group", f"choose one of {', '.join(GROUPS)}")
    return Selection(
        study=study, source=source, profile=profile, profiles=profiles, judges=judges,
        model=(params.get("model") or "").strip(), domain=(params.get("domain") or "").strip(), group=group,
        membership=membership,
    )


# ---------------------------------------------------------------------------
# Trace counts (fresh) and the filter choices
# ---------------------------------------------------------------------------
def trace_counts(study: Study) -> pd.DataFrame:
    """model, domain, traces, correct, with_steps: stored with the study's review progress by the
    score job when current (annotation.study_summary), else one grouped query."""
    rows = study_summary.stored_by_model_and_domain(study)
    if rows is None:
        rows = study_summary.by_model_and_domain(study)
    df = pd.DataFrame.from_records(rows, columns=["model", "domain", "traces", "correct", "with_steps"])
    return df.astype({"traces": "int64", "correct": "int64", "with_steps": "int64"})


def choices(counts: pd.DataFrame) -> dict[str, list[str]]:
    return {"models": sorted(counts["model"].unique().tolist()),
            "domains": sorted(d for d in counts["domain"].unique().tolist() if d)}


def _filter_counts(counts: pd.DataFrame, sel: Selection) -> pd.DataFrame:
    if sel.model:
        counts = counts.loc[counts["model"] == sel.model]
    if sel.domain:
        counts = counts.loc[counts["domain"] == sel.domain]
    return counts


# ---------------------------------------------------------------------------
# Cached summaries of one score set
# ---------------------------------------------------------------------------
def _key(kind: str, score_set: ScoreSet, *parts: str) -> str:
    digest = hashlib.sha1("\x1f".join(parts).encode()).hexdigest()[:16]
    return f"scoring:{kind}:{score_set.pk}:{score_set.token}:{digest}"


def _cached(key: str, compute):
    value = cache.get(key)
    if value is None:
        value = compute()
        cache.set(key, value, CACHE_SECONDS)
    return value


#: The stored columns each cached summary reads (storage.read_compact): only what its tables use.
LEADERBOARD_READS = ["n_steps", "answer_correct", "s_hcrs", "process", "s_prm", "holistic", "lucky_guess",
                     "validity_rate", "all_valid", "l_gold"]
SUMMARY_READS = ["n_steps", "first_error", "answer_correct", "s_hcrs", "process", "holistic", "n_thought_steps",
                 "thought_errors", "recovered_errors", "lucky_unrecovered"]


def scored_leaderboard(score_set: ScoreSet, group: str, model: str = "", domain: str = "") -> dict[str, dict]:
    """Score-derived leaderboard columns per group (bootstrap included) plus
    ``scored`` (traces with stored scores) and ``verified`` (those with steps)."""

    def compute() -> dict[str, dict]:
        frame = storage.read_compact(score_set, LEADERBOARD_READS, labels=(group,), model=model, domain=domain)
        out = {}
        for key, g in by_group(frame, group):
            # One group's row of aggregate.leaderboard(frame, group_col=group): each row is its group's alone.
            (rec,) = to_records(aggregate.leaderboard(g, group_col=None))
            rec["scored"] = int(len(g))
            rec["verified"] = int((g["n_steps"].to_numpy() >= 1).sum())
            # Traces scored without a skeleton (L = 0): only there can the process
            # score differ from HCRS (docs/scoring.md: P = S_HCRS when L > 0).
            rec["without_skeleton"] = int((g["l_gold"].fillna(0).to_numpy() <= 0).sum())
            out[key] = rec
        return out

    return _cached(_key("leaderboard-v2", score_set, group, model, domain), compute)  # v2: without_skeleton


def summary(score_set: ScoreSet, model: str = "", domain: str = "", tau: float = 3.0) -> dict[str, Any]:
    """Hazard per model and overall, first-error histogram, distributions,
    scatter sample and answer x process quadrants -- one read, cached."""

    def compute() -> dict[str, Any]:
        frame = storage.read_compact(score_set, SUMMARY_READS, model=model, domain=domain)
        out: dict[str, Any] = {"n": int(len(frame))}
        out["hazard_all"] = to_records(hazard_from_scores(frame)) if len(frame) else []
        hazard, histogram, dist, quadrants, relative, recovery = {}, [], {}, {}, {}, []
        recoveries = _recoveries(score_set)
        # One pass over the models, each model's rows copied while its tables are computed: every table per
        # model is its rows' alone, so the tables of all models are these rows in model order.
        for m, g in by_group(frame, "model"):
            hazard[str(m)] = to_records(hazard_from_scores(g))
            histogram += to_records(first_error_histogram(g, "model"))
            dist[str(m)] = {metric: box_statistics(g[metric].to_numpy(dtype=float, na_value=np.nan))
                            for metric in ("process", "holistic", "s_hcrs")}
            quadrants[str(m)] = answer_process_quadrants(g["answer_correct"].to_numpy(dtype=bool),
                                                         g["process"].to_numpy(dtype=float), tau)
            relative[str(m)] = _relative_hazard(g)
            recovery += _recovery(recoveries, g)
        out["hazard"] = hazard
        out["histogram"] = histogram
        out["distributions"] = dist
        out["quadrants"] = quadrants
        out["relative_hazard"] = relative
        out["relative_hazard_all"] = _relative_hazard(frame) if len(frame) else []
        out["recovery"] = recovery
        pick = np.arange(len(frame))
        if len(frame) > SCATTER_MAX_POINTS:
            pick = np.sort(np.random.default_rng(0).choice(len(frame), SCATTER_MAX_POINTS, replace=False))
        sample = frame.iloc[pick]
        out["scatter"] = {
            "shown": int(len(sample)),
            "points": {
                str(m): {"process": g["process"].round(4).tolist(),
                         "answer_correct": g["answer_correct"].astype(int).tolist()}
                for m, g in sample.groupby("model", sort=True)
            },
        }
        return out

    return _cached(_key("summary", score_set, model, domain, repr(tau)), compute)


def _relative_hazard(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """Hazard of the first error by relative position t*/N of the scored, non-empty traces."""
    keep = frame["n_steps"].to_numpy() >= 1
    fe = frame["first_error"].to_numpy(dtype=float, na_value=np.nan)[keep]
    return to_records(relative_hazard_profile(frame["n_steps"].to_numpy()[keep], fe, bins=RELATIVE_BINS))


def _recoveries(score_set: ScoreSet) -> pd.DataFrame:
    """The score set's recovered errors (trace pk, error step, recovery step)."""
    return pd.DataFrame(score_set.recoveries or [], columns=["trace_id", "error_step", "recovery_step"])


def _recovery(recoveries: pd.DataFrame, frame: pd.DataFrame) -> list[dict[str, Any]]:
    """Recovery figures per model (scoring.core.thought.recovery_summary) from the stored
    per-trace columns and the score set's recovered errors (``_recoveries``)."""
    if not len(frame):
        return []
    errors = frame["thought_errors"].to_numpy(dtype=np.int64)
    recovered = frame["recovered_errors"].to_numpy(dtype=np.int64)
    by_trace = pd.DataFrame({
        "trace_id": frame["trace"].to_numpy(), "n_thought_steps": frame["n_thought_steps"].to_numpy(),
        "thought_errors": errors, "recovered": recovered, "unrecovered": errors - recovered,
        "answer_correct": frame["answer_correct"].to_numpy(dtype=bool),
        "lucky_unrecovered": frame["lucky_unrecovered"].to_numpy(dtype=bool),
    })
    done = recoveries.loc[recoveries["trace_id"].isin(by_trace["trace_id"])]
    rec = pd.DataFrame({"trace_id": done["trace_id"], "error_step": done["error_step"], "recovered": True,
                        "recovery_step": done["recovery_step"],
                        "distance": done["recovery_step"] - done["error_step"]})[RECOVERY_COLUMNS]
    table = recovery_summary(by_trace, rec, frame["model"].astype(str))
    return [{"model": str(m), **row} for m, row in zip(table.index, to_records(table), strict=True)]


def by_group(frame: pd.DataFrame, column: str) -> Iterator[tuple[Any, pd.DataFrame]]:
    """``frame.groupby(column, sort=True)``'s groups (nulls left out), in its order, each group's rows in the
    frame's order -- copied one group at a time: pandas' groupby copies the whole frame, sorted, before the
    first group (at a million traces, a copy of every score read)."""
    codes, keys = pd.factorize(frame[column], sort=True)
    order = np.argsort(codes, kind="stable")
    # Rows of group k: order[ends[k]:ends[k + 1]] (code -1, a null, sorts first and is skipped).
    ends = np.concatenate([[0], np.cumsum(np.bincount(codes + 1, minlength=len(keys) + 1))])[1:]
    for k, key in enumerate(keys):
        yield key, frame.take(order[ends[k]:ends[k + 1]])


def warm(study: Study, profile: ScoringProfile) -> None:
    """Fill the caches the study's first page view needs (default filters): the leaderboard and the
    summary of the default profile, and the Ablations page's leaderboard under each ablation profile
    (each reads and bootstraps every trace's scores: 23 s for the first visit at 100,000 traces under
    load when it was not warmed)."""
    for score_set in ScoreSet.objects.filter(study=study, profile=profile, source=sources.FINAL):
        scored_leaderboard(score_set, "model")
        summary(score_set, tau=profile.as_profile().tau)
    ablations = ScoreSet.objects.filter(study=study, source=sources.FINAL, profile__name__in=services.ABLATION_NAMES,
                                        profile__is_current=True).exclude(profile=profile)
    # Their leaderboards read neither the stored hazard nor the recoveries (a list per recovered error).
    ablations = ablations.defer("hazard", "recoveries")
    for score_set in ablations:
        scored_leaderboard(score_set, "model")


# ---------------------------------------------------------------------------
# Page and API data
# ---------------------------------------------------------------------------
def leaderboard(sel: Selection, counts: pd.DataFrame | None = None, score_set: ScoreSet | None = None,
                group: str | None = None) -> list[dict[str, Any]]:
    """One row per model (or domain): the API's fields plus ``scored`` and
    ``verified`` (pages only; the API drops them)."""
    group = group or sel.group
    counts = _filter_counts(trace_counts(sel.study) if counts is None else counts, sel)
    per_group = counts.groupby(group, sort=True)[["traces", "correct", "with_steps"]].sum()
    score_set = sel.score_set if score_set is None else score_set
    scored = scored_leaderboard(score_set, group, sel.model, sel.domain) if score_set else {}
    rows = []
    for key, c in per_group.iterrows():
        s = scored.get(key, {})
        row: dict[str, Any] = {group: key, "traces": int(c["traces"]),
                               "answer_accuracy": float(c["correct"] / c["traces"]) if c["traces"] else None}
        for col in LEADERBOARD_COLUMNS[2:]:
            row[col] = s.get(col)
        row["scored"] = s.get("scored", 0)
        row["verified"] = s.get("verified", 0)
        row["without_skeleton"] = s.get("without_skeleton", 0)
        row["with_steps"] = int(c["with_steps"])
        rows.append(row)
    return rows


def hcrs_is_process(rows: list[dict[str, Any]]) -> bool:
    """Are the HCRS and Process columns equal by definition? They are when
    every scored trace has a skeleton (P = S_HCRS when L > 0): then a page
    shows one column, "Process (= HCRS)"; otherwise both (issue 23)."""
    return all(r.get("without_skeleton", 0) == 0 for r in rows)


def api_leaderboard_rows(rows: list[dict[str, Any]], group: str = "model") -> list[dict[str, Any]]:
    fields = [group] + LEADERBOARD_COLUMNS
    return [{f: r[f] for f in fields} for r in rows]


#: The leaderboard export's columns after the group (docs/exports.md): one value per cell (an interval is two
#: columns) and no metric twice. The endpoint's ``s_hcrs_*`` repeat ``process_*`` (P = S_HCRS on every trace
#: with a skeleton), so the export keeps Process with ``without_skeleton``, the scored traces where the two
#: part; S_HCRS of each trace stays in the ``scores`` export.
LEADERBOARD_EXPORT_COLUMNS = [
    "traces", "scored", "without_skeleton", "answer_accuracy", "process_mean", "process_ci_low", "process_ci_high",
    "s_prm_mean", "holistic_mean", "holistic_ci_low", "holistic_ci_high", "lucky_guess_rate", "svr", "vsr",
]


def export_leaderboard_rows(rows: list[dict[str, Any]], group: str = "model") -> list[dict[str, Any]]:
    """The leaderboard's rows (``leaderboard``) as the export writes them: LEADERBOARD_EXPORT_COLUMNS."""
    out = []
    for r in rows:
        row = {group: r[group]}
        for col in LEADERBOARD_EXPORT_COLUMNS:
            stem, _, end = col.rpartition("_ci_")
            if stem:
                ci = r[f"{stem}_ci"]
                row[col] = None if ci is None else ci[0 if end == "low" else 1]
            else:
                row[col] = r[col]
        out.append(row)
    return out


def hazard_rows(sel: Selection) -> list[dict[str, Any]]:
    score_set = sel.score_set
    if score_set is None:
        return []
    data = summary(score_set, domain=sel.domain, tau=sel.profile.as_profile().tau)
    if sel.model:
        return data["hazard"].get(sel.model, [])
    return data["hazard_all"]


def hazard_table_rows(sel: Selection) -> list[dict[str, Any]]:
    """The hazard page's tables as tidy rows: one table per model (only the selected one with a model
    filter), each row with its model, in the page's order. The pooled table of every model together is the
    REST endpoint's (hazard_rows), not the page's."""
    score_set = sel.score_set
    if score_set is None:
        return []
    data = summary(score_set, sel.model or "", sel.domain, sel.profile.as_profile().tau)
    return [{"model": m, **{k: r[k] for k in HAZARD_FIELDS}} for m, table in data["hazard"].items() for r in table]


def relative_hazard_rows(sel: Selection) -> list[dict[str, Any]]:
    """Tidy rows (model, bin, lo, hi, at_risk, events, hazard, cum_hazard, survival) of the
    selection; model "all" is every model together."""
    score_set = sel.score_set
    if score_set is None:
        return []
    data = summary(score_set, domain=sel.domain, tau=sel.profile.as_profile().tau)
    if sel.model:
        return [{"model": sel.model, **r} for r in data["relative_hazard"].get(sel.model, [])]
    rows = [{"model": m, **r} for m, table in data["relative_hazard"].items() for r in table]
    return rows + [{"model": "all", **r} for r in data["relative_hazard_all"]]


def recovery_rows(sel: Selection) -> list[dict[str, Any]]:
    """One row per model: the recovery figures of docs/scoring.md section 9."""
    score_set = sel.score_set
    if score_set is None:
        return []
    rows = summary(score_set, domain=sel.domain, tau=sel.profile.as_profile().tau)["recovery"]
    return [r for r in rows if not sel.model or r["model"] == sel.model]


TIER_TEXT = {
    0: "Level 0 — outcome only: the traces carry no reasoning steps, so only answer accuracy can be reported.",
    1: "Level 1 — trace present: reasoning steps exist but none is verified by this label source; "
       "claims about the quality of the reasoning are not supported yet.",
    2: "Level 2 — trace verified: every step of the verified traces has a label, so step validity (SVR) "
       "and verified solutions (VSR) are measured.",
}


def evidence_tiers(rows: list[dict[str, Any]], study: Study | None = None) -> list[dict[str, Any]]:
    """Per model: the strongest evidence level the data supports, and why."""
    # The evidence report (a higher app: faithfulness) registers the one source of the tier cards
    # (scoring.hooks); without it the cards come from the step labels below.
    source = hooks.tier_source()
    if source is not None and study is not None:
        return source(study)
    cards = []
    for r in rows:
        verified, with_steps = r["verified"], r["with_steps"]
        level = 2 if verified else (1 if with_steps else 0)
        share = verified / with_steps if with_steps else None
        if level == 2 and verified < with_steps:
            scope = (f"Verified on {verified} of {with_steps} traces with steps ({share:.0%}); "
                     "process claims hold for that subset only.")
        elif level == 2:
            scope = f"All {verified} traces with steps are verified."
        elif level == 1:
            scope = f"{with_steps} of {r['traces']} traces have steps; label them (or run a judge) to reach Level 2."
        else:
            scope = f"{r['traces']} trace{'' if r['traces'] == 1 else 's'}, none with steps."
        cards.append({"model": r.get("model", ""), "level": level, "text": TIER_TEXT[level], "scope": scope,
                      "traces": r["traces"], "with_steps": with_steps, "verified": verified, "share": share,
                      "answer_accuracy": r["answer_accuracy"], "svr": r["svr"], "vsr": r["vsr"]})
    return cards


def ablation_profiles(sel: Selection) -> list[ScoringProfile]:
    """The study's default profile, then each ablation."""
    default = services.default_profile(sel.study, sel.profiles)
    names = [default.name] + [n for n in services.ABLATION_NAMES if n != default.name]
    return [sel.profiles[n] for n in names if n in sel.profiles]


def score_export_rows(sel: Selection, frame: pd.DataFrame) -> pd.DataFrame:
    """Stored scores (read with every value column) as score-export rows."""
    out = frame.copy()
    out["source"] = sel.source
    out["profile"] = sel.profile.name
    return out[SCORE_EXPORT_FIELDS]


def read_export_frame(sel: Selection, *, lucky_only: bool = False) -> pd.DataFrame:
    score_set = sel.score_set
    if score_set is None:
        return pd.DataFrame(columns=SCORE_EXPORT_FIELDS)
    frame = storage.read_scores(score_set, model=sel.model, domain=sel.domain, columns=storage.VALUE_COLUMNS,
                                only_reviewed_by=sel.restricted_user, lucky_only=lucky_only)
    if not lucky_only:
        frame = with_determined_first_errors(sel, score_set, frame)
    return score_export_rows(sel, frame)


def with_determined_first_errors(sel: Selection, score_set: ScoreSet, frame: pd.DataFrame) -> pd.DataFrame:
    """The stored scores plus a row for each trace of the selection that has none but whose labels from the
    source determine its first error (scoring.core.labels.determined_first_errors): a trace labelled only up
    to its earliest error, as ProcessBench's reference is. Its scores need every step and stay empty; its first
    error is the one the agreement metrics count. Reads the study's labels only when such traces may exist."""
    unscored = (Trace.objects.filter(study=sel.study, n_steps__gt=0).own()
                .exclude(pk__in=TraceScore.objects.filter(score_set=score_set).values("trace")))
    if sel.model:
        unscored = unscored.filter(model=sel.model)
    if sel.domain:
        unscored = unscored.filter(problem__domain=sel.domain)
    if sel.restricted_user is not None:
        unscored = unscored.filter(reviews__annotator=sel.restricted_user, reviews__complete=True)
    rows = list(unscored.order_by("pk").values_list("pk", "trace_id", "problem__problem_id", "model",
                                                       "problem__domain", "n_steps", "problem__l_gold",
                                                       "answer_correct", "n_thought_steps"))
    if not rows:
        return frame
    traces = pd.DataFrame({"trace_id": [r[0] for r in rows], "n_steps": [r[5] for r in rows]})
    steps = sources.source_steps(sources.read_inputs(sel.study), sel.source)
    steps = steps.loc[steps["trace_id"].isin(traces["trace_id"])]
    det = determined_first_errors(traces, steps)
    found = dict(zip(det["trace_id"].tolist(), det["first_error"].tolist(), strict=True))
    keep = det["determined"].to_numpy() & det["first_error"].notna().to_numpy()
    extra = [{**dict.fromkeys(frame.columns), "trace": pk, "trace_id": tid, "problem_id": pid, "model": model,
              "domain": domain, "n_steps": n, "l_gold": l_gold, "first_error": int(found[pk]),
              "answer_correct": bool(correct), "empty": False, "n_thought_steps": n_thought}
             for (pk, tid, pid, model, domain, n, l_gold, correct, n_thought), k in zip(rows, keep, strict=True) if k]
    if not extra:
        return frame
    merged = pd.concat([frame.astype(object), pd.DataFrame(extra, columns=frame.columns)], ignore_index=True)
    return merged.sort_values("trace", kind="mergesort").reset_index(drop=True)
