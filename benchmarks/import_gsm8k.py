"""Import the full GSM8K model-solutions file (5,276 traces) into a fresh
SQLite database with `manage.py import_traces`, against a bare sqlite3
executemany of the same rows (benchmarks/bare_sqlite_gsm8k.py). Both are
timed as whole processes, start-up included; the median of --runs is reported.

    python benchmarks/import_gsm8k.py [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import PY, ROOT, machine, median, run_timed  # noqa: E402

DATA = ROOT / "annotation" / "demo_data" / "gsm8k" / "example_model_solutions.jsonl"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    bare, ours = [], []
    report = None
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory() as tmp:
            t, _, _ = run_timed([PY, "benchmarks/bare_sqlite_gsm8k.py", str(DATA), f"{tmp}/bare.db"])
            bare.append(t)
            env = {"REASONAUDIT_DATA_DIR": tmp, "DJANGO_DEBUG": "true", "DATABASE_URL": f"sqlite:///{tmp}/ra.db",
                   "CELERY_BROKER_URL": "filesystem://"}
            run_timed([PY, "manage.py", "migrate", "-v0"], env)  # schema set-up is not part of the import
            t, _, out = run_timed([PY, "manage.py", "import_traces", str(DATA), "--study", "bench",
                                   "--format", "gsm8k-solutions", "--json"], env)
            ours.append(t)
            report = json.loads(out)
            startup, _, _ = run_timed([PY, "-c", "import os; os.environ['DJANGO_SETTINGS_MODULE']='reasonaudit.settings';"
                                       "import django; django.setup(); import annotation.importing.pipeline"], env)
    b, o = median(bare), median(ours)
    print(json.dumps({
        "machine": machine(),
        "runs": args.runs,
        "bare_sqlite_executemany_s": round(b, 3),
        "import_traces_s": round(o, 3),
        "ratio": round(o / b, 2),
        "django_startup_s": round(startup, 3),
        "import_minus_startup_s": round(o - startup, 3),
        "traces": report["traces_created"],
        "steps": report["steps_created"],
    }, indent=2))


if __name__ == "__main__":
    main()
