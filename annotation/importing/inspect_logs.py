"""Inspect AI eval logs (``--format inspect``, docs/import-format.md) as canonical records.

The log is read with inspect_ai's own reader (``read_eval_log`` for the header,
``read_eval_log_samples`` for the samples, attachments resolved), never parsed
by hand: the ``.eval`` zip and the ``.json`` layout, their versions and the
attachment indirection are the library's business. One problem per sample id,
one trace per (sample, epoch), trace_id ``inspect/<eval_id>/<sample id>/<epoch>``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, TYPE_CHECKING, Any

from django.conf import settings

from annotation.importing import bounded_zip, regime
from annotation.importing.records import RecordError

if TYPE_CHECKING:
    from inspect_ai.log import EvalLog, EvalSample

Item = tuple[int, "dict[str, Any] | RecordError"]

_ZIP_MAGIC = b"PK\x03\x04"
_RATIO_FREE_BYTES = bounded_zip.RATIO_FREE_BYTES


@contextmanager
def _log_path(stream: IO[bytes]) -> Iterator[tuple[str, str]]:
    """A path to the log (the reader wants one to stream samples) and its layout.

    A stream opened from a file is read in place; an upload or an in-memory
    stream is copied to a temporary file first."""
    stream.seek(0)
    head = stream.read(4)
    stream.seek(0)
    fmt = "eval" if head == _ZIP_MAGIC else "json"
    name = getattr(stream, "name", None)
    if isinstance(name, str) and os.path.isfile(name):
        yield name, fmt
        return
    with tempfile.NamedTemporaryFile(suffix=f".{fmt}") as tmp:
        shutil.copyfileobj(stream, tmp)
        tmp.flush()
        yield tmp.name, fmt


def zip_problem(path: str) -> str | None:
    """Why the ``.eval`` zip at ``path`` must not be read, from its directory alone (nothing is
    decompressed): a member larger than IMPORT_MAX_MEMBER_BYTES, more than
    IMPORT_MAX_UNCOMPRESSED_BYTES in all, or a member that expands more than IMPORT_MAX_ZIP_RATIO
    times (a zip bomb); None when it may be read. The declared sizes are an early refusal only: a
    member may hold more than its entry says, so _bounded_copy counts what it really inflates to."""
    try:
        with zipfile.ZipFile(path) as archive:
            members = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError):
        return None  # not a zip at all: the library's reader says so in its own words
    member_limit = settings.IMPORT_MAX_MEMBER_BYTES
    total_limit = settings.IMPORT_MAX_UNCOMPRESSED_BYTES
    ratio_limit = settings.IMPORT_MAX_ZIP_RATIO
    total = 0
    for member in members:
        if member.file_size > member_limit:
            return (f"member {member.filename!r} of the .eval file expands to {member.file_size:,} bytes, more than "
                    f"{member_limit:,} (REASONAUDIT_IMPORT_MAX_MEMBER_BYTES)")
        # Small members may compress well (a run of blanks); the ratio matters where memory does.
        if member.file_size > _RATIO_FREE_BYTES and member.file_size > ratio_limit * max(1, member.compress_size):
            return (f"member {member.filename!r} of the .eval file expands {member.file_size / max(1, member.compress_size):,.0f} "
                    f"times ({member.compress_size:,} to {member.file_size:,} bytes), more than {ratio_limit} "
                    f"(REASONAUDIT_IMPORT_MAX_ZIP_RATIO)")
        total += member.file_size
        if total > total_limit:
            return (f"the .eval file expands to more than {total_limit:,} bytes (at member {member.filename!r}; "
                    f"REASONAUDIT_IMPORT_MAX_UNCOMPRESSED_BYTES)")
    return None


@contextmanager
def _bounded_copy(path: str, fmt: str) -> Iterator[tuple[str, str | None]]:
    """The path the reader may read and None, or a refusal: a ``.eval`` zip is re-packed from what
    its members actually inflate to (annotation.importing.bounded_zip), so inspect_ai's reader --
    which inflates a member's whole stream whatever the directory says -- reads no more than the
    caps let through. The directory's sizes are checked first (zip_problem): a cheap early refusal."""
    if fmt != "eval":
        yield path, None
        return
    problem = zip_problem(path)
    if problem is not None:
        yield path, problem
        return
    caps = bounded_zip.ZipCaps(settings.IMPORT_MAX_MEMBER_BYTES, settings.IMPORT_MAX_UNCOMPRESSED_BYTES,
                               settings.IMPORT_MAX_ZIP_RATIO)
    with tempfile.NamedTemporaryFile(suffix=".eval") as copy:
        try:
            bounded_zip.repack(path, copy, caps)
        except bounded_zip.ZipRefused as exc:
            yield path, str(exc)
            return
        copy.flush()
        yield copy.name, None


def records(stream: IO[bytes]) -> Iterator[Item]:
    # inspect_ai takes ~2 s to import: load it only when an Inspect log is imported,
    # not in every process that imports the pipeline.
    from inspect_ai import __version__ as inspect_version
    from inspect_ai._util.constants import LOG_SCHEMA_VERSION
    from inspect_ai.log import read_eval_log, read_eval_log_samples

    with _log_path(stream) as (original, fmt), _bounded_copy(original, fmt) as (path, problem):
        if problem is not None:
            yield 0, RecordError(problem)
            return
        try:
            header = read_eval_log(path, header_only=True, format=fmt)
        except Exception as exc:  # any failure of the library's reader means "not a log it reads"
            yield 0, RecordError(
                f"not an Inspect log that inspect_ai {inspect_version} can read ({_reason(exc)})"
            )
            return
        # The .json reader refuses a newer format version itself; the .eval reader does not check.
        if header.version > LOG_SCHEMA_VERSION:
            yield 0, RecordError(
                f"Inspect log format version {header.version}: inspect_ai {inspect_version} reads versions up to "
                f"{LOG_SCHEMA_VERSION}; upgrade inspect-ai to import it"
            )
            return
        try:
            if fmt == "eval" and header.eval.dataset.sample_ids is not None:
                # Streams one sample at a time out of the zip.
                samples: Any = read_eval_log_samples(
                    path, all_samples_required=False, resolve_attachments=True, format=fmt
                )
            else:
                # A .json log is one document: reading it once beats re-reading it per sample.
                samples = iter(read_eval_log(path, resolve_attachments=True, format=fmt).samples or [])
        except Exception as exc:  # as for the header
            yield 0, RecordError(f"the samples of this Inspect log cannot be read ({_reason(exc)})")
            return
        seen_problems: set[str] = set()
        position = 0
        while True:
            position += 1
            try:
                sample = next(samples)
            except StopIteration:
                return
            except Exception as exc:  # a sample the reader cannot load ends the log, with the reason
                yield position, RecordError(f"sample {position}: unreadable ({_reason(exc)})")
                return
            try:
                for record in sample_records(header, sample, seen_problems):
                    yield position, record
            except RecordError as exc:
                yield position, exc
            except (TypeError, ValueError, AttributeError, KeyError, IndexError) as exc:
                # A sample the reader accepted but of a shape this importer does not know: a bad sample, not a crash.
                yield position, RecordError(f"unexpected shape for an Inspect sample ({type(exc).__name__}: {exc})")


def _reason(exc: BaseException) -> str:
    """The innermost cause, first line: the library wraps the useful part
    ("Unable to read version 3 of log format.") in "Unable to read log file: <path>"."""
    seen = {id(exc)}
    while (inner := exc.__cause__ or exc.__context__) is not None and id(inner) not in seen:
        seen.add(id(inner))
        exc = inner
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else 'no detail'}"


def _message_chars(message: Any) -> int:
    """The length of a chat message's text, without building it (a message of many parts, each a
    resolved attachment, would join into one huge string)."""
    content = getattr(message, "content", "")
    if isinstance(content, str):
        return len(content)
    return sum(len(getattr(part, "text", None) or "") for part in content or [])


def _input_text(value: Any, sample_id: Any = None) -> str:
    if isinstance(value, str):
        return value
    # A list of chat messages: the problem is what the user said.
    said = [m for m in value if getattr(m, "role", "") == "user"]
    size = sum(_message_chars(m) for m in said)
    limit = settings.IMPORT_MAX_STATEMENT_CHARS
    if size > limit:
        # Counted before joining: attachments resolved into many messages repeat one text many times.
        raise RecordError(f'sample "{sample_id}": its input is {size:,} characters long with attachments resolved, '
                          f"more than {limit:,} (REASONAUDIT_IMPORT_MAX_STATEMENT_CHARS)")
    return "\n\n".join(m.text for m in said if m.text)


def _target(value: Any) -> str:
    if isinstance(value, list):
        return str(value[0]) if value else ""
    return str(value or "")


def _score(header: EvalLog, sample: EvalSample) -> tuple[str | None, Any]:
    """The scorer whose verdict is the imported correctness: the log's first scorer."""
    if not sample.scores:
        return None, None
    names = [s.name for s in (header.results.scores if header.results else [])]
    name = next((n for n in names if n in sample.scores), next(iter(sample.scores)))
    return name, sample.scores[name]


def _correct(score: Any) -> bool | None:
    from inspect_ai.scorer import value_to_float

    if score is None or isinstance(score.value, (dict, list)):
        return None
    try:
        value = value_to_float()(score.value)
    except (TypeError, ValueError):
        return None
    # Partial credit is neither: the pipeline's own check decides then.
    return True if value == 1.0 else False if value == 0.0 else None


def _last_model_event(sample: EvalSample) -> Any:
    return next((e for e in reversed(sample.events or []) if getattr(e, "event", None) == "model"), None)


def _api_kind(request: dict[str, Any]) -> str | None:
    if "messages" in request:
        return "chat"
    if "prompt" in request:
        return "completions"
    if "input" in request:
        return "responses"
    return None


def _regime(header: EvalLog, sample: EvalSample) -> dict[str, Any]:
    event = _last_model_event(sample)
    request: dict[str, Any] = (event.call.request if event is not None and event.call is not None else None) or {}
    # The config the call was made with; the log header's merge of task and eval config when events are absent.
    config = event.config if event is not None else header.plan.config.merge(header.eval.model_generate_config)
    chat: Any = None
    if isinstance(request.get("messages"), list):
        messages: Any = request["messages"]
        size = regime.prompt_chars(messages)
    else:
        chat = event.input if event is not None else sample.messages[:-1]
        size = sum(_message_chars(m) for m in chat)
    if size > settings.IMPORT_MAX_PROMPT_CHARS:
        # Counted before anything is joined or hashed: resolved attachments repeat one text many times.
        raise RecordError(f'sample "{sample.id}": its prompt messages are {size:,} characters long with attachments '
                          f"resolved, more than {settings.IMPORT_MAX_PROMPT_CHARS:,} "
                          "(REASONAUDIT_IMPORT_MAX_PROMPT_CHARS)")
    if chat is not None:
        messages = [{"role": m.role, "content": m.text} for m in chat]
    tools = sorted({t.name for t in (event.tools if event is not None else [])})
    steps = [{"solver": s.solver, "params": s.params} for s in header.plan.steps]
    plan_hash = hashlib.sha256(json.dumps(steps, sort_keys=True, default=str).encode()).hexdigest()[:12]
    revision = header.eval.revision
    code = f"inspect_ai {header.eval.packages.get('inspect_ai', '?')}"
    if revision is not None and revision.commit:
        code += f" (task {revision.origin or 'repo'}@{revision.commit}{', dirty' if revision.dirty else ''})"
    output_model = sample.output.model if sample.output else None
    return regime.regime(
        model=output_model or header.eval.model,
        base_url_host=regime.host_of(header.eval.model_base_url),
        api=_api_kind(request),
        prompt_template=f"{header.eval.task}:{'+'.join(s.solver for s in header.plan.steps)}",
        prompt_template_version=f"{header.eval.task_version}/{plan_hash}",
        messages_hash=regime.messages_hash(messages),
        temperature=config.temperature,
        top_p=config.top_p,
        seed=config.seed,
        max_tokens=config.max_tokens,
        stop=config.stop_seqs,
        k=header.eval.config.epochs or 1,
        tool_access=", ".join(tools) if tools else "none",
        continuation="none",
        code_version=code,
        source="inspect",
        provider_model=header.eval.model,
        epoch=sample.epoch,
    )


def regime_with_thought_tokens(values: dict[str, Any], usage: Any) -> dict[str, Any]:
    """The regime plus the thought's token count when the provider reported it (``reasoning_tokens``)."""
    tokens = getattr(usage, "reasoning_tokens", None) if usage is not None else None
    return {**values, "thought_tokens": tokens} if tokens is not None else values


def sample_records(header: EvalLog, sample: EvalSample, seen_problems: set[str]) -> Iterator[dict[str, Any]]:
    """The problem (once per sample id) and the trace of one (sample, epoch)."""
    from inspect_ai.model import ContentReasoning

    ev = header.eval
    problem_id = f"{ev.dataset.name or ev.task}/{sample.id}"
    if problem_id not in seen_problems:
        seen_problems.add(problem_id)
        statement = _input_text(sample.input, sample.id)
        if not statement.strip():
            raise RecordError(f'sample "{sample.id}": its input has no user text to use as the problem')
        yield {
            "kind": "problem",
            "problem_id": problem_id,
            "statement": statement,
            "gold_answer": _target(sample.target),
            "tags": ["inspect", ev.task],
        }
    message = sample.output.choices[0].message if sample.output and sample.output.choices else None
    # Every reasoning block in order, as reasonlib.thinking takes them. Redacted reasoning is ciphertext:
    # only the provider's summary is kept (flagged), never the blob.
    blocks: list[dict[str, Any]] = []
    redacted = False
    if message is not None and not isinstance(message.content, str):
        for part in message.content:
            if isinstance(part, ContentReasoning):
                summary = getattr(part, "summary", None) or ""
                if part.redacted:
                    blocks.append({"text": summary, "redacted": True, "summary": bool(summary.strip())})
                elif part.reasoning.strip():
                    blocks.append({"text": part.reasoning})
                elif summary.strip():
                    blocks.append({"text": summary, "summary": True})
                redacted = redacted or part.redacted
    scorer, score = _score(header, sample)
    usage = sample.output.usage if sample.output else None
    meta: dict[str, Any] = {
        "inspect": {
            "eval_id": ev.eval_id,
            "run_id": ev.run_id,
            "task": ev.task,
            "sample_id": sample.id,
            "epoch": sample.epoch,
            "log_status": header.status,
            "scores": {name: s.value for name, s in (sample.scores or {}).items()},
            "scorer": scorer,
        },
    }
    if usage is not None:
        meta["input_tokens"], meta["output_tokens"] = usage.input_tokens, usage.output_tokens
    if redacted:
        meta["reasoning_redacted"] = True
    if sample.output is not None and getattr(sample.output, "stop_reason", None) == "max_tokens":
        meta["truncated"] = True  # cut by max_tokens: a thought with no answer is a truncated one
    if sample.error is not None:
        meta["error"] = sample.error.message
    if isinstance(sample.target, list) and len(sample.target) > 1:
        meta["targets"] = list(sample.target)
    trace: dict[str, Any] = {
        "kind": "trace",
        "problem_id": problem_id,
        "model": ev.model,
        "trace_id": f"inspect/{ev.eval_id}/{sample.id}/{sample.epoch}",
        "raw": sample.output.completion if sample.output else "",
        "thought_blocks": blocks,
        "regime": regime_with_thought_tokens(_regime(header, sample), usage),
        "meta": meta,
    }
    if score is not None and score.answer:
        trace["answer"] = score.answer
    correct = _correct(score)
    if correct is not None:
        trace["answer_correct"] = correct
    yield trace
