"""Import formats of published perturbation sets, registered with annotation's import pipeline
(``import_traces --format menatqa|gsm-plus``, the upload form, the API) from FidelityConfig.ready.

* ``menatqa``: the MenatQA JSON array (paper 001's dataset). Each item becomes the problem
  ``menatqa-<ID>`` (context paragraphs, then the question; the time scope and the bare question in
  ``meta``) and its dataset counterfactual ``menatqa-<ID>-updated`` (updated context and question,
  ``updated_answer`` as gold), linked as an imported variant (spec §11.8 [I]). A missing field is
  rejected with the item's 1-based position and the field's name.
* ``gsm-plus``: GSM-Plus JSONL (``question``, ``solution``, ``answer``, ``perturbation_type``,
  ``seed_question``, ...; CC-BY-SA, users bring the file). Each line becomes a variant problem
  ``gsmplus-<hash>``; ``link_imports`` later links it to the study's GSM8K problem whose statement is
  its ``seed_question``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

from annotation.importing.adapters import read_json_entries, read_json_lines, register_format
from annotation.importing.records import RecordError

MENATQA_FIELDS = ("question", "answer", "context", "time_scope", "updated_question", "updated_answer", "type", "ID")
GSM_PLUS_FIELDS = ("question", "answer", "perturbation_type", "seed_question")
IMPORT_KEY = "fidelity_import"
SYMBOLIC_SOURCE = "gsm-symbolic"  # the source of GSM-Symbolic problems (fidelity.symbolic_import)


def _need(obj: dict[str, Any], fields: tuple[str, ...]) -> None:
    for f in fields:
        if f not in obj or obj[f] is None:
            raise RecordError(f'missing field "{f}"')


def _text(value: Any) -> str:
    if isinstance(value, list):
        return " ".join(_text(v) for v in value)
    return "" if value is None else str(value)


def _answer(value: Any) -> str:
    """MenatQA answers are strings or lists of accepted strings: the first is the gold."""
    if isinstance(value, list):
        return _text(value[0]) if value else ""
    return _text(value)


def _context(paragraphs: Any, key: str) -> str:
    if not isinstance(paragraphs, list):
        raise RecordError('field "context" must be a list of {title, text, updated_text}')
    parts = []
    for p in paragraphs:
        if isinstance(p, dict):
            body = _text(p.get(key) if p.get(key) is not None else p.get("text"))
            parts.append(f"{_text(p.get('title'))}: {body}".strip(": "))
        else:
            parts.append(_text(p))
    return "\n".join(x for x in parts if x)


def _with_context(context: str, question: str) -> str:
    # [I] spec §11.11: MenatQA is reading comprehension, so the context goes into the prompt.
    return f"{context}\n\nQuestion: {question}" if context else question


def menatqa(line_no: int, obj: dict[str, Any]) -> Iterator[dict[str, Any]]:
    _need(obj, MENATQA_FIELDS)
    pid = f"menatqa-{_text(obj['ID'])}"
    scope = obj["time_scope"]
    yield {"kind": "problem", "problem_id": pid, "gold_answer": _answer(obj["answer"]), "domain": "temporal",
           "statement": _with_context(_context(obj["context"], "text"), _text(obj["question"])),
           "tags": ["menatqa", _text(obj["type"])],
           "meta": {"question": _text(obj["question"]), "time_scope": scope, "type": _text(obj["type"])}}
    yield {"kind": "problem", "problem_id": f"{pid}-updated", "gold_answer": _answer(obj["updated_answer"]),
           "domain": "temporal", "statement": _with_context(_context(obj["context"], "updated_text"),
                                                            _text(obj["updated_question"])),
           "tags": ["menatqa", "menatqa-updated", _text(obj["type"])],
           "meta": {"question": _text(obj["updated_question"]), "time_scope": scope, "type": _text(obj["type"]),
                    IMPORT_KEY: {"source": "menatqa", "strategy": f"menatqa-{_text(obj['type'])}",
                                 "original_problem_id": pid}}}


def gsm_plus(line_no: int, obj: dict[str, Any]) -> Iterator[dict[str, Any]]:
    _need(obj, GSM_PLUS_FIELDS)
    kind = _text(obj["perturbation_type"]).strip()
    digest = hashlib.sha1("\x1f".join([_text(obj["seed_question"]), kind, _text(obj["question"])]).encode()
                          ).hexdigest()[:16]
    meta: dict[str, Any] = {IMPORT_KEY: {"source": "gsm-plus", "strategy": kind,
                                         "original_statement": _text(obj["seed_question"]),
                                         "original_gold": _text(obj.get("seed_answer"))}}
    if obj.get("solution"):
        meta["solution"] = _text(obj["solution"])
    yield {"kind": "problem", "problem_id": f"gsmplus-{digest}", "statement": _text(obj["question"]),
           "gold_answer": _answer(obj["answer"]).replace(",", ""), "domain": "arithmetic",
           "tags": ["gsm-plus", kind], "meta": meta}


def register() -> None:
    register_format("menatqa", read_json_entries, menatqa, label="MenatQA (JSON)")
    register_format("gsm-plus", read_json_lines, gsm_plus, label="GSM-Plus (JSONL)")
