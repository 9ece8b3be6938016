"""The agreement metrics object of a candidate against a reference: every
subject module at once, on one pairing of steps and traces
(docs/agreement.md, "Every metric")."""

from __future__ import annotations

from typing import Any

import pandas as pd

from agreement.core.annotators import annotator_agreement
from agreement.core.calibration import RELIABILITY_BINS, calibration_of_pairs
from agreement.core.correlation import mean_ratings, rating_correlation, score_correlation_of_pairs
from agreement.core.first_error import first_error_of_pairs
from agreement.core.pairs import (
    first_error_determined,
    merge_undefined,
    native,
    paired_steps,
    paired_traces,
    require,
)
from agreement.core.processbench import split_metrics
from agreement.core.steps import by_position_of_pairs, step_agreement_of_pairs
from scoring.core.bootstrap import check_level
from scoring.core.labels import complete_traces


def with_completeness(scores: pd.DataFrame, labels: pd.DataFrame, what: str) -> pd.DataFrame:
    if "complete" in scores.columns:
        return scores
    require(scores, ["trace_id", "n_steps"], what)
    comp = complete_traces(scores[["trace_id", "n_steps"]], labels)
    return scores.assign(complete=comp.to_numpy())


def first_error_pairs(reference_labels: pd.DataFrame, candidate_labels: pd.DataFrame,
                      reference_scores: pd.DataFrame, candidate_scores: pd.DataFrame) -> pd.DataFrame:
    """:func:`paired_traces` of the traces with ``N >= 1`` whose first error
    both sources determine (:func:`first_error_determined`)."""
    return paired_traces(first_error_determined(reference_scores, reference_labels, "reference labels"),
                         first_error_determined(candidate_scores, candidate_labels, "candidate labels"))


def agreement_metrics(
    reference_labels: pd.DataFrame,
    candidate_labels: pd.DataFrame,
    reference_scores: pd.DataFrame,
    candidate_scores: pd.DataFrame,
    *,
    ratings: pd.DataFrame | None = None,
    annotator_labels: pd.DataFrame | None = None,
    traces: pd.DataFrame | None = None,
    splits: pd.DataFrame | None = None,
    n_resamples: int = 1000,
    seed: int | None = 0,
    level: float = 0.95,
) -> dict[str, Any]:
    """The agreement metrics object of the candidate against the reference.

    Labels: one source each (trace_id, step, verdict; the candidate's
    optional ``confidence`` column enables calibration).  Scores: per-trace
    ``score_traces`` output of each source (trace_id, n_steps, first_error,
    process, complete); without a ``complete`` column completeness is
    derived from the labels.

    Keys (JSON-ready; accuracies are fractions 0..1, intervals [low, high]):

    * step level: steps_compared, percent_agreement, kappa, kappa_binary,
      confusion, by_position (records of :func:`agreement_by_position`);
    * first error: traces_compared, first_error_exact,
      first_error_within_1, pb_error_traces, pb_error_acc,
      pb_correct_traces, pb_correct_acc, pb_f1;
    * scores: pearson_r, pearson_ci, spearman_rho, spearman_ci;
    * calibration: steps_calibrated, ece, brier, reliability;
    * with ``ratings``: ``ratings`` = {traces_rated, reference: {...},
      candidate: {...}} (keys of :func:`correlation`);
    * with ``annotator_labels``: ``annotators`` = :func:`annotator_agreement`;
    * ``traces`` (trace_id, n_steps of every trace in scope): first-error
      metrics read each source's first error from its labels on all of them
      (:func:`first_error_pairs`); without it, from the score tables;
    * ``splits`` (trace_id, split of the traces that are ProcessBench items):
      ``pb_splits`` (first-error metrics per split) and, with two splits or
      more, ``pb_average_f1``, the paper's unweighted mean of the split F1s
      (:func:`agreement.core.processbench.split_metrics`);
    * bootstrap: {n_resamples, seed, level};
    * undefined: metric -> reason for every metric that is None (nested
      metrics as ``ratings.reference.pearson_r``, ``annotators.fleiss_kappa``).
    """
    check_level(level, n_resamples)
    steps = paired_steps(reference_labels, candidate_labels)
    ref_s = with_completeness(reference_scores, reference_labels, "reference scores")
    cand_s = with_completeness(candidate_scores, candidate_labels, "candidate scores")
    # First-error metrics on every trace whose first error both sources
    # determine (not only the completely labelled ones): ProcessBench's rule.
    fe_pairs = first_error_pairs(reference_labels, candidate_labels,
                                 ref_s if traces is None else traces, cand_s if traces is None else traces)
    has_conf = "confidence" in candidate_labels.columns
    return assemble_metrics(
        step_agreement_of_pairs(steps), by_position_of_pairs(steps), fe_pairs, paired_traces(ref_s, cand_s),
        calibration_of_pairs(steps, RELIABILITY_BINS, has_conf), ref_s, cand_s, ratings=ratings,
        annotators=None if annotator_labels is None else annotator_agreement(annotator_labels), splits=splits,
        n_resamples=n_resamples, seed=seed, level=level)


def assemble_metrics(step: dict[str, Any], by_position: pd.DataFrame, fe_pairs: pd.DataFrame, scored: pd.DataFrame,
                     calibration: dict[str, Any], reference_scores: pd.DataFrame, candidate_scores: pd.DataFrame, *,
                     ratings: pd.DataFrame | None, annotators: dict[str, Any] | None, splits: pd.DataFrame | None,
                     n_resamples: int, seed: int | None, level: float) -> dict[str, Any]:
    """The metrics object of :func:`agreement_metrics` from its parts: the step agreement and by-position
    table of the paired steps, the first-error pairs, the paired traces' scores, the calibration, each
    source's per-trace scores (with ``complete``), the annotators' agreement -- computed at once or summed
    over chunks of traces (agreement.core.tallies)."""
    undefined: dict[str, str] = {}
    out: dict[str, Any] = {}
    out.update(merge_undefined(undefined, dict(step)))
    out["by_position"] = [{k: native(v) for k, v in row.items()} for row in by_position.to_dict("records")]
    out.update(merge_undefined(undefined, first_error_of_pairs(fe_pairs)))
    if splits is not None:
        per_split = merge_undefined(undefined, split_metrics(fe_pairs, splits))
        if "pb_splits" in per_split:
            per_split["pb_splits"] = {name: merge_undefined(undefined, m, f"pb_splits.{name}.")
                                      for name, m in per_split["pb_splits"].items()}
        out.update(per_split)
    corr = merge_undefined(undefined, score_correlation_of_pairs(scored, int(n_resamples), seed, level))
    corr.pop("n")
    out.update(corr)
    out.update(merge_undefined(undefined, dict(calibration)))

    if ratings is not None:
        block: dict[str, Any] = {"traces_rated": int(len(mean_ratings(ratings)))}
        for name, s in (("reference", reference_scores), ("candidate", candidate_scores)):
            block[name] = merge_undefined(
                undefined,
                rating_correlation(ratings, s, n_resamples=n_resamples, seed=seed, level=level),
                f"ratings.{name}.",
            )
        out["ratings"] = block
    if annotators is not None:
        out["annotators"] = merge_undefined(undefined, dict(annotators), "annotators.")
    out["bootstrap"] = {"n_resamples": int(n_resamples), "seed": seed, "level": level}
    out["undefined"] = undefined
    return native(out)
