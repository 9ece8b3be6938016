"""Import a generated file of many traces (default 200,000, five steps each,
with one human label per step on every tenth trace) and report wall time and
the importing process's peak RSS. Run it at two sizes to see that memory stays
flat (the file is streamed and written in batches).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/ra_bench python benchmarks/import_large.py --traces 200000
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import PY, machine, run_timed  # noqa: E402


def generate(path: Path, n_traces: int, per_problem: int = 10, seed: int = 0) -> None:
    rng = random.Random(seed)
    with path.open("w") as fh:
        for p in range(n_traces // per_problem):
            a, b = rng.randint(2, 99), rng.randint(2, 99)
            fh.write(json.dumps({"kind": "problem", "problem_id": f"gen-{p:06d}",
                                 "statement": f"Tom has {a} apples and buys {b} more. How many now?",
                                 "gold_answer": str(a + b), "domain": "arithmetic",
                                 "skeleton": [{"text": f"{a} + {b} = {a + b}", "check": f"{a}+{b}={a + b}"}]}) + "\n")
            for m in range(per_problem):
                steps = [f"Tom starts with {a} apples.", f"He buys {b} more.", f"{a} + {b} = {a + b + (m == 3)}",
                         "So that is the total.", f"The count is {a + b + (m == 3)}."]
                rec = {"kind": "trace", "problem_id": f"gen-{p:06d}", "model": f"model-{m % 4}",
                       "trace_id": f"gen-{p:06d}/{m}", "steps": steps, "answer": str(a + b + (m == 3))}
                if m == 0:
                    rec["labels"] = [{"step": k, "verdict": "valid", "annotator": "bench-annotator"} for k in range(1, 6)]
                fh.write(json.dumps(rec) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--traces", type=int, default=200_000)
    args = parser.parse_args()
    db = os.environ.get("DATABASE_URL", "")
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "gen.jsonl"
        generate(data, args.traces)
        env = {"REASONAUDIT_DATA_DIR": tmp, "DJANGO_DEBUG": "true", "CELERY_BROKER_URL": "filesystem://"}
        if not db:
            env["DATABASE_URL"] = f"sqlite:///{tmp}/ra.db"
        run_timed([PY, "manage.py", "migrate", "-v0"], env)
        study = f"bench-{args.traces}-{os.getpid()}"
        elapsed, peak, out = run_timed([PY, "manage.py", "import_traces", str(data), "--study", study, "--json"], env)
        report = json.loads(out)
        size = data.stat().st_size
    print(json.dumps({
        "machine": machine(),
        "database": "postgresql" if db.startswith("postgres") else "sqlite",
        "traces": report["traces_created"],
        "steps": report["steps_created"],
        "file_mib": round(size / 2**20, 1),
        "seconds": round(elapsed, 1),
        "traces_per_s": round(report["traces_created"] / elapsed),
        "peak_rss_mib": peak,
    }, indent=2))


if __name__ == "__main__":
    main()
