"""Time the faithfulness app's bookkeeping at the issue's sizes (docs/benchmarks.md, "Faithfulness"):

1. choosing interventions (targets, edits, implied answers) for the 5,276 traces of the demo study;
2. the anytime bookkeeping for 5,276 traces x 7 token budgets: truncation, and the answer checks
   (each truncated point's forced answer read and checked against the gold answer, with the
   model's text stood in by the prefix's last line -- no model call);
3. the evidence report (md, tex, json) of a study with 10 models x 500 traces, judged by the
   mechanistic verifier.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/ra_faithfulness DJANGO_DEBUG=1 \
        .venv/bin/python benchmarks/faithfulness_bench.py [--repeat 3]

Uses (and if missing builds) the demo study and the study "bench 10 models" in that database.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import machine  # noqa: E402

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "reasonaudit.settings")
os.environ.setdefault("CELERY_TASK_ALWAYS_EAGER", "true")

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402

from annotation import services as annotation_services  # noqa: E402
from annotation.importing.pipeline import import_stream  # noqa: E402
from annotation.models import Study, Trace  # noqa: E402
from faithfulness.core import anytime  # noqa: E402
from faithfulness.core.edited_answer import forced_answer_text  # noqa: E402
from faithfulness.core.edits import KINDS  # noqa: E402
from faithfulness.evidence import report  # noqa: E402
from faithfulness.loading import load_traces  # noqa: E402
from faithfulness.planning import plan_anytime, plan_interventions  # noqa: E402
from judges import services as judge_services  # noqa: E402
from judges.models import MECHANISTIC, JudgeConfig  # noqa: E402
from reasonlib.answers import check_answer  # noqa: E402

BENCH = "bench 10 models"
GRID = "tokens:64,128,256,512,1024,2048,full"


def best(fn, repeat: int) -> tuple[float, object]:
    times, value = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        value = fn()
        times.append(time.perf_counter() - t0)
    return min(times), value


def ten_models(demo: Study) -> Study:
    study = Study.objects.filter(name=BENCH).first()
    if study is not None and study.traces.exists():
        return study
    owner = demo.memberships.filter(role="owner").first().user
    study, _ = annotation_services.do_get_or_create_study(BENCH, owner=owner)
    by_problem: dict[str, list[Trace]] = {}
    for t in demo.traces.select_related("problem").prefetch_related("steps").order_by("pk"):
        by_problem.setdefault(t.problem.problem_id, []).append(t)
    lines = []
    for pid in sorted(by_problem)[:500]:
        traces = by_problem[pid]
        p = traces[0].problem
        lines.append({"kind": "problem", "problem_id": pid, "statement": p.statement, "gold_answer": p.gold_answer})
        for m in range(10):
            t = traces[m % len(traces)]
            lines.append({"kind": "trace", "problem_id": pid, "model": f"model-{m}", "trace_id": f"{pid}/model-{m}",
                          "steps": [s.text for s in t.steps.all()] or [t.raw], "answer": t.answer,
                          "regime": {"model": f"model-{m}", "temperature": 0.0, "seed": m, "max_tokens": 512}})
    data = "\n".join(json.dumps(x) for x in lines).encode()
    import io

    report = import_stream(study, io.BytesIO(data), "reasonaudit")
    assert report.committed, report.rejected[:3]
    mech = JudgeConfig.objects.get(study=study, name=MECHANISTIC)
    judge_services.run_inline(judge_services.do_start_run(mech, queue=False))
    return study


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    demo = Study.objects.filter(name="GSM8K demo").first()
    if demo is None:
        call_command("demo", "--password", "demo-pass")
        demo = Study.objects.get(name="GSM8K demo")
    print(machine())
    t_load, traces = best(lambda: load_traces(demo.traces.all(), with_generation=False), args.repeat)
    print(f"load {len(traces)} traces with steps, gold and skeleton checks: {t_load:.2f} s")

    t_plan, plan = best(lambda: plan_interventions(traces, KINDS, per_trace=3, seed=0), args.repeat)
    made = len(plan.interventions)
    print(f"choose interventions for {len(traces)} traces ({made} rows, {len(plan.skipped)} traces skipped, "
          f"kinds {','.join(KINDS)}, per trace 3): {t_plan:.2f} s")

    grid = anytime.parse_grid(GRID)
    gold = {t.pk: t.gold for t in traces}
    texts = {t.pk: t.raw for t in traces}

    def bookkeeping():
        points = plan_anytime(traces, grid)
        checked = 0
        for p in points:
            if not p.within:
                prefix = texts[p.trace_id][: p.prefix_chars]
                answer = forced_answer_text(prefix.rsplit("\n", 1)[-1])
                p.correct = check_answer(answer, gold[p.trace_id]) if answer else False
                checked += 1
        table: dict[int, list] = {}
        for p in points:
            table.setdefault(p.trace_id, [None] * len(grid.budgets))[p.position] = p.correct
        acc = anytime.accuracy(list(table.values()))
        return points, checked, acc

    t_any, (points, checked, acc) = best(bookkeeping, args.repeat)
    print(f"anytime bookkeeping, {len(traces)} traces x {len(grid.budgets)} budgets ({len(points)} points, "
          f"{checked} truncated and checked): {t_any:.2f} s; Acc(b) with the stand-in answers "
          f"{[round(a, 3) for a in acc]}")

    study = ten_models(demo)
    n = study.traces.count()
    for fmt in ("md", "tex", "json"):
        t_rep, text = best(lambda fmt=fmt: report(study, None, fmt), args.repeat)
        print(f"report ({fmt}) of {BENCH!r}: 10 models, {n} traces, mechanistic labels: {t_rep:.2f} s "
              f"({len(text)} characters)")


if __name__ == "__main__":
    main()
