"""lm-evaluation-harness sample logs (``--format lm-eval``, docs/import-format.md) as canonical records.

The file is ``samples_<task>_<time>.jsonl`` written with ``--log_samples``; the
``results_<time>.json`` beside it names the model, the endpoint and the
generation settings, so an import without it is refused: a trace whose
regime is unknown must not be mixed with others. lm-eval writes one line per
(document, filter); they are merged into one trace per (document, repeat),
trace_id ``lm-eval/<model>/<task>/<run time>/<doc_id>/<repeat>``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from annotation.importing import regime
from annotation.importing.records import RecordError
from reasonlib import answers

Item = tuple[int, "dict[str, Any] | RecordError"]

_TIME = r"\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}(?:\.\d+)?"
_SAMPLES_NAME = re.compile(rf"^samples_(?P<task>.+)_(?P<time>{_TIME})")
_RESULTS_NAME = re.compile(rf"^results_(?P<time>{_TIME})\.json$")
_API_KINDS = {
    "local-chat-completions": "chat",
    "openai-chat-completions": "chat",
    "local-completions": "completions",
    "openai-completions": "completions",
}
# The API models of lm-eval 0.4.x send this seed with every request unless model_args set one.
_LM_EVAL_04_API_SEED = 1234
_STATEMENT_KEYS = ("question", "problem", "Question", "input", "prompt", "query")


class _Run:
    """What the results JSON says about the run that wrote the samples file."""

    def __init__(self, task: str, time: str, results: dict[str, Any]) -> None:
        self.task = task
        self.time = time
        config = results.get("config") or {}
        self.model_type = str(config.get("model") or "")
        self.model_args = _model_args(config.get("model_args"))
        self.model = str(
            results.get("model_name") or self.model_args.get("model") or self.model_args.get("pretrained") or ""
        )
        if not self.model:
            raise RecordError("the results JSON names no model (model_name / model_args)")
        task_config = (results.get("configs") or {}).get(task) or {}
        self.repeats = int(task_config.get("repeats") or 1)
        self.filters = [f.get("name") for f in task_config.get("filter_list") or [] if isinstance(f, dict)]
        self.version = (results.get("versions") or {}).get(task)
        self.n_shot = (results.get("n-shot") or {}).get(task)
        self.lm_eval_version = str(results.get("lm_eval_version") or "")
        self.git_hash = results.get("git_hash")
        self.extras = {
            "fewshot_as_multiturn": results.get("fewshot_as_multiturn"),
            "chat_template_sha": results.get("chat_template_sha"),
            "system_instruction_sha": results.get("system_instruction_sha"),
        }

    @property
    def seed(self) -> Any:
        if self.model_args.get("seed") is not None:
            return self.model_args["seed"]
        if self.model_type in _API_KINDS and self.lm_eval_version.startswith("0.4."):
            return _LM_EVAL_04_API_SEED
        return None


def _model_args(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    if isinstance(value, str):
        # Older results write the CLI string: "model=x,base_url=http://...,num_concurrent=2".
        pairs = (item.split("=", 1) for item in value.split(",") if "=" in item)
        return {k.strip(): v.strip() for k, v in pairs}
    return {}


def _find_run(stream: IO[bytes]) -> _Run:
    name = getattr(stream, "name", None)
    if not isinstance(name, str) or not Path(name).is_file():
        raise RecordError(
            "an lm-eval samples file is imported from its folder: the results_<time>.json beside it names the "
            "model and the generation settings (use manage.py import_traces on the file lying there)"
        )
    path = Path(name)
    m = _SAMPLES_NAME.match(path.name)
    if m:
        task, time = m["task"], m["time"]
        results_path = path.with_name(f"results_{time}.json")
        if not results_path.is_file():
            raise RecordError(f"{results_path.name} (the run's results, written with the samples) is not beside {path.name}")
    else:
        candidates = sorted(p for p in path.parent.glob("results_*.json") if _RESULTS_NAME.match(p.name))
        if len(candidates) != 1:
            raise RecordError(
                f"{path.name} is not named samples_<task>_<time>.jsonl and there is not exactly one "
                f"results_<time>.json beside it ({len(candidates)} found)"
            )
        results_path, task, time = candidates[0], "", _RESULTS_NAME.match(candidates[0].name)["time"]  # type: ignore[index]
    try:
        results = json.loads(results_path.read_bytes().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RecordError(f"{results_path.name} is not a JSON file ({exc})") from None
    if not isinstance(results, dict) or not isinstance(results.get("configs"), dict):
        raise RecordError(f"{results_path.name} is not an lm-eval results file (no \"configs\")")
    if not task:
        if len(results["configs"]) != 1:
            raise RecordError(f"{path.name} does not name its task and {results_path.name} holds several")
        task = next(iter(results["configs"]))
    if task not in results["configs"]:
        raise RecordError(f'{results_path.name} has no task "{task}"')
    return _Run(task, time, results)


def _arguments(value: Any) -> tuple[Any, dict[str, Any]]:
    """(prompt, gen_kwargs) of the first request, from either layout lm-eval has written."""
    if isinstance(value, dict):  # 0.4.3+: {"gen_args_0": {"arg_0": prompt, "arg_1": gen_kwargs}}
        first = value.get("gen_args_0") or next(iter(value.values()), None)
        if not isinstance(first, dict) or "arg_0" not in first:
            raise RecordError('"arguments" has no "gen_args_0.arg_0"')
        args = [first.get("arg_0"), first.get("arg_1")]
    elif isinstance(value, list) and value:  # older: [[prompt, gen_kwargs], ...] (one entry per request)
        args = list(value[0]) if isinstance(value[0], (list, tuple)) else list(value)
    else:
        raise RecordError('"arguments" must be an object or a non-empty list')
    prompt = args[0] if args else None
    gen_kwargs = args[1] if len(args) > 1 and isinstance(args[1], dict) else {}
    return prompt, gen_kwargs


def _prompt(value: Any) -> tuple[list[dict[str, Any]] | None, str]:
    """Chat messages (with --apply_chat_template) or the raw prompt text."""
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], str):
        value = value[0]  # a chat prompt is logged as a one-element list holding its JSON
    if isinstance(value, dict) and isinstance(value.get("prompt"), str):
        value = value["prompt"]
    if not isinstance(value, str):
        raise RecordError('"arguments": the prompt is not text')
    if value.startswith("["):
        try:
            messages = json.loads(value)
        except json.JSONDecodeError:
            messages = None
        if isinstance(messages, list) and all(isinstance(m, dict) and "role" in m for m in messages):
            return messages, value
    return None, value


def _statement(doc: Any, messages: list[dict[str, Any]] | None, prompt: str) -> str:
    if isinstance(doc, dict):
        for key in _STATEMENT_KEYS:
            if isinstance(doc.get(key), str) and doc[key].strip():
                return doc[key]
    if messages:
        users = [regime.canonical_messages([m])[0]["content"] for m in messages if m.get("role") == "user"]
        if users and users[-1].strip():
            return users[-1]
    return prompt


def _gold(target: Any) -> str:
    if isinstance(target, list):
        target = target[0] if target else ""
    text = str(target if target is not None else "")
    # GSM8K-style targets are whole solutions ending "#### 18".
    return answers.extract_answer(text) or text.strip()


def _verdict(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return True if value == 1 else False if value == 0 else None
    return None


def _need(obj: dict[str, Any], *keys: str) -> None:
    missing = [k for k in keys if k not in obj]
    if missing:
        raise RecordError("not an lm-eval sample line: missing " + ", ".join(f'"{k}"' for k in missing))


class _Doc:
    def __init__(self, line: int, obj: dict[str, Any]) -> None:
        self.line = line
        self.first = obj
        self.by_filter: dict[str, dict[str, Any]] = {}

    def add(self, obj: dict[str, Any]) -> None:
        if obj.get("resps") != self.first.get("resps"):
            raise RecordError(f"doc_id {obj['doc_id']}: a second line with different responses")
        metrics = {m: obj.get(m) for m in obj.get("metrics") or [] if isinstance(m, str)}
        self.by_filter[str(obj.get("filter") or "none")] = {"filtered": obj.get("filtered_resps"), "metrics": metrics}


def records(stream: IO[bytes], lines: Iterable[tuple[int, Any]]) -> Iterator[Item]:
    """``lines``: the file's decoded JSON lines (adapters.read_json_lines)."""
    try:
        run: _Run | None = _find_run(stream)
    except RecordError as exc:
        run = None
        yield 0, exc
    docs: dict[Any, _Doc] = {}
    for line_no, value in lines:
        try:
            if isinstance(value, RecordError):
                raise value
            if not isinstance(value, dict):
                raise RecordError(f"not an lm-eval sample line: expected a JSON object, got {type(value).__name__}")
            _need(value, "doc_id", "doc", "arguments", "resps")
            key = value["doc_id"]
            if not isinstance(key, (int, str)) or isinstance(key, bool):
                raise RecordError('"doc_id" must be a number or a string')
            doc = docs.get(key)
            if doc is None:
                doc = docs[key] = _Doc(line_no, value)
            doc.add(value)
        except RecordError as exc:
            yield line_no, exc
    if run is None:
        return  # the lines were checked so the report names every problem; nothing to convert without the run
    for doc in docs.values():
        try:
            yield from ((doc.line, r) for r in _doc_records(run, doc))
        except RecordError as exc:
            yield doc.line, exc
        except (TypeError, ValueError, AttributeError, KeyError, IndexError) as exc:
            yield doc.line, RecordError(f"unexpected shape for an lm-eval sample ({type(exc).__name__}: {exc})")


def _doc_records(run: _Run, doc: _Doc) -> Iterator[dict[str, Any]]:
    obj = doc.first
    doc_id = obj["doc_id"]
    prompt_value, gen_kwargs = _arguments(obj["arguments"])
    messages, prompt = _prompt(prompt_value)
    problem_id = f"{run.task}/{doc_id}"
    yield {
        "kind": "problem",
        "problem_id": problem_id,
        "statement": _statement(obj["doc"], messages, prompt),
        "gold_answer": _gold(obj.get("target")),
        "tags": ["lm-eval", run.task],
    }
    resps = obj["resps"]
    responses = resps[0] if resps and isinstance(resps[0], list) else resps
    if not isinstance(responses, list) or not all(isinstance(r, str) for r in responses):
        raise RecordError('"resps" must hold the generated text (a list of lists of strings)')
    # The first filter of the task's config is the primary verdict (GSM8K: strict-match).
    order = [f for f in run.filters if f in doc.by_filter] + [f for f in doc.by_filter if f not in run.filters]
    primary = doc.by_filter[order[0]] if order else {"filtered": None, "metrics": {}}
    metric, value = next(iter(primary["metrics"].items()), (None, None))
    stop = gen_kwargs.get("until")
    settings = regime.regime(
        model=run.model,
        base_url_host=regime.host_of(run.model_args.get("base_url")),
        api=_API_KINDS.get(run.model_type),
        prompt_template=f"lm-eval:{run.task}",
        prompt_template_version=None if run.version is None else str(run.version),
        messages_hash=regime.messages_hash(messages if messages is not None else prompt),
        temperature=gen_kwargs.get("temperature"),
        top_p=gen_kwargs.get("top_p"),
        seed=run.seed,
        max_tokens=gen_kwargs.get("max_gen_toks", gen_kwargs.get("max_tokens")),
        stop=[stop] if isinstance(stop, str) else stop,
        k=run.repeats,
        tool_access="none",
        continuation="none",
        code_version=f"lm_eval {run.lm_eval_version}" + (f" ({run.git_hash})" if run.git_hash else ""),
        source="lm-eval",
        lm_eval_model=run.model_type,
        num_fewshot=run.n_shot,
        **{k: v for k, v in run.extras.items() if v is not None},
    )
    for repeat, text in enumerate(responses):
        trace: dict[str, Any] = {
            "kind": "trace",
            "problem_id": problem_id,
            "model": run.model,
            "trace_id": f"lm-eval/{run.model}/{run.task}/{run.time}/{doc_id}/{repeat}",
            "raw": text,
            "regime": {**settings, "repeat": repeat},
            # lm-eval's think_end_token (model_args): the thought ends at it (reasonlib.thinking, form think_end).
            **({"think_end_token": str(run.model_args["think_end_token"])}
               if run.model_args.get("think_end_token") else {}),
            "meta": {
                "lm_eval": {
                    "task": run.task,
                    "run": run.time,
                    "doc_id": doc_id,
                    "repeat": repeat,
                    "doc_hash": obj.get("doc_hash"),
                    "prompt_hash": obj.get("prompt_hash"),
                    "target_hash": obj.get("target_hash"),
                    "filters": doc.by_filter,
                    "verdict_from": f"{metric},{order[0]}" if metric and order else None,
                },
            },
        }
        # A metric scores the filtered output of all repeats together (e.g. a majority vote):
        # it is one trace's verdict only when there is one repeat.
        if len(responses) == 1:
            filtered = primary["filtered"]
            answer = filtered[0] if isinstance(filtered, list) and filtered else filtered
            if isinstance(answer, str) and answer.strip() and answer != "[invalid]":
                trace["answer"] = answer
            verdict = _verdict(value)
            if verdict is not None:
                trace["answer_correct"] = verdict
        yield trace
