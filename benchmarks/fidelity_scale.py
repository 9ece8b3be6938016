"""Fidelity diagnostics at the issue's sizes (docs/fidelity.md, docs/benchmarks.md).

1. Variant generation for the 1,319 GSM8K test problems x 9 strategies (5 perturbations,
   4 counterfactuals) with counterfactual golds derived through the calculator chain:
   the pure core alone, then ``do_create_suite`` end to end (Problem + Variant rows) on a
   fresh SQLite database (or --database-url).
2. Metrics for 10,000 (original, variant) pairs: the five Table-1 rows over 2,000 pairs each
   (TF-IDF semantic consistency included) and the counterfactual indicators (CP, RA, AA, SC)
   of 10,000 pairs, on texts made from the GSM8K model solutions.

    python benchmarks/fidelity_scale.py [--database-url URL]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import tempfile
import time
from fractions import Fraction
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
DEMO = ROOT / "annotation" / "demo_data" / "gsm8k" / "example_model_solutions.jsonl"


def load() -> list[dict]:
    return [json.loads(line) for line in DEMO.read_text().splitlines() if line.strip()]


def pure_generation(items: list[dict]) -> tuple[float, int, int, int]:
    from fidelity.core import gold, variants

    entities = variants.entities_of([d["question"] for d in items])
    made = derived = skipped = 0
    t0 = time.perf_counter()
    for i, d in enumerate(items):
        answer = d["ground_truth"].strip().split("\n")[-1].replace("A:", "").strip()
        for s in variants.STRATEGIES:
            v = variants.make_variant(d["question"], s, variants.seed_for(0, i, s), entities)
            if isinstance(v, variants.Skip):
                skipped += 1
                continue
            made += 1
            if s in variants.COUNTERFACTUALS:
                derived += gold.derive(v.substitutions, answer, solution=d["ground_truth"]).derived
    return time.perf_counter() - t0, made, derived, skipped


def suite_end_to_end(database_url: str | None) -> tuple[float, dict]:
    tmp = tempfile.mkdtemp(prefix="fidelity-bench-")
    os.environ.setdefault("DJANGO_DEBUG", "1")
    os.environ["DATABASE_URL"] = database_url or f"sqlite:///{tmp}/bench.sqlite3"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "reasonaudit.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from annotation import services as a_services
    from annotation.importing.pipeline import import_stream
    from fidelity.suites import do_create_suite

    study, _ = a_services.do_get_or_create_study(f"bench-{int(time.time())}")
    report = import_stream(study, io.BytesIO(DEMO.read_bytes()), "gsm8k-solutions")
    assert report.committed, report.rejected[:3]
    t0, c0 = time.perf_counter(), time.process_time()
    made = do_create_suite(study, "bench", axes=["perturbation", "counterfactual"])
    wall = time.perf_counter() - t0
    return wall, {"cpu_s": round(time.process_time() - c0, 2), "variants": made.created, "derived": made.derived, "unknown": made.unknown,
                  "skipped": sum(made.skipped.values())}


def metrics(items: list[dict], n_pairs: int = 10_000) -> tuple[float, float]:
    from fidelity.core import pairs
    from fidelity.core.text import split_steps

    outs = []
    for d in items:
        gold_steps = tuple(split_steps(d["ground_truth"]))
        answer = d["ground_truth"].strip().split("\n")[-1].replace("A:", "").strip()
        for key in ("6b_finetuning", "6b_verification", "175b_finetuning", "175b_verification"):
            sol = (d.get(key) or {}).get("solution")
            if sol:
                ans = sol.strip().split("\n")[-1].replace("A:", "").strip()
                outs.append(pairs.Output(sol, ans, tuple(split_steps(sol)), answer, gold_steps))
    pairs_list = [(outs[i % len(outs)], outs[(i * 7 + 3) % len(outs)]) for i in range(n_pairs)]
    t0 = time.perf_counter()
    per = n_pairs // 5
    rows = [pairs.perturbation_row(f"p{k}", pairs_list[k * per:(k + 1) * per]) for k in range(5)]
    pairs.rank(rows)
    t_pert = time.perf_counter() - t0
    t0 = time.perf_counter()
    cf = [pairs.counterfactual_pair(b, v, [Fraction(7)], strategy="percent", magnitude="+10%", complexity="2-hop",
                                    gold_known=True) for b, v in pairs_list]
    pairs.counterfactual_table(cf)
    return t_pert, time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--database-url")
    args = parser.parse_args()
    from _util import machine

    items = load()
    print(f"machine: {machine()}")
    cpu0 = time.process_time()
    wall, made, derived, skipped = pure_generation(items)
    print(f"  (CPU {time.process_time() - cpu0:.2f} s)")
    print(f"pure variant generation: {len(items)} problems x 9 strategies: {made} variants, {skipped} skipped, "
          f"{derived} counterfactual golds derived, {wall:.2f} s")
    cpu0 = time.process_time()
    t_pert, t_cf = metrics(items)
    print(f"  (metrics CPU {time.process_time() - cpu0:.2f} s)")
    print(f"metrics, 10,000 pairs: five perturbation rows (2,000 pairs each) {t_pert:.2f} s; "
          f"counterfactual indicators + table {t_cf:.2f} s; total {t_pert + t_cf:.2f} s")
    cpu0 = time.process_time()
    wall, info = suite_end_to_end(args.database_url)
    print(f"  (CPU incl. migrate and import {time.process_time() - cpu0:.2f} s)")
    print(f"do_create_suite end to end (Problem + Variant rows): {wall:.2f} s, {info}")


if __name__ == "__main__":
    main()
