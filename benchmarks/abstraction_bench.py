"""Abstraction benchmark (issue 11): generating and storing the full benchmark, and aggregating a table.

1. ``generate``: in a fresh process on a fresh SQLite database, a study with 1,319 GSM8K-shaped problems
   (MA), then ``do_generate_benchmark`` of all 9,095 items with both modes' prompts rendered and hashed;
   wall time and peak RSS of the process; the same at 1/4 of the size (flat memory: a batch at a time).
2. ``aggregate``: the pure core over 100 models x 9,095 items (909,500 verdicts), point estimates; then one
   model's 1,000-resample paired bootstrap.

    .venv/bin/python benchmarks/abstraction_bench.py
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._util import PY, machine, run_usage  # noqa: E402

CHILD = r"""
import os, sys, time, json
import django
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "reasonaudit.settings")
django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0)
from annotation.models import Problem, Study
from abstraction import services
study = Study.objects.create(name="bench")
n_ma = int(sys.argv[1]); per = None if sys.argv[2] == "full" else int(sys.argv[2])
Problem.objects.bulk_create([Problem(study=study, problem_id=f"gsm8k-{i:04d}", statement=f"Problem {i}: what is {i} + {i}?",
                                     gold_answer=str(2 * i)) for i in range(n_ma)])
t = time.perf_counter()
bench = services.do_generate_benchmark(study, per_sub_dataset=per)
print(json.dumps({"seconds": time.perf_counter() - t, "counts": bench.counts,
                  "items": sum(bench.counts.values())}))
"""


def generate(label: str, n_ma: int, per: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        env = {"DATABASE_URL": f"sqlite:///{tmp}/bench.sqlite3", "DJANGO_DEBUG": "1", "REASONAUDIT_DATA_DIR": tmp}
        wall, cpu, peak, out = run_usage([PY, "-c", CHILD, str(n_ma), per], env)
        line = out.strip().splitlines()[-1]
        print(f"{label}: process {wall:.1f} s wall ({cpu:.1f} s CPU), peak RSS {peak} MiB; {line}")


def aggregate() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "reasonaudit.settings")
    import numpy as np
    import pandas as pd

    from abstraction.core import aggregate as agg
    from abstraction.core import generators as g

    subs = [(s, *g.classify(s)) for c in g.CATEGORIES for s in g.sub_datasets(c)]
    rng = np.random.default_rng(0)
    frames = []
    for s, cat, task, variant in subs:
        n = 1319 if cat == "MA" else 96
        frames.append(pd.DataFrame({"sub_dataset": s, "category": cat, "task": task, "variant": variant,
                                    "instance": np.arange(n)}))
    items = pd.concat(frames, ignore_index=True)
    models = 100
    df = pd.concat([items.assign(model=f"m{k:03d}") for k in range(models)], ignore_index=True)
    df["correct"] = (rng.random(len(df)) < 0.4).astype(int)
    for col in ("model", "sub_dataset", "category", "task", "variant"):
        df[col] = df[col].astype("category")
    times = []
    for _ in range(3):
        t = time.perf_counter()
        res = agg.aggregate(df)
        times.append(time.perf_counter() - t)
    print(f"aggregate {models} models x {len(items)} items ({len(df):,} verdicts), point estimates: "
          + ", ".join(f"{x:.2f}" for x in times) + f" s ({len(res)} rows)")
    one = df[df["model"] == "m000"]
    t = time.perf_counter()
    agg.aggregate(one, n_resamples=1000)
    print(f"one model, 1,000 paired bootstrap resamples: {time.perf_counter() - t:.2f} s")


if __name__ == "__main__":
    print(machine())
    generate("full benchmark (9,095 items, both modes' prompts)", 1319, "full")
    generate("quarter size (per-sub-dataset 24, 330 GSM8K)", 330, "24")
    aggregate()
