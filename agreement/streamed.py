"""The two reports the score job stores (agreement.stored_writer), read chunk by chunk: the *Judge vs
reference* report of the page's default selection with its disagreements, and the Annotators report.

``services.pair_report`` and ``services.annotator_report`` read the whole study at once (every label as a
row of pandas tables, every paired step, every disagreement as a Python list): 664 MiB at 100,000 traces,
growing with the study. Here the study is read in chunks of whole traces (``scoring.score_jobs.
chunk_traces``, in pk order; one chunk's labels at a time), and of each chunk only what the metrics are
functions of is kept (agreement.core.tallies, annotators.MatrixTally, LeaveOneOutTally): confusion counts,
each trace's cells for the bootstrap, one row per trace for the first errors and scores, int8 verdict
codes per annotated step, and the disagreements as packed arrays (``agreement.core.packed_rows.PackedRows``). The reports equal the whole-study ones
(tests/agreement/test_streamed_reports.py), whatever the chunk size.

Sources whose per-trace scores are not stored (they need the study-wide hazard: ``adjudicated``,
``annotator:NAME``, or a set not computed yet) are not streamed: ``reports`` returns None and the writer
reads the whole study as the pages do.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from agreement import data as ad
from agreement import services as svc
from agreement.core.annotators import LeaveOneOutTally, MatrixTally, overlap_counts, overlap_rows
from agreement.core.intervals import trace_intervals, with_intervals
from agreement.core.metrics import assemble_metrics, first_error_pairs, with_completeness
from agreement.core.packed_rows import PackedRows
from agreement.core.pairs import paired_steps, paired_traces
from agreement.core.tallies import StepTally
from annotation.models import Study
from scoring import sources
from scoring.core.labels import final_labels
from scoring.models import ScoreSet
from scoring.score_jobs import chunk_traces

_SCORE_KEEP = ["trace_id", "n_steps", "first_error", "process", "complete"]


def streamable(sel: svc.Selection) -> bool:
    """Both sources of the selection have stored scores under its profile (and it is of the whole study)."""
    if sel.calibration is not None:
        return False
    names = {sel.reference, sel.candidate}
    if not all(n in ad.SCORED_SOURCES or n.startswith(ad.JUDGE_PREFIX) for n in names):
        return False
    stored = set(ScoreSet.objects.filter(study=sel.study, profile=sel.profile, source__in=names)
                 .values_list("source", flat=True))
    return names <= stored


def reports(sel: svc.Selection, *, chunk_size: int | None = None, n_resamples: int = svc.N_RESAMPLES,
            level: float = svc.LEVEL) -> tuple[dict[str, Any], PackedRows, dict[str, Any]] | None:
    """(pair report's ``metrics``, its disagreements, the Annotators report) of the selection (seed and
    profile as it gives them; the Annotators report with seed 0, as the writer always stored it), or None
    when ``streamable`` is not."""
    if not streamable(sel):
        return None
    study: Study = sel.study
    names = ad.annotator_names(study)
    ratings = ad.read_ratings(study)
    splits: pd.DataFrame | None = None
    steps = StepTally(calibration=True)
    has_conf = False
    fe_parts: list[pd.DataFrame] = []
    scored_parts: list[pd.DataFrame] = []
    score_parts: tuple[list[pd.DataFrame], list[pd.DataFrame]] = ([], [])
    origins: tuple[dict[str, Any], dict[str, Any]] | None = None
    disagreements = PackedRows()
    traces_in_scope = 0
    overall, by_domain = MatrixTally(), {}
    overlap: dict[tuple, list[int]] = {}
    loo = LeaveOneOutTally(names)
    judges: dict[str, int] | None = None  # the study's judges (the notes name the primary one)
    for span in sources.trace_spans(study.pk, chunk_size or chunk_traces()):
        chunk = ad.AgreementData.read_chunk(study, span, annotators=names, ratings=ratings)
        if splits is None:
            splits = chunk.processbench_splits()  # the study's (a query of its ProcessBench items only)
            judges = chunk.inputs.judges
        traces = chunk.traces()
        traces_in_scope += len(traces)
        # -- the pair report
        ref_steps = chunk.steps(sel.reference)
        cand_steps = chunk.steps(sel.candidate, confidence=True)
        has_conf = has_conf or "confidence" in cand_steps.columns
        pairs = paired_steps(ref_steps, cand_steps)
        steps.add(pairs)
        disagreements.add(pairs)
        del pairs
        ref_scores, ref_origin = chunk.scores(sel.reference, sel.profile)
        cand_scores, cand_origin = chunk.scores(sel.candidate, sel.profile)
        origins = origins or (ref_origin, cand_origin)
        ref_s = with_completeness(ref_scores, ref_steps, "reference scores")
        cand_s = with_completeness(cand_scores, cand_steps, "candidate scores")
        all_traces = traces[["trace_id", "n_steps"]]
        fe = first_error_pairs(ref_steps, cand_steps, all_traces, all_traces)
        fe_parts.append(fe[["trace_id", "reference_first_error", "candidate_first_error"]])
        scored_parts.append(paired_traces(ref_s, cand_s))
        score_parts[0].append(ref_s[_SCORE_KEEP])
        score_parts[1].append(cand_s[_SCORE_KEEP])
        # -- the Annotators report (its labels are the pair report's annotator block's too)
        labels = chunk.annotator_labels()
        overall.add(labels)
        domains = traces.set_index("trace_id")["domain"]
        lab_domain = labels["trace_id"].map(domains).fillna("").astype(str).to_numpy()
        for d in sorted(set(lab_domain.tolist())):
            by_domain.setdefault(d, MatrixTally()).add(labels.loc[lab_domain == d])
        overlap_counts(labels, traces.set_index("trace_id")["n_steps"], into=overlap)
        src = chunk.inputs.labels["src"].to_numpy()
        raw = chunk.inputs.labels.loc[src > 0, ["trace_id", "step", "src", "verdict", "skeleton_refs"]]
        adjudicated = final_labels(sources.adjudicated_steps(chunk.inputs.labels), None, None) if (src == 0).any() \
            else None
        loo.add(raw, adjudicated, traces)
        del chunk, labels, raw, adjudicated, ref_steps, cand_steps

    if judges is None:  # a study without traces: nothing to stream
        return None
    agree = overall.agreement()
    fe_pairs = _concat(fe_parts)
    metrics = assemble_metrics(
        steps.agreement(), steps.by_position(), fe_pairs, _concat(scored_parts),
        steps.calibration_metrics(has_conf), _concat(score_parts[0]), _concat(score_parts[1]), ratings=ratings,
        annotators=agree, splits=splits, n_resamples=n_resamples, seed=sel.seed, level=level)
    cis = steps.intervals(n_resamples=n_resamples, seed=sel.seed, level=level)
    cis.update(trace_intervals(fe_pairs, n_resamples=n_resamples, seed=sel.seed, level=level))
    metrics = with_intervals(metrics, cis)
    pair = svc.with_provenance(metrics, study, sel.reference, sel.candidate, sel.profile, seed=sel.seed,
                               traces_in_scope=traces_in_scope, calibration=None, origins=origins,
                               judges=judges)
    people: dict[str, Any] = {"traces_in_scope": traces_in_scope, "seed": 0, "n_resamples": svc.N_RESAMPLES}
    people["overall"] = svc.undefined_subset(agree)
    people["by_domain"] = [{"domain": d, **svc.undefined_subset(by_domain[d].agreement())} for d in sorted(by_domain)]
    people["overlap"] = overlap_rows(overlap)
    people["annotators"] = svc.annotator_rows(loo.rows(n_resamples=svc.N_RESAMPLES, seed=0))
    people["reference"] = svc.ANNOTATORS_REFERENCE
    return pair, disagreements, people


def _concat(parts: list[pd.DataFrame]) -> pd.DataFrame:
    return pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0].reset_index(drop=True)

