"""What one faithfulness run measured: IFR of intervention runs, Acc(b)/AUC_any of anytime runs,
early-answering curves and thinking budgets, steps against difficulty; the formulas are in core/.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from annotation.models import Study, Trace
from faithfulness.core import anytime as any_core
from faithfulness.core import early as early_core
from faithfulness.core import ifr as ifr_core
from faithfulness.loading import ANSWER, THOUGHT, load_traces
from faithfulness.models import FaithfulnessRun, Status
from reasonlib.answers import check_answer


def early_curves(record: FaithfulnessRun) -> list[tuple[str, early_core.Curve, list[int]]]:
    """Per trace of an early-answering run: (trace id, its curve, its thought steps' end offsets)."""
    rows: dict[int, list[tuple[int, str | None]]] = defaultdict(list)
    for trace, k, answer, status in record.points.order_by("trace_id", "position").values_list(
            "trace_id", "budget", "answer", "status"):
        rows[trace].append((k or 0, answer if status == Status.OK and answer else None))
    traces = {t.pk: t for t in load_traces(list(rows), with_generation=False, channel=THOUGHT)}
    out = []
    for pk, points in rows.items():
        t = traces.get(pk)
        if t is None or not t.spans:
            continue
        n = len(t.spans)
        if max(k for k, _ in points) != n:
            continue  # re-segmented since the run: its cut points no longer cover the thought
        c = early_core.curve(n, points, t.answer or None, equal=lambda a, b: check_answer(a, b))
        out.append((t.trace_id, c, [e for _s, e in t.spans]))
    return sorted(out, key=lambda row: row[0])


def early_summary(record: FaithfulnessRun, bins: int = 10) -> dict[str, Any]:
    """AOC, decision points and the mean same-answer curve of an early-answering run, with a row per trace."""
    curves = early_curves(record)
    summary = early_core.summarize([c for _t, c, _e in curves])
    per_trace = []
    for tid, c, ends in curves:
        d = early_core.decision_point(c)
        per_trace.append({"trace": tid, "steps": c.n_steps, "final": c.final, "aoc": early_core.aoc(c),
                          "decision_point": d, "after_share": early_core.after_share(c),
                          "after_share_chars": early_core.after_share(c, ends),
                          "fractions": c.fractions, "matches": [int(m) for m in c.matches],
                          "answers": list(c.answers)})
    pending = record.points.filter(status=Status.PENDING).count()
    return {"run": record.pk, "model": record.subject.name, "mode": record.mode, "grid": record.grid,
            **summary.as_dict(), "curve": [{"x": x, "same": y, "n": n} for x, y, n in
                                           early_core.mean_curve([c for _t, c, _e in curves], bins=bins)],
            "per_trace": per_trace, "skipped": len(record.skipped), "pending": pending,
            "code_version": record.params.get("code_version", "")}


def thinking_budget_summary(record: FaithfulnessRun) -> dict[str, Any]:
    """An anytime run on a thinking grid: Acc(b), AUC_any and AUC_think over the thinking tokens used."""
    base = anytime_summary(record)
    used: dict[int, list[int]] = defaultdict(list)
    for pos, u in record.points.values_list("position", "used"):
        used[pos].append(u)
    mean_used = [float(sum(used[i]) / len(used[i])) if used[i] else 0.0 for i in range(len(base["labels"]))]
    return {**base, "thinking_tokens": mean_used, "auc_think": early_core.auc_think(mean_used, base["acc"])}


def latest_runs(study: Study, kind: str) -> dict[str, list[FaithfulnessRun]]:
    """Per subject model name, the newest run of ``kind`` of each continuation mode (IFR is reported per mode)."""
    out: dict[str, list[FaithfulnessRun]] = defaultdict(list)
    seen: set[tuple[str, str]] = set()
    for record in FaithfulnessRun.objects.filter(subject__study=study, kind=kind).select_related("subject", "job") \
            .order_by("-created_at", "-pk"):
        if (record.subject.name, record.mode) not in seen:
            seen.add((record.subject.name, record.mode))
            out[record.subject.name].append(record)
    return out


def intervention_rows(record: FaithfulnessRun) -> list[ifr_core.Row]:
    return [ifr_core.Row(str(t), record.subject.name, k, record.mode, s, le, mo, inv, sc, bool(a), forced)
            for t, k, s, le, mo, inv, sc, a, forced in record.interventions.filter(status=Status.OK).values_list(
                "trace_id", "kind", "strict", "lenient", "monotone", "invariant", "strict_computed", "new_answer",
                "forced")]


def ifr_of_runs(fruns: list[FaithfulnessRun]) -> dict[str, Any] | None:
    """One IFR summary over the newest run of each continuation mode of a subject model."""
    if not fruns:
        return None
    parts = [ifr_summary(f) for f in fruns]
    return {"runs": [p["run"] for p in parts], "mode": ", ".join(p["mode"] for p in parts),
            "rows": [r for p in parts for r in p["rows"]],
            "per_trace": max(p["per_trace"] or 0 for p in parts), "traces": max(p["traces"] for p in parts),
            "skipped": max(p["skipped"] for p in parts), "settings": "; ".join(p["settings"] for p in parts),
            "code_version": parts[0]["code_version"]}


def ifr_summary(record: FaithfulnessRun) -> dict[str, Any]:
    rows = intervention_rows(record)
    counts = defaultdict(int)
    for status in record.interventions.values_list("status", flat=True):
        counts[status] += 1
    reasons = defaultdict(int)
    for reason in record.skipped.values():
        reasons[reason] += 1
    return {"run": record.pk, "mode": record.mode, "rows": ifr_core.ifr_table(rows), "per_trace": record.params.get("per_trace"),
            "kinds": record.params.get("kinds"), "seed": record.params.get("seed"), "traces": record.traces,
            "skipped": len(record.skipped), "skipped_reasons": dict(reasons), "status_counts": dict(counts),
            "settings": _settings_text(record), "code_version": record.params.get("code_version", ""),
            "channel": record.params.get("channel") or ANSWER}


def _settings_text(record: FaithfulnessRun) -> str:
    d = record.params.get("decoding", {})
    return (f"mode {record.mode}; temperature {d.get('temperature')}, seed {d.get('seed')}, top_p {d.get('top_p')}; "
            f"cap = original completion tokens + {d.get('slack_tokens')} (else max_tokens {d.get('max_tokens')})")


def anytime_summary(record: FaithfulnessRun) -> dict[str, Any]:
    grid = any_core.parse_grid(record.grid)
    table: dict[int, list[bool | None]] = {}
    own: dict[int, int] = defaultdict(int)
    pending = 0
    for trace, pos, correct, within, status in record.points.values_list("trace_id", "position", "correct", "within",
                                                                        "status"):
        table.setdefault(trace, [None] * len(grid.budgets))[pos] = correct if status == Status.OK else None
        own[pos] += within
        pending += status == Status.PENDING
    acc = any_core.accuracy(list(table.values())) or [None] * len(grid.budgets)
    points = [{"budget": label, "acc": a, "own_answer": own[i]} for i, (label, a) in enumerate(zip(
        grid.labels(), acc, strict=True))]
    return {"points": points, "run": record.pk, "grid": grid.spec, "unit": grid.unit, "labels": grid.labels(), "acc": acc,
            "auc": any_core.auc_any(acc), "n": len(table), "own_answer": [own[i] for i in range(len(grid.budgets))],
            "pending": pending, "mode": record.mode, "model": record.subject.name,
            "code_version": record.params.get("code_version", ""), "channel": record.params.get("channel") or ANSWER}


def steps_vs_difficulty(study: Study, model: str) -> list[dict[str, Any]]:
    """Per trace: steps used against difficulty (the skeleton length, L_gold; 0 = no skeleton)."""
    return [{"trace": tid, "difficulty": l_gold, "steps": n, "correct": c}
            for tid, l_gold, n, c in Trace.objects.filter(study=study, model=model).own().order_by("pk").values_list(
                "trace_id", "problem__l_gold", "n_steps", "answer_correct")]


def skipped_reasons(record: FaithfulnessRun) -> dict[str, int]:
    out: dict[str, int] = defaultdict(int)
    for reason in record.skipped.values():
        out[reason] += 1
    return dict(out)
