"""Import of the benchmark repository's own output layout (format ``abstraction-outputs``):
``PATH/<level>/<sub_dataset>/output.json``, each a JSON list of records with ``prompt`` (the chat
messages, possibly cut to the last ones), ``raw_output``, ``output``, ``answer``, ``is_correct``,
``llm_judge``, ... The file's checker verdict (``llm_judge``, else ``is_correct``) is kept as the
imported correctness and is the one the table uses; the deterministic checker's verdict is stored
beside it. A sub-dataset folder named ``..._cot`` holds CoT outputs.

All or nothing: any bad folder or record (unknown level folder, unknown sub-dataset or one under the
wrong level, a sub-dataset folder without output.json, a record without ``answer``) is reported with
its path and index, and nothing is written unless ``skip_invalid``."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.db import transaction

from abstraction.core import checker
from abstraction.core import generators as gen
from abstraction.models import ITEM_DOMAIN, Benchmark, Item, Result
from annotation import services as annotation_services
from annotation import signals
from annotation.bulk import pk_map
from annotation.importing.pipeline import ImportReport, write_records
from annotation.importing.records import ProblemIn, TraceIn
from annotation.models import Problem, Study, Trace

FORMAT = "abstraction-outputs"
PUBLISHED = "published"  # the benchmark (set of items) the published outputs answer
LEVELS = {level: category for category, level in gen.LEVEL_OF.items()}
_QUESTION_MARK = "Question: "
_COT_CUE = "Let's think step by step."


def split_question(prompt: str) -> tuple[str, str] | None:
    """(question, hint) of a prompt "<hint>Question: <q>[ Let's think step by step.]", or None. By
    string search: the regex "^(.*?)Question: (.*?)\\s*(?:Let's think...)?$" was quadratic on a long run
    of blanks (a user's file)."""
    at = prompt.find(_QUESTION_MARK)
    if at < 0:
        return None
    question = prompt[at + len(_QUESTION_MARK):].rstrip()
    if question.endswith(_COT_CUE):
        question = question[: -len(_COT_CUE)].rstrip()
    return question, prompt[:at]


@dataclass
class Parsed:
    sub_dataset: str
    category: str
    task: str
    variant: str
    mode: str
    index: int
    question: str
    hint: str
    answer: str
    raw_output: str
    output: str
    imported: bool | None


def _final_user(prompt: Any) -> str:
    if isinstance(prompt, list):
        for message in reversed(prompt):
            if isinstance(message, dict) and message.get("role") in ("user", "human"):
                return str(message.get("content") or "")
        return ""
    return str(prompt or "")


def _verdict(record: dict) -> bool | None:
    for key in ("llm_judge", "is_correct"):
        value = record.get(key)
        if isinstance(value, bool):
            return value
    return None


def read_tree(root: Path, report: ImportReport) -> list[Parsed]:
    """Every record under ``root``, the bad ones reported (path and 0-based index)."""
    out: list[Parsed] = []
    if not root.is_dir():
        report.reject(0, f"{root}: not a directory (expected <level>/<sub_dataset>/output.json folders)")
        return out
    for level_dir in sorted(p for p in root.iterdir() if p.is_dir()):
        if level_dir.name not in LEVELS:
            report.reject(0, f"{level_dir.name}: unknown level folder (expected one of {', '.join(sorted(LEVELS))})")
            continue
        for sub_dir in sorted(p for p in level_dir.iterdir() if p.is_dir()):
            rel = f"{level_dir.name}/{sub_dir.name}"
            name, mode = (sub_dir.name[:-4], "cot") if sub_dir.name.endswith("_cot") else (sub_dir.name, "dp")
            try:
                category, task, variant = gen.classify(name)
            except ValueError:
                report.reject(0, f"{rel}: unknown sub-dataset {name!r}")
                continue
            if gen.LEVEL_OF[category] != level_dir.name:
                report.reject(0, f"{rel}: sub-dataset {name!r} belongs to {gen.LEVEL_OF[category]}, not {level_dir.name}")
                continue
            path = sub_dir / "output.json"
            if not path.is_file():
                report.reject(0, f"{rel}: missing sub-dataset outputs (no output.json)")
                continue
            try:
                records = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
                report.reject(0, f"{rel}/output.json: not valid JSON ({exc})")
                continue
            if not isinstance(records, list):
                report.reject(0, f"{rel}/output.json: expected a JSON list of records")
                continue
            for index, record in enumerate(records):
                report.read += 1
                where = f"{rel}/output.json[{index}]"
                if not isinstance(record, dict):
                    report.reject(index, f"{where}: expected a JSON object")
                    continue
                if record.get("answer") is None:
                    report.reject(index, f'{where}: missing "answer"')
                    continue
                question, hint = split_question(_final_user(record.get("prompt"))) or ("", "")
                out.append(Parsed(name, category, task, variant, mode, index, question, hint, str(record["answer"]),
                                  str(record.get("raw_output") or ""), str(record.get("output") or ""),
                                  _verdict(record)))
    return out


def import_outputs(study: Study | str, path: Path, *, model: str | None = None, skip_invalid: bool = False,
                   actor=None, progress: Callable[[int, int], None] | None = None) -> ImportReport:
    """Import one model's published outputs into ``study`` (created if missing, given by name)."""
    report = ImportReport()
    if not model:
        report.reject(0, f"--model NAME is required for the {FORMAT} format (the outputs do not name their model)")
        return report
    if isinstance(study, str):
        study, _created = annotation_services.do_get_or_create_study(study)
    parsed = read_tree(Path(path), report)
    if report.rejected and not skip_invalid:
        report.rejected.sort(key=lambda r: r["reason"])
        return report
    if not parsed:
        if not report.rejected:
            report.reject(0, f"{path}: no <level>/<sub_dataset>/output.json found")
        return report
    with transaction.atomic():
        _write(study, parsed, model, report, actor, progress)
        report.committed = True
    transaction.on_commit(lambda: signals.data_changed.send(sender=Study, study=study, reason="import"))
    return report


def _write(study: Study, parsed: list[Parsed], model: str, report: ImportReport, actor, progress) -> None:
    bench, _ = Benchmark.objects.get_or_create(
        study=study, name=PUBLISHED,
        defaults={"source": Benchmark.Source.IMPORTED, "generator_version": "published (dataset_1129)",
                  "meta": {"note": "items as the imported outputs give them; prompts may be cut"}})
    keys = {(p.sub_dataset, p.index) for p in parsed}
    existing = {(i.sub_dataset, i.instance): i for i in Item.objects.filter(benchmark=bench)}
    new_items = []
    for p in parsed:
        key = (p.sub_dataset, p.index)
        if key in existing:
            if existing[key].answer != p.answer:
                raise ValueError(f"{p.sub_dataset}[{p.index}]: gold {p.answer!r} differs from the imported item's "
                                 f"{existing[key].answer!r}")
            continue
        item = Item(benchmark=bench, category=p.category, sub_dataset=p.sub_dataset, task=p.task, variant=p.variant,
                    instance=p.index, question=p.question, answer=p.answer, hint=p.hint)
        existing[key] = item
        new_items.append(item)
    Item.objects.bulk_create(new_items)
    items = {(i.sub_dataset, i.instance): i for i in Item.objects.filter(benchmark=bench)
             if (i.sub_dataset, i.instance) in keys}
    counts: dict[str, int] = dict(bench.counts or {})
    for item in new_items:
        counts[item.category] = counts.get(item.category, 0) + 1
    Benchmark.objects.filter(pk=bench.pk).update(counts=counts, categories=sorted(counts, key=gen.CATEGORIES.index))
    records: list[ProblemIn | TraceIn] = []
    for item in new_items:
        records.append(ProblemIn(kind="problem", problem_id=f"abs/{bench.name}/{item.sub_dataset}/{item.instance}",
                                 statement=f"{item.hint}Question: {item.question}".strip(), gold_answer=item.answer,
                                 domain=ITEM_DOMAIN, tags=[item.category, item.variant]))
    trace_ids = {}
    for p in parsed:
        tid = f"abs/{bench.name}/{model}/{p.mode}/{p.sub_dataset}/{p.index}"
        trace_ids[(p.sub_dataset, p.index, p.mode)] = tid
        records.append(TraceIn(kind="trace", problem_id=f"abs/{bench.name}/{p.sub_dataset}/{p.index}", model=model,
                               trace_id=tid, raw=p.raw_output, answer=p.output or None, answer_correct=p.imported,
                               meta={"abstraction": {"sub_dataset": p.sub_dataset, "instance": p.index,
                                                     "mode": p.mode}}))
    written = write_records(study, records, actor=actor)
    for field in ("problems_created", "traces_created", "steps_created", "unchanged"):
        setattr(report, field, getattr(written, field))
    for row in written.rejected:
        report.reject(row["line"], f"record {row['line']}: {row['reason']}")
    problems = pk_map(Problem, "problem_id", [f"abs/{bench.name}/{i.sub_dataset}/{i.instance}" for i in new_items],
                      study=study.pk)
    for item in new_items:
        item.problem_id = problems.get(f"abs/{bench.name}/{item.sub_dataset}/{item.instance}")
    Item.objects.bulk_update(new_items, ["problem"], batch_size=1000)
    traces = pk_map(Trace, "trace_id", list(trace_ids.values()), study=study.pk)
    results = []
    for n, p in enumerate(parsed, start=1):
        item = items[(p.sub_dataset, p.index)]
        det = checker.check(p.raw_output, p.answer, numeric=checker.is_numeric(p.sub_dataset, p.category))
        imported = p.imported
        results.append(Result(
            item=item, model=model, mode=p.mode, trace_id=traces.get(trace_ids[(p.sub_dataset, p.index, p.mode)]),
            output=p.raw_output, extracted=det.extracted or "", det_correct=det.correct, imported_correct=imported,
            correct=imported if imported is not None else det.correct,
            checker=Result.Checker.IMPORTED if imported is not None else Result.Checker.DETERMINISTIC,
            regime={"source": FORMAT, "model": model, "prompting": p.mode},
        ))
        if progress and n % 500 == 0:
            progress(n, len(parsed))
    Result.objects.bulk_create(results, ignore_conflicts=True, batch_size=1000)
    if progress:
        progress(len(parsed), len(parsed))
