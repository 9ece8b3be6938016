"""Every operation of the abstraction benchmark (docs/abstraction.md): generating a benchmark version,
the prompt templates, the results as a table, the paired items. Web views, the REST API and the
commands call these."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
from django.db import transaction
from django.db.models import Count, Q, QuerySet
from django.utils import timezone

from abstraction.core import aggregate as agg
from abstraction.core import checker
from abstraction.core import generators as gen
from abstraction.models import AbstractionRun, Benchmark, Item, Result
from abstraction.prompting import prompt_texts, render
from abstraction.runclient import JOB_KIND, KIND
from annotation import jobs
from annotation.importing.regime import messages_hash
from annotation.models import Job, Problem, Study
from judges.models import JudgeConfig
from runs import engine
from runs.engine import ACTIVE
from runs.outbound import redact_url
from runs.params import check as check_param
from subjects.models import SubjectModel

BATCH = 2000
PROBLEM_PREFIX = "abs/"
Progress = Callable[[int, int], None]

def ma_problems(study: Study) -> list[gen.Problem]:
    """MA = the study's GSM8K problems: every problem with a gold answer that this app did not create."""
    rows = (Problem.objects.filter(study=study).exclude(problem_id__startswith=PROBLEM_PREFIX)
            .exclude(gold_answer="").order_by("problem_id").values_list("problem_id", "statement", "gold_answer"))
    return [gen.Problem(pid, statement, gold) for pid, statement, gold in rows]


def default_name(seed: int, remap_mode: str, sma_mode: str) -> str:
    return f"seed{seed}-{remap_mode}-{sma_mode}"


@transaction.atomic
def do_generate_benchmark(study: Study, *, name: str | None = None, seed: int = gen.DEFAULT_SEED,
                          remap_mode: str = "repo", sma_mode: str = "paper",
                          categories: Sequence[str] = gen.CATEGORIES, per_sub_dataset: int | None = None,
                          progress: Progress | None = None) -> Benchmark:
    """Generate and store one benchmark version (items with both modes' prompt hashes). An existing
    version of the same name is returned as it is if it was made with the same parameters."""
    name = name or default_name(seed, remap_mode, sma_mode)
    params = {"seed": seed, "generator_version": gen.GENERATOR_VERSION, "remap_mode": remap_mode,
              "sma_mode": sma_mode}
    existing = Benchmark.objects.filter(study=study, name=name).first()
    if existing is not None:
        have = {k: getattr(existing, k) for k in params}
        if have != params:
            raise ValueError(f"benchmark {name!r} exists with other parameters ({have}); choose another name")
        return existing
    cats = [c for c in gen.CATEGORIES if c in categories]
    ma = ma_problems(study) if "MA" in cats else []
    bench = Benchmark.objects.create(study=study, name=name, source=Benchmark.Source.GENERATED, categories=cats,
                                     per_sub_dataset=per_sub_dataset,
                                     meta={"ma_problems": len(ma), "checker_version": checker.CHECKER_VERSION},
                                     **params)
    texts = prompt_texts(study)
    expected = _expected_total(cats, per_sub_dataset, len(ma))
    counts: dict[str, int] = {}
    batch: list[Item] = []
    done = 0
    for inst in gen.generate(cats, seed=seed, remap_mode=remap_mode, sma_mode=sma_mode, ma_problems=ma,
                             per_sub_dataset=per_sub_dataset):
        batch.append(Item(
            benchmark=bench, category=inst.category, sub_dataset=inst.sub_dataset, task=inst.task,
            variant=inst.variant, instance=inst.index, question=inst.question, answer=inst.answer, hint=inst.hint,
            operator=inst.operator, examples=[list(e) for e in inst.examples],
            remap=inst.remap.as_dict() if inst.remap else {},
            dp_hash=messages_hash(render(inst, "dp", texts)), cot_hash=messages_hash(render(inst, "cot", texts)),
            meta=inst.meta,
        ))
        counts[inst.category] = counts.get(inst.category, 0) + 1
        if len(batch) >= BATCH:
            Item.objects.bulk_create(batch)
            done += len(batch)
            batch = []  # flat memory: a batch at a time
            if progress:
                progress(done, expected)
    if batch:
        Item.objects.bulk_create(batch)
        done += len(batch)
    if progress:
        progress(done, expected)
    bench.counts = counts
    bench.save(update_fields=["counts"])
    return bench


def _expected_total(cats: Sequence[str], n: int | None, n_ma: int) -> int:
    per = gen.N_ITEMS if n is None else min(n, gen.N_ITEMS)
    total = sum(len(gen.sub_datasets(c)) * per for c in cats if c != "MA")
    return total + (min(n_ma, n) if n is not None else n_ma) * ("MA" in cats)


def select_items(bench: Benchmark, categories: Iterable[str] | None = None,
                 per_sub_dataset: int | None = None) -> QuerySet[Item]:
    items = bench.items.all()
    if categories:
        items = items.filter(category__in=list(categories))
    if per_sub_dataset is not None:
        items = items.filter(instance__lt=per_sub_dataset)
    return items


# --------------------------------------------------------------------------- results and the table

def results_frame(study: Study, *, benchmark: Benchmark | None = None) -> pd.DataFrame:
    """One row per (result): what abstraction.core.aggregate reads; ``model`` is "name (mode)"."""
    qs = Result.objects.filter(item__benchmark__study=study)
    if benchmark is not None:
        qs = qs.filter(item__benchmark=benchmark)
    rows = list(qs.values_list("model", "mode", "item__sub_dataset", "item__category", "item__task",
                               "item__variant", "item__instance", "correct", "checker"))
    df = pd.DataFrame(rows, columns=["name", "mode", "sub_dataset", "category", "task", "variant", "instance",
                                     "correct", "checker"])
    if df.empty:
        return df.assign(model=pd.Series(dtype=str))
    df["correct"] = df["correct"].astype(int)
    df["model"] = df["name"] + " (" + df["mode"].map({"dp": "DP", "cot": "CoT"}) + ")"
    return df


@dataclass
class TableRow:
    model: str
    checker: str
    n_items: int
    result: agg.ModelResult

    def cells(self) -> list[dict]:
        out = []
        for key in (*gen.CATEGORIES, "AVG", "delta_op", "delta_num", "delta_all", "F"):
            value = self.result.stats.get(key)
            out.append({"key": key, "value": value, "shown": agg.truncate2(value),
                        "interval": self.result.intervals.get(key)})
        return out

    def as_dict(self) -> dict:
        return {"model": self.model, "checker": self.checker, "n_items": self.n_items, **self.result.as_dict()}


def table(study: Study, *, benchmark: Benchmark | None = None, n_resamples: int = 1000, seed: int = 0,
          level: float = 0.95) -> list[TableRow]:
    df = results_frame(study, benchmark=benchmark)
    if df.empty:
        return []
    checkers = df.groupby("model")["checker"].agg(lambda s: ", ".join(sorted(set(s))))
    counts = df.groupby("model").size()
    return [TableRow(r.model, checkers[r.model], int(counts[r.model]), r)
            for r in agg.aggregate(df, n_resamples=n_resamples, level=level, seed=seed)]


def benchmarks_of(study: Study) -> QuerySet[Benchmark]:
    return Benchmark.objects.filter(study=study).order_by("name")


def paired_items(study: Study, *, benchmark: Benchmark, task: str, instance: int) -> dict[str, Any]:
    """The raw item of a paired task and its remapped variants with every model's outputs side by side."""
    items = list(Item.objects.filter(benchmark=benchmark, task=task, instance=instance)
                 .filter(Q(category="EC") | Q(category="SR")).order_by("variant"))
    order = {"raw": 0, "all": 1, "num": 2, "op": 3}
    items.sort(key=lambda i: order.get(i.variant, 9))
    results = (Result.objects.filter(item__in=items).select_related("trace")
               .order_by("model", "mode"))
    by_item: dict[int, dict[str, Result]] = {}
    models: list[str] = []
    for r in results:
        label = f"{r.model} ({r.get_mode_display()})"
        by_item.setdefault(r.item_id, {})[label] = r
        if label not in models:
            models.append(label)
    return {"items": items, "models": models, "by_item": by_item}


def manifest(study: Study, benchmark: Benchmark | None, rows: list[TableRow], code_version: str) -> dict[str, Any]:
    benches = [benchmark] if benchmark else list(benchmarks_of(study))
    regimes = {}
    for r in Result.objects.filter(item__benchmark__in=benches).exclude(regime={}).values("model", "mode", "regime"):
        regimes.setdefault(f"{r['model']} ({r['mode']})", r["regime"])
    return {"kind": "abstraction", "study": study.name, "benchmarks": [b.describe() for b in benches],
            "checker_version": checker.CHECKER_VERSION, "checkers": {r.model: r.checker for r in rows},
            "regimes": regimes, "code_version": code_version,
            "aggregation": "spec §3.4: AVG over every sub-dataset present; Δ over the paired EC/SR tasks",
            "f_weights": [0.5, 0.5]}


def dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, default=str)


# --------------------------------------------------------------------------- runs

def result_label(subject: SubjectModel, max_examples: int | None) -> str:
    """The model name results are kept under: a run with fewer worked examples is another row."""
    return subject.name if max_examples is None else f"{subject.name}@{max_examples}ex"


def run_config(subject: SubjectModel, bench: Benchmark, modes: Sequence[str], checker_name: str,
               max_examples: int | None = None) -> dict[str, Any]:
    return {
        "name": subject.name, "label": result_label(subject, max_examples), "max_examples": max_examples, "version": subject.version, "base_url": redact_url(subject.base_url), "model": subject.model,
        "temperature": subject.temperature, "top_p": subject.top_p, "seed": subject.seed,
        "max_tokens": subject.max_tokens, "stop": list(subject.stop or []), "modes": list(modes),
        "prompts": prompt_texts(bench.study), "benchmark": bench.name, "benchmark_seed": bench.seed,
        "generator_version": bench.generator_version, "remap_mode": bench.remap_mode, "checker": checker_name,
        "thinking": subject.thinking, "thinking_switch": subject.thinking_switch,
        "reasoning_effort": subject.reasoning_effort, "thinking_budget": subject.thinking_budget,
    }


def do_start_run(subject: SubjectModel, bench: Benchmark, *, modes: Sequence[str] = ("dp",),
                 categories: Sequence[str] | None = None, per_sub_dataset: int | None = None,
                 judge: JudgeConfig | None = None, max_examples: int | None = None, force: bool = False, budget_usd: float | None = None,
                 user=None, queue: bool = True) -> AbstractionRun:
    """Create the job and the run over the selected items (both modes as the requests of one item);
    queue its first chunk after commit (``queue=False`` leaves it to run_inline). Items already answered
    by this configuration are run again only with ``force`` (a resumed run asks only for the rest)."""
    bad = [m for m in modes if m not in ("dp", "cot")]
    if bad or not modes:
        raise ValueError("modes: choose dp, cot or both")
    if judge is not None and judge.study_id != bench.study_id:
        raise ValueError("the LLM checker must be a judge configuration of the same study")
    if bench.study_id != subject.study_id:
        raise ValueError("the benchmark and the subject model belong to different studies")
    max_examples = check_param("max_examples", max_examples)
    per_sub_dataset = check_param("per_sub_dataset", per_sub_dataset)
    if subject.api != SubjectModel.Api.CHAT:
        raise ValueError("the abstraction benchmark sends chat messages: use a subject model with api=chat")
    checker_name = Result.Checker.LLM if judge is not None else Result.Checker.DETERMINISTIC

    def busy() -> str | None:
        active = AbstractionRun.objects.filter(subject=subject, job__status__in=ACTIVE).first()
        return active and (f"subject model {subject.name} already has abstraction run {active.pk} in progress "
                           f"(job {active.job_id}); wait for it or cancel it")

    def selected(_arun: AbstractionRun) -> list[int]:
        items = select_items(bench, categories, per_sub_dataset)
        if not force:
            # Resumable: what this configuration answered in every requested mode is not asked again.
            done = (Result.objects.filter(item__benchmark=bench, model=result_label(subject, max_examples),
                                          mode__in=list(modes),
                                          regime__subject_model_version=subject.version)
                    .values("item_id").annotate(n=Count("pk")).filter(n__gte=len(modes)).values("item_id"))
            items = items.exclude(pk__in=done)
        return list(items.order_by("pk").values_list("pk", flat=True))

    def record(job: Job, run) -> AbstractionRun:
        return AbstractionRun.objects.create(job=job, run=run, benchmark=bench, subject=subject, modes=list(modes),
                                             checker=checker_name, judge=judge)

    return engine.start(
        KIND, study_id=subject.study_id, job_kind=JOB_KIND, user=user, busy=busy, record=record, items=selected,
        force=force, budget_usd=budget_usd, config=run_config(subject, bench, modes, checker_name, max_examples),
        queue=queue,
        params={"subject_model": subject.name, "benchmark": bench.name, "modes": list(modes),
                "categories": list(categories or []), "per_sub_dataset": per_sub_dataset, "checker": checker_name,
                "force": force, "max_examples": max_examples, "started": timezone.now().isoformat()})


def run_inline(record: AbstractionRun, *, progress: Progress | None = None) -> Job:
    return engine.run_inline(record.run, progress=progress)


def active_runs(subject: SubjectModel) -> QuerySet[AbstractionRun]:
    return AbstractionRun.objects.filter(subject=subject, job__status__in=ACTIVE).select_related("job")


def cancel(record: AbstractionRun) -> Job:
    return jobs.cancel(record.job)
