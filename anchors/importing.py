"""The ``thought-anchors`` import format (docs/import-format.md): the problem folders of a Thought Anchors
analysis (Bogdan, Macar, Nanda, Conmy 2025; the thought-anchors.com data, MIT licence) -- each with
``base_solution.json`` (the prompt and the model's solution: thought, ``</think>``, answer), ``problem.json``
(the MATH problem and its gold answer) and, when the analysis was published with it, ``chunks_labeled.json``
(the thought cut into sentences, each with its measured importance, function tags and dependencies).

A folder becomes a problem and a trace (thought + answer). The thought's steps are the analysis's chunks
where it has them (so its per-sentence values attach one to one), else the thought is segmented as any
import's. The chunks are then aligned to the trace's thought steps by their text (anchors.core.alignment;
an existing trace keeps its steps), and each aligned step gets the published values (StepImportance, source
"imported", origin "thought-anchors") and function tags (StepTag, kind imported). The report says how many
chunks aligned."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.db import transaction

from anchors.core.alignment import align_chunks
from anchors.core.measures import MEASURES
from anchors.models import StepImportance
from annotation import services as annotation_services
from annotation import signals
from annotation.importing.pipeline import ImportReport, write_records
from annotation.importing.records import ProblemIn, TraceIn
from annotation.models import Step, StepTag, Study, Trace
from reasonlib.step_functions import normalize_function

FORMAT = "thought-anchors"
ORIGIN = "thought-anchors"
MAX_FOLDERS = 5_000
MAX_FILE_BYTES = 50 * 1024 * 1024
CLOSE_TAG = "</think>"


@dataclass
class AnchorsReport(ImportReport):
    """An import's report with the alignment of the published chunks."""

    chunks: int = 0
    chunks_aligned: int = 0
    steps_with_values: int = 0
    tags_created: int = 0
    notes: list[str] = field(default_factory=list)


@dataclass
class Folder:
    path: Path
    problem_id: str
    trace_id: str
    model: str
    statement: str
    gold: str
    prompt: str
    solution: str
    answer: str
    correct: bool | None
    chunks: list[dict[str, Any]]


def _read_json(path: Path) -> Any:
    if path.stat().st_size > MAX_FILE_BYTES:
        raise ValueError(f"{path.name}: larger than {MAX_FILE_BYTES // (1024 * 1024)} MB")
    return json.loads(path.read_text(encoding="utf-8"))


def _model_of(folder: Path, given: str | None) -> str:
    """The given model, else the folder above ``<correct|incorrect>_base_solution`` (the data's layout:
    ``<model>/correct_base_solution/problem_<id>/``), else "thought-anchors"."""
    if given:
        return given
    parts = folder.resolve().parts
    at = max((i for i, p in enumerate(parts) if p.endswith("_base_solution")), default=0)
    return parts[at - 1] if at > 0 else ORIGIN


def read_folder(folder: Path, model: str | None) -> Folder:
    base = _read_json(folder / "base_solution.json")
    problem = _read_json(folder / "problem.json")
    if not isinstance(base, dict) or not isinstance(problem, dict):
        raise ValueError("base_solution.json and problem.json must each hold one JSON object")
    solution = base.get("solution")
    if not isinstance(solution, str) or not solution.strip():
        raise ValueError("base_solution.json: no 'solution' text")
    statement = problem.get("problem")
    if not isinstance(statement, str) or not statement.strip():
        raise ValueError("problem.json: no 'problem' text")
    chunks: list[dict[str, Any]] = []
    if (folder / "chunks_labeled.json").exists():
        data = _read_json(folder / "chunks_labeled.json")
        if not isinstance(data, list) or not all(isinstance(c, dict) and isinstance(c.get("chunk"), str) for c in data):
            raise ValueError("chunks_labeled.json: a list of objects, each with its 'chunk' text")
        chunks = data
    name = folder.name.removeprefix("problem_")
    group = folder.parent.name.removesuffix("_base_solution") if folder.parent.name.endswith("_base_solution") else "base"
    model_name = _model_of(folder, model)
    correct = base.get("is_correct")
    return Folder(folder, f"ta/{name}", f"ta/{model_name}/{group}/{name}", model_name, statement,
                  str(problem.get("gt_answer") or ""), str(base.get("prompt") or ""), solution,
                  str(base.get("answer") or ""), correct if isinstance(correct, bool) else None, chunks)


def problem_folders(root: Path) -> list[Path]:
    if (root / "base_solution.json").exists():
        return [root]
    return sorted(p.parent for p in root.rglob("base_solution.json"))[:MAX_FOLDERS + 1]


def thought_of(solution: str) -> str:
    """The solution's thought: what comes before its closing tag (the prompt opened it)."""
    return solution.split(CLOSE_TAG, 1)[0] if CLOSE_TAG in solution else solution


def import_analysis(study: Study | str, path: Path, *, model: str | None = None, skip_invalid: bool = False,
                    actor=None, progress: Callable[[int, int], None] | None = None) -> AnchorsReport:
    """Import the thought-anchors problem folders under ``path`` into ``study`` (created if missing)."""
    report = AnchorsReport()
    if isinstance(study, str):
        study, _created = annotation_services.do_get_or_create_study(study)
    root = Path(path)
    folders = problem_folders(root)
    if len(folders) > MAX_FOLDERS:
        report.reject(0, f"{path}: more than {MAX_FOLDERS:,} problem folders; import them in parts")
        return report
    parsed: list[Folder] = []
    for n, folder in enumerate(folders, start=1):
        try:
            parsed.append(read_folder(folder, model))
        except (OSError, ValueError) as exc:  # json.JSONDecodeError is a ValueError
            report.reject(n, f"{folder.relative_to(root.parent) if folder != root else folder.name}: {exc}")
    if report.rejected and not skip_invalid:
        return report
    if not parsed:
        if not report.rejected:
            report.reject(0, f"{path}: no folder with base_solution.json and problem.json found")
        return report
    with transaction.atomic():
        _write(study, parsed, report, actor, progress)
        report.committed = True
    transaction.on_commit(lambda: signals.data_changed.send(sender=Study, study=study, reason="import"))
    return report


def _records(f: Folder) -> list[ProblemIn | TraceIn]:
    thought = thought_of(f.solution)
    steps = None
    if f.chunks:
        found = align_chunks([c["chunk"] for c in f.chunks], [thought])
        steps = [c["chunk"].strip() for c, at in zip(f.chunks, found, strict=True) if at is not None and c["chunk"].strip()]
    return [
        ProblemIn(kind="problem", problem_id=f.problem_id, statement=f.statement, gold_answer=f.gold or None,
                  domain="math"),
        TraceIn(kind="trace", problem_id=f.problem_id, model=f.model, trace_id=f.trace_id, raw=f.solution,
                answer=f.answer or None, answer_correct=f.correct, prompt_opens_thought=True,
                thought_steps=steps or None,
                meta={"source": FORMAT, "licence": "MIT, Copyright (c) 2025 interp-reasoning (thought-anchors.com)"},
                regime={"source": FORMAT, "model": f.model}),
    ]


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _chunk_index(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _write(study: Study, parsed: list[Folder], report: AnchorsReport, actor, progress) -> None:
    records = [r for f in parsed for r in _records(f)]
    written = write_records(study, records, actor=actor)
    report.read = len(parsed)
    for name in ("problems_created", "traces_created", "steps_created", "unchanged"):
        setattr(report, name, getattr(written, name))
    for row in written.rejected:
        report.reject(row["line"], f"record {row['line']}: {row['reason']}")
    traces = {t.trace_id: t for t in Trace.objects.filter(study=study, trace_id__in=[f.trace_id for f in parsed])}
    for n, f in enumerate(parsed, start=1):
        trace = traces.get(f.trace_id)
        if trace is None or not f.chunks:
            continue
        _attach(trace, f, report)
        if progress:
            progress(n, len(parsed))
    if report.chunks:
        report.notes.append(f"{report.chunks_aligned} of {report.chunks} published chunks aligned to thought steps; "
                            f"{report.steps_with_values} steps got the published values, {report.tags_created} "
                            f"function tags imported")


def _attach(trace: Trace, f: Folder, report: AnchorsReport) -> None:
    steps = list(Step.objects.filter(trace=trace, channel=Step.Channel.THOUGHT).order_by("index"))
    aligned = align_chunks([c["chunk"] for c in f.chunks], [s.text for s in steps])
    report.chunks += len(f.chunks)
    report.chunks_aligned += sum(a is not None for a in aligned)
    step_of_chunk = {_chunk_index(c.get("chunk_idx", k)): a for k, (c, a) in enumerate(zip(f.chunks, aligned, strict=True))}
    first: dict[int, dict[str, Any]] = {}
    tags: dict[int, set[str]] = {}
    deps: dict[int, set[int]] = {}
    for chunk, at in zip(f.chunks, aligned, strict=True):
        if at is None:
            continue
        first.setdefault(at, chunk)  # a step that holds several chunks gets the values of its first
        tags.setdefault(at, set()).update(t for t in (normalize_function(str(x)) for x in chunk.get("function_tags") or [])
                                          if t)
        for d in chunk.get("depends_on") or []:
            target = step_of_chunk.get(_chunk_index(d))
            if target is not None and target != at:
                deps.setdefault(at, set()).add(steps[target].index)
    StepImportance.objects.filter(trace=trace, source=StepImportance.Source.IMPORTED, origin=ORIGIN).delete()
    StepImportance.objects.bulk_create([
        StepImportance(step=steps[at], trace=trace, source=StepImportance.Source.IMPORTED, origin=ORIGIN,
                       depends_on=sorted(deps.get(at, ())), **{m: _number(chunk.get(m)) for m in MEASURES})
        for at, chunk in sorted(first.items())])
    report.steps_with_values += len(first)
    StepTag.objects.filter(step__trace=trace, kind=StepTag.Kind.IMPORTED, origin=ORIGIN).delete()
    new_tags = [StepTag(step=steps[at], kind=StepTag.Kind.IMPORTED, origin=ORIGIN, tag=tag)
                for at, names in sorted(tags.items()) for tag in sorted(names)]
    StepTag.objects.bulk_create(new_tags)
    report.tags_created += len(new_tags)
