"""Adapters from public dataset shapes to canonical records.

Each adapter reads decoded JSON values with their line numbers and yields
``(line_no, record_dict)`` or ``(line_no, RecordError)``; the pipeline treats
every format the same from there on. Line numbers are 1-based lines of the
file (for a JSON array: the 1-based position of the entry).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any

from annotation.importing import inspect_logs, lm_eval_logs
from annotation.importing.records import RecordError

# Lists, not tuples: apps to the right of annotation add formats with register_format() from their
# AppConfig.ready, and the command's and the forms' choices read these same objects.
FORMATS = ["reasonaudit", "gsm8k-solutions", "gsm8k", "prm800k", "processbench", "trl-stepwise", "inspect", "lm-eval"]
# Formats read from one uploaded stream. An lm-eval samples file needs the results JSON lying beside it: the upload
# form takes both files and puts them in a folder of their own (annotation.services.do_queue_import).
UPLOAD_FORMATS = [f for f in FORMATS if f != "lm-eval"]
#: Every format's human name (the upload form's choices; docs/import-format.md describes each): the built-in
#: formats' here, another app's given where it registers its format (register_format, register_path_format).
FORMAT_LABELS: dict[str, str] = {
    "reasonaudit": "ReasonAudit JSONL (the canonical format)",
    "gsm8k-solutions": "GSM8K-style solutions (JSONL)",
    "gsm8k": "GSM8K problems (JSONL)",
    "prm800k": "PRM800K (JSONL)",
    "processbench": "ProcessBench (JSON array)",
    "trl-stepwise": "TRL stepwise supervision (JSONL)",
    "inspect": "Inspect AI log (.eval or .json)",
    "lm-eval": "lm-evaluation-harness samples (with its results JSON)",
}

# Formats a higher app reads from a path itself (a folder tree, not one stream): registered from its
# AppConfig.ready, since this app cannot import it (abstraction registers "abstraction-outputs"). The
# importer is called as importer(study or its name, path, model=..., skip_invalid=..., actor=..., progress=...) and
# returns an ImportReport. The CLI passes the path; the upload form an archive unpacked into a temporary folder
# (annotation/importing/archives.py), whose one wrapping folder is dropped unless it is one of PATH_FORMAT_ROOTS.
# A format that needs the model's name (its files do not say) is in PATH_FORMAT_NEEDS_MODEL; the keyword options
# an importer takes beyond those (gsm-symbolic: instances, seed) are in PATH_FORMAT_OPTIONS, passed only when given.
PATH_FORMATS: dict[str, Callable[..., Any]] = {}
PATH_FORMAT_ROOTS: dict[str, frozenset[str]] = {}
PATH_FORMAT_NEEDS_MODEL: set[str] = set()
PATH_FORMAT_OPTIONS: dict[str, tuple[str, ...]] = {}


def register_path_format(name: str, importer: Callable[..., Any], *, label: str,
                         root_names: frozenset[str] = frozenset(), needs_model: bool = True,
                         options: tuple[str, ...] = ()) -> None:
    PATH_FORMATS[name] = importer
    FORMAT_LABELS[name] = label
    PATH_FORMAT_ROOTS[name] = root_names
    PATH_FORMAT_OPTIONS[name] = options
    if needs_model:
        PATH_FORMAT_NEEDS_MODEL.add(name)
    else:
        PATH_FORMAT_NEEDS_MODEL.discard(name)


def cli_formats() -> tuple[str, ...]:
    return (*FORMATS, *PATH_FORMATS)


def format_label(name: str) -> str:
    """The format's human name (every registered format has one)."""
    return FORMAT_LABELS[name]


PROCESSBENCH_ANNOTATOR = "processbench-reference"
TRL_ANNOTATOR = "trl-labels"

Item = tuple[int, "dict[str, Any] | RecordError"]

_CALC = re.compile(r"<<([^<>]*)>>")
_FINAL_A = re.compile(r"^\s*A:\s*(.+?)\s*$")
_HASHES = re.compile(r"^\s*####\s*(.+?)\s*$")


#: The first bytes of files people upload by mistake, and what to call them: one refusal that says what the file
#: is, instead of "not valid UTF-8 (byte 0)" on each of its binary "lines".
BINARY_MAGIC = [(b"\x89PNG", "a PNG image"), (b"\xff\xd8\xff", "a JPEG image"), (b"%PDF", "a PDF document"),
                (b"PK\x03\x04", "a zip archive (upload a folder format's archive under that format)"),
                (b"\x1f\x8b", "a gzip file"), (b"GIF8", "a GIF image")]


def read_json_lines(stream: IO[bytes]) -> Iterator[tuple[int, Any]]:
    """Decode a JSONL byte stream line by line; bad lines become RecordErrors."""
    for line_no, raw in enumerate(stream, start=1):
        if line_no == 1 and raw.startswith(b"\xef\xbb\xbf"):
            raw = raw[3:]  # a BOM, as Windows tools write: not part of the JSON
        if line_no == 1 and (what := next((name for magic, name in BINARY_MAGIC if raw.startswith(magic)), None)):
            yield 1, RecordError(f"this file is {what}, not JSON Lines (one JSON object a line)")
            return
        if not raw.strip():
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            yield line_no, RecordError(f"not valid UTF-8 (byte {exc.start})")
            continue
        # Without its line break: json reports an error at the end of the
        # text ("{... unterminated") at the position after the last character
        # read, which with the break kept is "line 2, column 1" (issue 23).
        text = text.rstrip("\r\n")
        try:
            yield line_no, json.loads(text)
        except json.JSONDecodeError as exc:
            yield line_no, RecordError(f"not valid JSON: {exc.msg} at column {exc.colno}")


def read_json_entries(stream: IO[bytes]) -> Iterator[tuple[int, Any]]:
    """A JSON array (ProcessBench ships these) or, failing that, JSONL."""
    head = stream.read(1)
    while head and head.isspace():
        head = stream.read(1)
    if head != b"[":
        stream.seek(0)
        yield from read_json_lines(stream)
        return
    data = head + stream.read()
    try:
        entries = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        yield 1, RecordError(f"not valid UTF-8 (byte {exc.start})")
        return
    except json.JSONDecodeError as exc:
        yield exc.lineno, RecordError(f"not valid JSON: {exc.msg} at column {exc.colno}")
        return
    yield from enumerate(entries, start=1)


def _obj(value: Any) -> dict[str, Any]:
    if isinstance(value, RecordError):
        raise value
    if not isinstance(value, dict):
        raise RecordError(f"expected a JSON object, got {type(value).__name__}")
    return value


def _need(obj: dict[str, Any], *keys: str) -> None:
    for key in keys:
        if key not in obj or obj[key] is None:
            raise RecordError(f'missing "{key}"')


def _stable_id(prefix: str, *parts: str) -> str:
    digest = hashlib.sha1("\x1f".join(parts).encode()).hexdigest()[:16]
    return f"{prefix}-{digest}"


def _wrap(entries: Iterable[tuple[int, Any]], convert) -> Iterator[Item]:
    for line_no, value in entries:
        try:
            for record in convert(line_no, _obj(value)):
                yield line_no, record
        except RecordError as exc:
            yield line_no, exc
        except (TypeError, ValueError, AttributeError, KeyError, IndexError) as exc:
            # A field of the wrong shape deep in a dataset record ("chosen_completion": "0",
            # a completion that is not an object): a bad line, not a crashed import.
            yield line_no, RecordError(f"unexpected shape for this format ({type(exc).__name__}: {exc})")


# --- GSM8K -------------------------------------------------------------------


def gsm8k_skeleton(solution_lines: list[str]) -> list[dict[str, str | None]]:
    """One skeleton step per reference-solution line; its calculator annotation
    (the last, which carries the line's result) becomes the ``check``."""
    steps = []
    for line in solution_lines:
        calcs = _CALC.findall(line)
        text = _CALC.sub("", line).strip()
        if not text:
            continue
        steps.append({"text": text, "check": calcs[-1].strip() if calcs else None})
    return steps


def _split_final(text: str, pattern: re.Pattern[str]) -> tuple[list[str], str | None]:
    lines = [ln for ln in text.split("\n") if ln.strip()]
    if lines and (m := pattern.match(lines[-1])):
        return lines[:-1], m.group(1)
    return lines, None


def _gsm8k_problem(line_no: int, question: str, reference: str, pattern: re.Pattern[str]) -> dict[str, Any]:
    lines, gold = _split_final(reference, pattern)
    if gold is None:
        raise RecordError("the reference solution has no final answer line")
    return {
        "kind": "problem",
        "problem_id": f"gsm8k-test-{line_no - 1:04d}",
        "statement": question,
        "gold_answer": gold.replace(",", ""),
        "domain": "arithmetic",
        "tags": ["gsm8k"],
        "skeleton": gsm8k_skeleton(lines),
    }


def _gsm8k_solutions(line_no: int, obj: dict[str, Any]) -> Iterator[dict[str, Any]]:
    _need(obj, "question", "ground_truth")
    problem = _gsm8k_problem(line_no, obj["question"], obj["ground_truth"], _FINAL_A)
    yield problem
    for model, sol in obj.items():
        if model in ("question", "ground_truth") or not isinstance(sol, dict) or "solution" not in sol:
            continue
        steps, answer = _split_final(sol["solution"] or "", _FINAL_A)
        trace = {
            "kind": "trace",
            "problem_id": problem["problem_id"],
            "model": model,
            "trace_id": f"{problem['problem_id']}/{model}",
            "raw": sol["solution"] or "",
            "steps": [s.strip() for s in steps],
            "answer": answer,
        }
        if isinstance(sol.get("is_correct"), bool):
            trace["answer_correct"] = sol["is_correct"]
        yield trace


def _gsm8k(line_no: int, obj: dict[str, Any]) -> Iterator[dict[str, Any]]:
    _need(obj, "question", "answer")
    yield _gsm8k_problem(line_no, obj["question"], obj["answer"], _HASHES)


# --- PRM800K -----------------------------------------------------------------

_PRM_RATING = {1: "valid", 0: "neutral", -1: "invalid"}


def _prm800k(line_no: int, obj: dict[str, Any]) -> Iterator[dict[str, Any]]:
    _need(obj, "question", "label")
    question = _obj(obj["question"])
    label = _obj(obj["label"])
    _need(question, "problem", "ground_truth_answer")
    problem_id = _stable_id("prm800k", question["problem"])
    yield {
        "kind": "problem",
        "problem_id": problem_id,
        "statement": question["problem"],
        "gold_answer": str(question["ground_truth_answer"]),
        "domain": "math",
        "tags": ["prm800k"],
    }
    labeler = str(obj.get("labeler") or "prm800k-labeler")
    steps: list[str] = []
    labels: list[dict[str, Any]] = []
    human_written: list[int] = []
    for k, step in enumerate(label.get("steps") or [], start=1):
        step = _obj(step)
        completions = step.get("completions") or []
        chosen = step.get("chosen_completion")
        if chosen is not None:
            if not (0 <= chosen < len(completions)):
                raise RecordError(f"step {k}: chosen_completion {chosen} is out of range")
            picked = completions[chosen]
        elif step.get("human_completion"):
            # Phase 1: the labeler wrote this step after rejecting the model's;
            # it is the labeler's own +1 step.
            human = step["human_completion"]
            picked = {"text": human["text"] if isinstance(human, dict) else str(human), "rating": 1}
            human_written.append(k)
        elif completions:
            # The last step of a trajectory that stopped (found_error, give_up):
            # nothing was chosen. The first -1 completion is the error found;
            # otherwise the first completion shown.
            picked = next((c for c in completions if c.get("rating") == -1), completions[0])
        else:
            continue
        steps.append(str(picked.get("text") or "").strip())
        rating = picked.get("rating")
        if rating in _PRM_RATING:
            labels.append({"step": len(steps), "verdict": _PRM_RATING[rating], "annotator": labeler})
    # The answer is the one the trace's steps state: PRM800K's "# Answer" step. pre_generated_answer belongs
    # to the whole pre-generated solution, while the steps stop where the labelling stopped (found_error,
    # give_up): such a trace states no answer ("", not extracted from a step mid-solution); the solution's
    # answer stays in meta.
    raw_answer = steps[-1].split("# Answer", 1)[1].strip() if steps and "# Answer" in steps[-1] else ""
    meta = {
        "pre_generated_answer": question.get("pre_generated_answer"),
        "finish_reason": label.get("finish_reason"),
        "generation": obj.get("generation"),
        "timestamp": obj.get("timestamp"),
        "is_quality_control_question": obj.get("is_quality_control_question"),
        "human_written_steps": human_written,
    }
    yield {
        "kind": "trace",
        "problem_id": problem_id,
        "model": "prm800k" if obj.get("generation") is None else f"prm800k-gen{obj['generation']}",
        # Position-independent, so the same record in another file is the same trace.
        "trace_id": _stable_id("prm800k", question["problem"], labeler, str(obj.get("timestamp")), "\x1e".join(steps)),
        "steps": steps,
        "answer": raw_answer,
        "labels": labels,
        "meta": meta,
    }


# --- ProcessBench ------------------------------------------------------------


def _processbench(line_no: int, obj: dict[str, Any]) -> Iterator[dict[str, Any]]:
    _need(obj, "id", "problem", "steps", "label")
    steps = obj["steps"]
    if not isinstance(steps, list):
        raise RecordError('"steps" must be a list of strings')
    label = obj["label"]
    if not isinstance(label, int) or isinstance(label, bool) or label < -1 or label >= max(len(steps), 1):
        raise RecordError(f'"label" {label!r} must be -1 or a 0-based step index below {len(steps)}')
    problem_id = _stable_id("processbench", obj["problem"])
    yield {
        "kind": "problem",
        "problem_id": problem_id,
        "statement": obj["problem"],
        # ProcessBench ships no gold answer, only whether the final answer was right.
        "gold_answer": "",
        "domain": str(obj.get("source") or obj.get("domain") or "math"),
        "tags": ["processbench"],
    }
    last = len(steps) if label == -1 else label + 1  # steps after the first error stay unlabelled
    labels = [
        {"step": k, "verdict": "invalid" if k - 1 == label else "valid", "annotator": PROCESSBENCH_ANNOTATOR}
        for k in range(1, last + 1)
    ]
    trace: dict[str, Any] = {
        "kind": "trace",
        "problem_id": problem_id,
        "model": str(obj.get("generator") or "unknown"),
        "trace_id": f"processbench/{obj['id']}",
        "steps": [str(s) for s in steps],
        "labels": labels,
        "labels_to_first_error": True,
    }
    if isinstance(obj.get("final_answer_correct"), bool):
        trace["answer_correct"] = obj["final_answer_correct"]
    yield trace


# --- TRL stepwise supervision --------------------------------------------------


def _trl_stepwise(line_no: int, obj: dict[str, Any]) -> Iterator[dict[str, Any]]:
    _need(obj, "prompt", "completions", "labels")
    completions, flags = obj["completions"], obj["labels"]
    if not isinstance(completions, list) or not isinstance(flags, list) or len(completions) != len(flags):
        raise RecordError('"completions" and "labels" must be lists of the same length')
    if any(not isinstance(f, bool) for f in flags):
        raise RecordError('"labels" must be true/false')
    prompt = obj["prompt"]
    meta = obj.get("meta") if isinstance(obj.get("meta"), dict) else {}
    problem_id = str(meta.get("problem_id") or _stable_id("trl", prompt))
    yield {
        "kind": "problem",
        "problem_id": problem_id,
        "statement": prompt,
        "gold_answer": str(meta.get("gold_answer") or ""),
        "tags": ["trl"],
    }
    trace = {
        "kind": "trace",
        "problem_id": problem_id,
        "model": str(meta.get("model") or "trl"),
        "steps": [str(c) for c in completions],
        "labels": [
            {"step": k, "verdict": "valid" if ok else "invalid", "annotator": TRL_ANNOTATOR}
            for k, ok in enumerate(flags, start=1)
        ],
    }
    if meta.get("trace_id"):
        trace["trace_id"] = str(meta["trace_id"])
    yield trace


def _passthrough(line_no: int, obj: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield obj


_CONVERTERS = {
    "reasonaudit": (read_json_lines, _passthrough),
    "gsm8k-solutions": (read_json_lines, _gsm8k_solutions),
    "gsm8k": (read_json_lines, _gsm8k),
    "prm800k": (read_json_lines, _prm800k),
    "processbench": (read_json_entries, _processbench),
    "trl-stepwise": (read_json_lines, _trl_stepwise),
}


def register_format(name: str, reader, convert, *, label: str, upload: bool = True) -> None:
    """Add an import format from another app (fidelity: ``menatqa``, ``gsm-plus``): ``reader`` is
    read_json_lines or read_json_entries, ``convert(line_no, obj)`` yields record dicts or raises
    RecordError; ``label`` is its human name. Registering twice is harmless."""
    _CONVERTERS[name] = (reader, convert)
    FORMAT_LABELS[name] = label
    if name not in FORMATS:
        FORMATS.append(name)
    if upload and name not in UPLOAD_FORMATS:
        UPLOAD_FORMATS.append(name)


def records(stream: IO[bytes], fmt: str) -> Iterator[Item]:
    # Eval logs of other tools: a whole log, not one record per line (inspect_logs, lm_eval_logs).
    if fmt == "inspect":
        return inspect_logs.records(stream)
    if fmt == "lm-eval":
        return lm_eval_logs.records(stream, read_json_lines(stream))
    if fmt not in _CONVERTERS:
        raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    reader, convert = _CONVERTERS[fmt]
    return _wrap(reader(stream), convert)
