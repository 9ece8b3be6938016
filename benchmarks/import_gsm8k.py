"""Import GSM8K model solutions with ``manage.py import_traces`` against a bare
``sqlite3`` ``executemany`` of the same rows (benchmarks/bare_sqlite_gsm8k.py).

Scale 1 is the bundled file (1,319 problems, 5,276 traces); scale N repeats it
N times, the question of every copy made distinct (" (copy k)") so each copy
is new problems, not a re-import. Both sides run as whole processes, start-up
included, into a fresh database; the median of --runs is reported with the
ratio, and the peak RSS of each process.

What the timed import includes: Django start-up, the command's study and job
rows, reading, validating and writing everything in one transaction, the
commit, and queueing the score recompute that follows an import (a Job row and
a broker message; the recompute itself runs later in a worker and is not
timed). A migrated empty database is copied in before each run: the schema is
not part of the import.

--phases runs one more import at the largest scale in process, with timers
around the pipeline's stages, and prints where the time goes (exclusive
times; the timers themselves add a little to "other").

    python benchmarks/import_gsm8k.py [--scales 1 10] [--runs 3] [--phases]
    python benchmarks/import_gsm8k.py --scales 10 --runs 1 --database-url postgres://postgres@127.0.0.1:5432/ra_NAME

With --database-url the import goes to a new PostgreSQL database named
``<NAME>_<pid>`` on that server (dropped afterwards); the floor stays SQLite.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import PY, ROOT, machine, median, run_timed, run_usage, scratch_postgres  # noqa: E402

DATA = ROOT / "annotation" / "demo_data" / "gsm8k" / "example_model_solutions.jsonl"
FORMAT = "gsm8k-solutions"


def scaled_file(scale: int, folder: Path) -> Path:
    """The bundled file, or ``scale`` copies of it with distinct questions."""
    if scale == 1:
        return DATA
    path = folder / f"gsm8k_x{scale}.jsonl"
    lines = DATA.read_text(encoding="utf-8").splitlines()
    with path.open("w", encoding="utf-8") as fh:
        for k in range(scale):
            for line in lines:
                obj = json.loads(line)
                if k:
                    obj["question"] = f"{obj['question']} (copy {k})"
                fh.write(json.dumps(obj) + "\n")
    return path


def _env(tmp: str, database_url: str) -> dict[str, str]:
    return {"REASONAUDIT_DATA_DIR": tmp, "DJANGO_DEBUG": "true", "DATABASE_URL": database_url,
            "CELERY_BROKER_URL": "filesystem://localhost/", "CELERY_TASK_ALWAYS_EAGER": "false",
            "DJANGO_SETTINGS_MODULE": "reasonaudit.settings"}


def _drop_postgres(url: str, name: str) -> None:
    from urllib.parse import urlsplit, urlunsplit

    import psycopg

    admin = urlunsplit(urlsplit(url)._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def measure(scale: int, runs: int, pg_url: str | None) -> dict[str, Any]:
    bare, ours, startup = [], [], []
    bare_cpu, ours_cpu, startup_cpu = [], [], []
    bare_rss, ours_rss = [], []
    report: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        data = scaled_file(scale, Path(tmp))
        template = Path(tmp) / "template"
        template.mkdir()
        if pg_url is None:
            # Migrate once; every run starts from a copy of the empty schema.
            run_timed([PY, "manage.py", "migrate", "-v0"], _env(str(template), f"sqlite:///{template}/ra.db"))
        for i in range(runs):
            run_dir = Path(tmp) / f"run{i}"
            run_dir.mkdir()
            t, cpu, rss, _ = run_usage([PY, "benchmarks/bare_sqlite_gsm8k.py", str(data), str(run_dir / "bare.db")])
            bare.append(t)
            bare_cpu.append(cpu)
            bare_rss.append(rss)
            pg_name = None
            if pg_url is None:
                for f in template.glob("ra.db*"):
                    shutil.copy(f, run_dir / f.name)
                env = _env(str(run_dir), f"sqlite:///{run_dir}/ra.db")
            else:
                url, pg_name = scratch_postgres(pg_url, f"{pg_url.rsplit('/', 1)[1]}_{i}")
                env = _env(str(run_dir), url)
                run_timed([PY, "manage.py", "migrate", "-v0"], env)
            try:
                t, cpu, rss, out = run_usage([PY, "manage.py", "import_traces", str(data), "--study", "bench",
                                              "--format", FORMAT, "--json"], env)
                ours.append(t)
                ours_cpu.append(cpu)
                ours_rss.append(rss)
                report = json.loads(out)
                t, cpu, _, _ = run_usage([PY, "manage.py", "import_traces", "--help"], env)
                startup.append(t)
                startup_cpu.append(cpu)
            finally:
                if pg_name:
                    _drop_postgres(pg_url, pg_name)
    b, o = median(bare), median(ours)
    return {
        "scale": scale,
        "database": "postgresql" if pg_url else "sqlite",
        "problems": report["problems_created"],
        "traces": report["traces_created"],
        "steps": report["steps_created"],
        "bare_sqlite_executemany_s": round(b, 3),
        "import_traces_s": round(o, 3),
        "ratio": round(o / b, 2),
        "django_startup_s (import_traces --help)": round(median(startup), 3),
        "import_minus_startup_s": round(o - median(startup), 3),
        "ratio_without_startup": round((o - median(startup)) / b, 2),
        "cpu_s (bare, import, start-up)": [round(median(x), 3) for x in (bare_cpu, ours_cpu, startup_cpu)],
        "cpu_ratio": round(median(ours_cpu) / median(bare_cpu), 2),
        "peak_rss_mib (bare, import)": [max(bare_rss), max(ours_rss)],
        "all_runs_wall_s (bare, import)": [[round(x, 2) for x in bare], [round(x, 2) for x in ours]],
    }


# --- phases (in process) -------------------------------------------------------


class Phases:
    """Exclusive wall and CPU time per named stage: a timed call nested in
    another is counted once, in the inner stage."""

    def __init__(self) -> None:
        self.wall: dict[str, float] = defaultdict(float)
        self.cpu: dict[str, float] = defaultdict(float)
        self.calls: Counter[str] = Counter()
        self._children: list[list[float]] = []

    def wrap(self, name: str, fn):
        def timed(*args, **kwargs):
            t0, c0 = time.perf_counter(), time.process_time()
            self._children.append([0.0, 0.0])
            try:
                return fn(*args, **kwargs)
            finally:
                dt, dc = time.perf_counter() - t0, time.process_time() - c0
                inner = self._children.pop()
                self.wall[name] += dt - inner[0]
                self.cpu[name] += dc - inner[1]
                self.calls[name] += 1
                if self._children:
                    self._children[-1][0] += dt
                    self._children[-1][1] += dc

        return timed


def phases_child(data: str) -> None:
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    from annotation import services
    from annotation.importing import adapters, pipeline
    from reasonlib import answers, segmentation
    from scoring import services as scoring_services

    ph = Phases()

    class TimedJson:
        JSONDecodeError = json.JSONDecodeError
        loads = staticmethod(ph.wrap("read + decode JSON", json.loads))

    adapters.json = TimedJson  # type: ignore[assignment]
    for mod, name, phase in [
        (adapters, "_split_final", "segmentation (solution lines, offsets)"),
        (adapters, "gsm8k_skeleton", "segmentation (solution lines, offsets)"),
        (pipeline, "_locate", "segmentation (solution lines, offsets)"),
        (segmentation, "parse_trace", "segmentation (solution lines, offsets)"),
        (answers, "extract_answer", "answer extraction and checks"),
        (answers, "check_answer", "answer extraction and checks"),
        (pipeline, "validate", "validation (pydantic)"),
        (pipeline, "steps_hash", "hashing"),
        (pipeline, "_text_hash", "hashing"),
        (pipeline, "insert_rows", "inserts (executemany)"),
        (services, "import_stream", "other: record loop, adapters, reading lines"),
        (scoring_services, "request_recompute", "queue the score recompute"),
    ]:
        setattr(mod, name, ph.wrap(phase, getattr(mod, name)))
    for name in ("flush", "finish"):
        setattr(pipeline._Writer, name, ph.wrap("id look-ups, row building, skeleton updates", getattr(pipeline._Writer, name)))
    connection.ensure_connection()
    connection.commit = ph.wrap("commit", connection.commit)  # type: ignore[method-assign]
    t0, c0 = time.perf_counter(), time.process_time()
    out = ph.wrap("study, job rows", call_command)
    import io

    buf = io.StringIO()
    out("import_traces", data, study="bench", format=FORMAT, json=True, stdout=buf)
    total, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(json.dumps({"in_process_wall_s": round(total, 3), "in_process_cpu_s": round(cpu, 3),
                      "phases_wall_cpu_s": {k: [round(v, 3), round(ph.cpu[k], 3)]
                                            for k, v in sorted(ph.wall.items(), key=lambda kv: -kv[1])},
                      "calls": dict(ph.calls), "report": json.loads(buf.getvalue())}))


def phases(scale: int, pg_url: str | None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        data = scaled_file(scale, Path(tmp))
        pg_name = None
        if pg_url is None:
            env = _env(tmp, f"sqlite:///{tmp}/ra.db")
        else:
            url, pg_name = scratch_postgres(pg_url, f"{pg_url.rsplit('/', 1)[1]}_ph")
            env = _env(tmp, url)
        try:
            run_timed([PY, "manage.py", "migrate", "-v0"], env)
            _, rss, out = run_timed([PY, "benchmarks/import_gsm8k.py", "--phases-child", str(data)], env)
        finally:
            if pg_name:
                _drop_postgres(pg_url, pg_name)
    result = json.loads(out)
    result["scale"] = scale
    result["peak_rss_mib"] = rss
    del result["report"]["job"]
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scales", type=int, nargs="+", default=[1, 10])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--phases", action="store_true", help="also time the stages at the largest scale")
    parser.add_argument("--database-url", help="postgres://.../NAME: import into a scratch NAME_<pid> database")
    parser.add_argument("--phases-child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phases_child:
        sys.path.insert(0, str(ROOT))
        phases_child(args.phases_child)
        return
    if args.database_url and not args.database_url.startswith("postgres"):
        raise SystemExit("--database-url takes a postgres:// URL (SQLite is the default)")
    results: dict[str, Any] = {"machine": machine(), "load_average_at_start": os.getloadavg()[0], "runs": args.runs,
                               "sizes": [measure(s, args.runs, args.database_url) for s in args.scales]}
    if args.phases:
        results["phases"] = phases(max(args.scales), args.database_url)
    results["load_average_at_end"] = os.getloadavg()[0]
    print(json.dumps(results, indent=2))
    for size in results["sizes"]:
        print(f"scale {size['scale']}x ({size['traces']:,} traces, {size['database']}): "
              f"import_traces {size['import_traces_s']} s / bare sqlite3 {size['bare_sqlite_executemany_s']} s "
              f"= {size['ratio']}x (without start-up {size['ratio_without_startup']}x; CPU time {size['cpu_ratio']}x)",
              file=sys.stderr)


if __name__ == "__main__":
    main()
