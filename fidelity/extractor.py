"""The optional LLM logical-form extractor (spec §7): a judge configuration's model reads the
forward steps of a fidelity run's originals and returns one (subject, relation, object, values)
per step. A run of the run engine (kind ``fidelity-forms``): an item is an ``Output``; the
forms are stored on it with the extractor's name, and the report uses them instead of the
heuristic ones (the provenance says which, and how many).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fidelity.core.logic import LogicalForm
from fidelity.core.text import split_steps
from fidelity.models import FidelityRun, Output
from judges.models import JudgeConfig
from judges.protocol import MalformedOutput, extract_json
from judges.providers.openai_compat import endpoint
from runs import cache as run_cache
from runs import engine
from runs.clients import ItemOutcome, RunClient, Sizing
from runs.models import Run
from runs.pooled import PooledWork
from runs.transport import Malformed, ModelPool, ModelRequest

KIND = "fidelity-forms"
PROMPT_VERSION = 1
PROMPT = ("Extract one logical form from each numbered reasoning step below: its subject, its relation (the main "
          "verb or operation), its object, and the values (numbers, years, dates) it mentions. Answer with JSON "
          '{{"forms": [{{"subject": ..., "relation": ..., "object": ..., "values": [...]}}, ...]}} holding exactly '
          "{n} forms, in step order.\n\n{steps}")


def source_name(judge: JudgeConfig) -> str:
    return f"llm:{judge.name} v{judge.version}"


def schema(n: int) -> dict[str, Any]:
    form = {"type": "object", "properties": {"subject": {"type": "string"}, "relation": {"type": "string"},
                                             "object": {"type": "string"},
                                             "values": {"type": "array", "items": {"type": "string"}}},
            "required": ["subject", "relation", "object", "values"]}
    return {"type": "object", "properties": {"forms": {"type": "array", "items": form, "minItems": n, "maxItems": n}},
            "required": ["forms"]}


def parse_forms(content: str, n: int) -> list[dict]:
    """The answer's forms, normalised; Malformed (tried again) unless there is exactly one per step."""
    try:
        data = extract_json(content)
    except (MalformedOutput, ValueError) as exc:
        raise Malformed(f"no JSON object: {exc}") from None
    forms = data.get("forms") if isinstance(data, dict) else None
    if not isinstance(forms, list) or len(forms) != n or not all(isinstance(f, dict) for f in forms):
        raise Malformed(f"expected {n} forms")
    return [LogicalForm.from_dict(f).to_dict() for f in forms]


class FormsWork(PooledWork):
    def __init__(self, run: Run) -> None:
        self.run = run
        self.judge = JudgeConfig.objects.get(pk=run.config["judge"])

    def load(self, items: Sequence[int]) -> list[tuple[int, list[str]]]:
        texts = dict(Output.objects.filter(pk__in=items).values_list("pk", "text"))
        return [(pk, split_steps(texts[pk])) for pk in items if pk in texts]

    def open_pool(self) -> ModelPool:
        scope = f"fidelity-forms:{self.judge.pk}:v{self.judge.version}:p{PROMPT_VERSION}"
        return ModelPool(endpoint(self.judge), scope, run_cache.DbStore(scope, force=self.run.force),
                         force=self.run.force)

    def item_id(self, item: tuple[int, list[str]]) -> int:
        return item[0]

    def request(self, item: tuple[int, list[str]]) -> ModelRequest:
        pk, steps = item
        n = len(steps)
        text = PROMPT.format(n=n, steps="\n".join(f"{i}. {s}" for i, s in enumerate(steps, 1)))
        body = {"messages": [{"role": "user", "content": text}], "temperature": self.judge.temperature,
                "max_tokens": self.judge.max_tokens}
        return ModelRequest(item=pk, build=lambda _mode: dict(body), parse=lambda c: parse_forms(c, n),
                            schema=schema(n), schema_name="logical_forms")

    def commit(self, outcomes: Sequence[ItemOutcome]) -> None:
        name = source_name(self.judge)
        for o in outcomes:
            if o.result is not None:
                Output.objects.filter(pk=o.item).update(forms=o.result, forms_source=name)


class FormsClient(RunClient):
    kind = KIND
    noun = "trace"
    label = "Fidelity logical forms"

    def page(self, run: Run) -> str | None:
        from django.urls import reverse

        return reverse("fidelity-report", args=[run.config["fidelity_run"]]) if run.config.get("fidelity_run") else None

    def sizing(self, run: Run) -> Sizing:
        return Sizing(target_requests=40)

    def open(self, run: Run) -> FormsWork:
        return FormsWork(run)


def do_start_extraction(record: FidelityRun, judge: JudgeConfig, *, user=None, force: bool = False,
                        queue: bool = True) -> Run:
    """A run extracting the logical forms of the run's originals' forward steps with ``judge``'s model."""
    if judge.study_id != record.suite.study_id:
        raise ValueError("the judge configuration belongs to another study")
    if judge.provider != JudgeConfig.Provider.LLM:
        raise ValueError(f"judge {judge.name} is not an LLM judge")
    originals = record.run.config.get("originals", [])
    items = [pk for pk, text in Output.objects.filter(fid_run=record, role=Output.Role.FORWARD,
                                                      problem_id__in=originals).values_list("pk", "text")
             if split_steps(text)]

    def busy() -> str | None:
        active = Run.objects.filter(kind=KIND, job__status__in=engine.ACTIVE,
                                    job__params__fidelity_run=record.pk).first()
        return active and (f"fidelity run {record.pk} already has a forms extraction in progress "
                           f"(job {active.job_id}); wait for it or cancel it")

    # The engine's Run is this kind's record: the extraction keeps nothing of its own.
    return engine.start(
        KIND, study_id=record.suite.study_id, job_kind=KIND, user=user, busy=busy, record=lambda job, run: run,
        items=items, force=force, queue=queue,
        params={"fidelity_run": record.pk, "judge": judge.name},
        config={"judge": judge.pk, "judge_version": judge.version, "model": judge.model,
                "fidelity_run": record.pk, "prompt_version": PROMPT_VERSION})


def forms_of(output: Output | None, n_steps: int) -> tuple[list[LogicalForm] | None, str]:
    """The stored LLM forms of an output when they match its steps (else None: use the heuristic)."""
    if output is None or not output.forms or len(output.forms) != n_steps:
        return None, ""
    return [LogicalForm.from_dict(f) for f in output.forms], output.forms_source
