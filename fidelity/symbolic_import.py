"""``import_traces --format gsm-symbolic``: Apple's GSM-Symbolic files (users bring them; their
licence forbids redistribution), registered as a path format from FidelityConfig.ready.

The path is a folder holding either or both of

* ``templates/{symbolic,p1,p2}/NNNN.json``: one template each (``question_annotated``, ``id_orig``,
  ``question`` = the GSM8K original). ``instances`` instances are drawn per template by the bounded
  interpreter (fidelity.core.symbolic), instance i with a seed derived from (seed, variant,
  template, i), so the same seed gives the same problems. Problem ``gsmsym-<variant>-<NNNN>-s<seed>-<i>``.
* ``generated_data/GSM_{symbolic,p1,p2}.jsonl``: the published instances (``id``, ``instance``,
  ``question``, ``answer`` ending ``#### N``, ``original_id``, ``original_question``). Problem
  ``gsmsym-<variant>-<NNNN>-<instance>``.

Every problem carries ``meta.fidelity_import`` (source ``gsm-symbolic``, strategy = the variant,
``original_problem_id`` ``gsm8k-test-NNNN`` from the original's index, ``original_statement``,
``template``, ``instance``), so ``link_imports`` (run at the end) links it to the study's GSM8K
original as an imported variant of the suite ``gsm-symbolic``.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from django.db import transaction

from annotation import services as annotation_services
from annotation import signals
from annotation.importing.pipeline import ImportReport, write_records
from annotation.importing.records import RecordError, validate
from annotation.models import Study
from fidelity.core.symbolic import TemplateError, instantiate
from fidelity.importing import IMPORT_KEY, SYMBOLIC_SOURCE
from fidelity.suites import link_imports

FORMAT = SYMBOLIC_SOURCE
VARIANTS = ("symbolic", "p1", "p2")
ROOTS = frozenset({"templates", "generated_data"})
DEFAULT_INSTANCES = 10
MAX_INSTANCES = 200  # the paper draws 50; 200 x 100 templates x 3 variants is already 60,000 problems
_FINAL = re.compile(r"####\s*(.+?)\s*$", re.S)
_GENERATED = re.compile(r"^GSM_(symbolic|p1|p2)\.jsonl$")


def instance_seed(seed: int, variant: str, template: str, index: int) -> int:
    """A seed per instance that depends on nothing but these four (not on file order)."""
    return int(hashlib.sha256(f"{seed}/{variant}/{template}/{index}".encode()).hexdigest()[:15], 16)


def _link_meta(variant: str, template: str, index: int, original_index: Any, original_question: Any,
               **extra: Any) -> dict[str, Any]:
    info: dict[str, Any] = {"source": FORMAT, "strategy": variant, "template": f"{variant}/{template}",
                            "instance": index, "original_statement": str(original_question or ""), **extra}
    if isinstance(original_index, int) and not isinstance(original_index, bool) and original_index >= 0:
        info["original_problem_id"] = f"gsm8k-test-{original_index:04d}"
        info["original_index"] = original_index
    return {IMPORT_KEY: info}


def template_records(path: Path, variant: str, instances: int, seed: int) -> Iterator[dict[str, Any]]:
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RecordError(f"not a JSON template: {exc}") from None
    if not isinstance(obj, dict) or not isinstance(obj.get("question_annotated"), str):
        raise RecordError('missing field "question_annotated"')
    template = path.stem
    for i in range(instances):
        try:
            inst = instantiate(obj["question_annotated"], instance_seed(seed, variant, template, i))
        except TemplateError as exc:
            raise RecordError(f"instance {i}: {exc}") from None
        gold = inst.answer
        yield {"kind": "problem", "problem_id": f"gsmsym-{variant}-{template}-s{seed}-{i}",
               "statement": inst.question, "domain": "arithmetic", "tags": ["gsm-symbolic", variant],
               "gold_answer": str(gold.numerator) if gold.denominator == 1 else format(float(gold), ".10g"),
               "meta": {**_link_meta(variant, template, i, obj.get("id_orig"), obj.get("question"), seed=seed),
                        "values": inst.values}}


def generated_records(line: int, obj: Any, variant: str) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise RecordError("a line must be a JSON object")
    for f in ("id", "instance", "question", "answer"):
        if obj.get(f) is None:
            raise RecordError(f'missing field "{f}"')
    m = _FINAL.search(str(obj["answer"]))
    if not m:
        raise RecordError('field "answer" has no final "#### N" line')
    template = f"{int(obj['id']):04d}" if isinstance(obj["id"], int) else str(obj["id"])
    return {"kind": "problem", "problem_id": f"gsmsym-{variant}-{template}-{obj['instance']}",
            "statement": str(obj["question"]), "gold_answer": m.group(1).replace(",", ""), "domain": "arithmetic",
            "tags": ["gsm-symbolic", variant], "meta": {**_link_meta(variant, template, obj["instance"],
                                                                     obj.get("original_id"),
                                                                     obj.get("original_question")),
                                                        "solution": str(obj["answer"])}}


def _find(root: Path) -> tuple[list[tuple[str, Path]], list[tuple[str, Path]]]:
    """(variant, template file) and (variant, generated file), whether ``root`` is the dataset's folder,
    its ``templates`` folder or one variant's folder."""
    templates, generated = [], []
    for p in sorted(root.rglob("*")):
        if p.is_file() and p.suffix == ".json" and p.parent.name in VARIANTS:
            templates.append((p.parent.name, p))
        elif p.is_file() and (g := _GENERATED.match(p.name)):
            generated.append((g.group(1), p))
    return templates, generated


def import_symbolic(study: Study | str, path: Path, *, model: str | None = None, skip_invalid: bool = False,
                    actor=None, progress: Callable[[int, int], None] | None = None,
                    instances: int | None = None, seed: int | None = None) -> ImportReport:
    """Import GSM-Symbolic templates (``instances`` drawn per template with ``seed``) and published
    instances into ``study``, then link them to the study's GSM8K originals."""
    report = ImportReport()
    instances = DEFAULT_INSTANCES if instances is None else instances
    seed = 0 if seed is None else seed
    if not 1 <= instances <= MAX_INSTANCES:
        report.reject(0, f"--instances must be between 1 and {MAX_INSTANCES}, not {instances}")
        return report
    if isinstance(study, str):
        study, _created = annotation_services.do_get_or_create_study(study)
    root = Path(path)
    templates, generated = _find(root) if root.is_dir() else ([], [])
    if not templates and not generated:
        report.reject(0, f"{path}: no templates/{{symbolic,p1,p2}}/NNNN.json nor generated_data/GSM_*.jsonl found")
        return report
    records: list[Any] = []
    n = 0

    def keep(where: str, make: Callable[[], list[dict[str, Any]]]) -> None:
        nonlocal n
        n += 1
        try:
            records.extend(validate(r) for r in make())
        except RecordError as exc:
            report.reject(n, f"{where}: {exc}")
        except ValueError as exc:  # pydantic ValidationError: the record's field is named
            report.reject(n, f"{where}: {str(exc)[:300]}")

    for variant, p in templates:
        keep(f"{p.relative_to(root)}", lambda p=p, v=variant: list(template_records(p, v, instances, seed)))
    for variant, p in generated:
        with p.open(encoding="utf-8", errors="replace") as fh:
            for line_no, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as exc:
                    n += 1
                    report.reject(n, f"{p.relative_to(root)} line {line_no}: not JSON: {exc.msg}")
                    continue
                keep(f"{p.relative_to(root)} line {line_no}",
                     lambda obj=obj, v=variant, ln=line_no: [generated_records(ln, obj, v)])
    if report.rejected and not skip_invalid:
        return report
    with transaction.atomic():
        written = write_records(study, records, actor=actor)
        link_imports(study)
    transaction.on_commit(lambda: signals.data_changed.send(sender=Study, study=study, reason="import"))
    rejected = report.rejected
    report = written
    report.read = n
    report.rejected = rejected + written.rejected
    return report
