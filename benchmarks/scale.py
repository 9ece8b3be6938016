"""The whole path at scale on PostgreSQL (issue 33): build a study of N traces x S steps, import it, run the
mechanistic judge on W worker processes, score, and request every page -- one table of wall time, CPU and
peak memory per stage, with the machine's load average before and after each.

    python benchmarks/scale.py --traces 100000 --steps-per-trace 10 --workers 1,2 \\
        --database-url postgres://postgres@127.0.0.1:5432/ra_scale --broker redis://127.0.0.1:6379/5
    # two Celery workers under different node names, one process each (standing for two machines):
    python benchmarks/scale.py ... --workers 2 --nodes

Stages, each in processes of its own so its usage is its own:
* build: the JSONL file (page_speed.py's generator: 10 traces per problem, human labels on two traces in ten);
* import: ``manage.py import_traces`` of that one file (one transaction);
* judge W: the mechanistic judge over every trace, started as the web would start it and worked by real
  ``celery worker`` processes -- one worker with ``--concurrency=W``, or (``--nodes``) W workers of one
  process each under their own node names; CPU and peak memory are the workers' (every pool process);
  before each judge stage the judge's labels, history and results are deleted (not timed), so every W
  does the same work;
* judge inline (``--stages judge-inline``): the same run in this process (``judges.services.run_inline``: the
  chunk code a worker runs, without Celery), CPU this process's; ``--profile FILE`` writes its cProfile;
* score: ``manage.py score --inline`` (every source, every profile, the stored aggregates), streamed by chunk
  in one process;
* score-spread (not in the default stages): the score job queued as the web queues it and worked by W worker
  processes (a spread run: every process takes chunks), once per ``--workers`` value;
* pages: page_speed.py over the same study (every GET page: slowest warm median and slowest first visit);
* score-parts (not in the default stages): the score job's parts, each in a process of its own after
  ``django.setup()`` (its peak RSS is the process's VmHWM, which includes its base after setup, given apart:
  ``getrusage``'s ru_maxrss would keep this script's own peak across the fork and exec), ``--parts`` picks
  them: scores (both passes and the publish, the summary hooks left out), study-summary
  (``annotation.study_summary_writer.store``), evidence (``faithfulness.evidence.store_summaries``), agreement
  (``agreement.stored_writer.store``), warm (the analytics cache). The study's data are only read (the stored
  summaries and scores are rewritten as the job rewrites them).

CPU is the stage's own processes' (user + system), not PostgreSQL's: the server is shared with other
databases on this machine. ``--stages`` picks stages (a study already imported is reused).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import machine, run_usage  # noqa: E402
from page_speed import ANNOTATORS, GENERATED_STUDY, OWNER, _ensure_database, _generated_lines  # noqa: E402

PY = sys.executable
QUEUE = "scale-bench"


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _env(url: str, broker: str, data_dir: str) -> dict[str, str]:
    return {
        "DJANGO_SETTINGS_MODULE": "reasonaudit.settings", "DATABASE_URL": url, "CELERY_BROKER_URL": broker,
        "CELERY_TASK_ALWAYS_EAGER": "false", "REASONAUDIT_QUEUE": QUEUE, "REASONAUDIT_DATA_DIR": data_dir,
        "SECRET_KEY": os.environ.get("SECRET_KEY", "benchmark-only-secret-key"), "DJANGO_DEBUG": "false",
        "ALLOWED_HOSTS": "testserver,localhost", "REASONAUDIT_MODEL_NETWORKS": "127.0.0.0/8",
        # The score recompute that an import or a judge run queues would run in the judge stage's workers
        # (before the run, or while they stop): it waits an hour here, is dropped before each judge stage,
        # and the score stage measures it on its own.
        "SCORING_DEBOUNCE_SECONDS": "3600",
    }


def _setup(env: dict[str, str]) -> None:
    os.environ.update(env)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def _study():
    from django.contrib.auth import get_user_model

    from annotation import services
    from annotation.models import Membership

    owner, _ = get_user_model().objects.get_or_create(username=OWNER)
    study, _ = services.do_get_or_create_study(GENERATED_STUDY, owner=owner)
    Membership.objects.filter(study=study, user=owner).update(role=Membership.Role.OWNER)
    for name in ANNOTATORS:
        services.do_add_member(study, name, Membership.Role.ANNOTATOR)
    return study


# ---------------------------------------------------------------------------
# Worker processes: CPU and peak memory of every process of a worker, read from /proc


def _children() -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            out.setdefault(ppid, []).append(int(entry.name))
    return out


def _tree(pid: int) -> list[int]:
    kids = _children()
    todo, out = [pid], []
    while todo:
        p = todo.pop()
        out.append(p)
        todo += kids.get(p, [])
    return out


def _cpu(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _peak_mib(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


class Workers:
    """``celery worker`` processes on the benchmark's queue: one node of ``processes`` pool processes, or
    (``nodes``) one node per process, each under its own name (two machines' workers, on one)."""

    def __init__(self, processes: int, nodes: bool, env: dict[str, str], logs: Path) -> None:
        self.specs = [(f"scale{i + 1}", 1) for i in range(processes)] if nodes else [("scale", processes)]
        self.env, self.logs = {**os.environ, **env}, logs
        self.procs: list[tuple[subprocess.Popen, Path]] = []

    def __enter__(self) -> Workers:
        for name, concurrency in self.specs:
            log = self.logs / f"{name}.log"
            proc = subprocess.Popen(
                [PY, "-m", "celery", "-A", "reasonaudit", "worker", "--pool=prefork", f"--concurrency={concurrency}",
                 "--loglevel=info", "-Q", QUEUE, "-n", f"{name}@%h", "--without-gossip", "--without-mingle",
                 "--without-heartbeat"],
                cwd=ROOT, env=self.env, stdout=log.open("wb"), stderr=subprocess.STDOUT)
            self.procs.append((proc, log))
        # Ready when each node said so and its pool processes are idle (each imports the model client at
        # start: a task queued before would wait for that, and count it in the stage's time).
        deadline = time.monotonic() + 180
        while not all("ready." in log.read_text(errors="replace") for _, log in self.procs):
            for p, log in self.procs:
                if p.poll() is not None:
                    raise SystemExit(f"celery worker exited: {log.read_text()[-2000:]}")
            if time.monotonic() > deadline:
                raise SystemExit("celery workers did not start")
            time.sleep(0.2)
        last = -1.0
        while (now := self.cpu()) != last and time.monotonic() < deadline:
            last = now
            time.sleep(1.0)
        return self

    def pids(self) -> list[int]:
        return [pid for p, _ in self.procs for pid in _tree(p.pid)]

    def cpu(self) -> float:
        return sum(_cpu(pid) for pid in self.pids())

    def peak_mib(self) -> float:
        return max((_peak_mib(pid) for pid in self.pids()), default=0.0)

    def __exit__(self, *exc) -> None:
        for p, _ in self.procs:
            p.terminate()
        for p, _ in self.procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()


# ---------------------------------------------------------------------------
# Stages


def _manage(env: dict[str, str], *args: str) -> tuple[float, float, int, str]:
    return run_usage([PY, "manage.py", *args], env)


def stage_build(path: Path, traces: int, steps: int) -> dict[str, Any]:
    t0, c0 = time.perf_counter(), time.process_time()
    with path.open("w") as f:
        for rec in _generated_lines(traces, steps):
            f.write(json.dumps(rec) + "\n")
    return {"wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0,
            "note": f"{path.stat().st_size / 2**20:.0f} MiB of JSONL"}


def stage_import(env: dict[str, str], path: Path) -> dict[str, Any]:
    # One file of 1M traces (651 MiB) is over the shipped import limit (512 MiB, REASONAUDIT_IMPORT_MAX_BYTES): the
    # operator of such a study raises it, as docs/configuration.md says.
    limit = max(int(env.get("REASONAUDIT_IMPORT_MAX_BYTES", 512 * 2**20)), path.stat().st_size)
    env = {**env, "REASONAUDIT_IMPORT_MAX_BYTES": str(limit)}
    wall, cpu, peak, out = _manage(env, "import_traces", str(path), "--study", GENERATED_STUDY, "--json")
    report = json.loads(out[out.index("{"):])
    return {"wall_s": wall, "cpu_s": cpu, "peak_mib": peak,
            "note": f"{report.get('traces_created')} traces, {report.get('steps_created', '?')} steps"}


def _forget_judge(study) -> None:
    """The judge's labels, their history, its results and the claims it stored: every judge stage does the
    same work."""
    from django.apps import apps
    from django.db import connection, transaction

    from annotation.models import LabelHistory, StepLabel
    from judges import services as judge_services
    from judges.models import JudgeTraceResult

    judge = judge_services.ensure_mechanistic(study)
    with transaction.atomic():
        LabelHistory.objects.filter(kind=StepLabel.Kind.JUDGE, source_name=judge.name,
                                    step__trace__study=study).delete()
        StepLabel.objects.filter(kind=StepLabel.Kind.JUDGE, judge=judge)._raw_delete(connection.alias)
        JudgeTraceResult.objects.filter(judge=judge)._raw_delete(connection.alias)
        if apps.all_models["annotation"].get("traceclaims") is not None:  # absent before the judge stored claims
            apps.get_model("annotation", "TraceClaims").objects.filter(trace__study=study)._raw_delete(connection.alias)
    with connection.cursor() as cur:
        cur.execute("VACUUM ANALYZE annotation_steplabel")
        cur.execute("VACUUM ANALYZE annotation_labelhistory")
        if apps.all_models["annotation"].get("traceclaims") is not None:
            cur.execute("VACUUM ANALYZE annotation_traceclaims")


def _drop_queued_work(env: dict[str, str]) -> None:
    """The benchmark queue's messages (recomputes queued by earlier stages) and their jobs."""
    from annotation.models import Job

    subprocess.run([PY, "-m", "celery", "-A", "reasonaudit", "purge", "-f", "-Q", QUEUE], cwd=ROOT,
                   env={**os.environ, **env}, check=True, capture_output=True)
    Job.objects.filter(kind=Job.Kind.SCORE, status__in=(Job.Status.QUEUED, Job.Status.RUNNING)).update(
        status=Job.Status.CANCELLED, error="dropped by benchmarks/scale.py")


def stage_judge(study, env: dict[str, str], processes: int, nodes: bool, logs: Path) -> dict[str, Any]:
    from annotation.models import Job
    from judges import services as judge_services
    from judges.models import JudgeRun

    _forget_judge(study)
    _drop_queued_work(env)
    judge = judge_services.ensure_mechanistic(study)
    with Workers(processes, nodes, env, logs) as workers:
        c0 = workers.cpu()
        t0 = time.perf_counter()
        record = judge_services.do_start_run(judge, scope=JudgeRun.Scope.ALL)
        while True:
            job = Job.objects.get(pk=record.job_id)
            if job.finished:
                break
            time.sleep(0.5)
        wall = time.perf_counter() - t0
        cpu, peak = workers.cpu() - c0, workers.peak_mib()
    record.refresh_from_db()
    holders = sorted(set(record.run.chunks.values_list("holder", flat=True)))
    nodes_seen = sorted({h.split("/", 1)[0] for h in holders})
    return {"wall_s": wall, "cpu_s": cpu, "peak_mib": peak,
            "note": (f"{job.status}, {record.labels_created:,} labels, first chunk to end "
                     f"{(job.finished_at - job.started_at).total_seconds():.0f} s, {record.run.chunks.count()} chunks over "
                     f"{len(holders)} processes on {', '.join(nodes_seen)}")}


def stage_judge_inline(study, profile: str | None) -> dict[str, Any]:
    """The judge per process: the whole run in this process, as ``run_inline`` does (the CLI, the demo)."""
    import cProfile
    import resource

    from judges import services as judge_services
    from judges.models import JudgeRun

    _forget_judge(study)
    judge = judge_services.ensure_mechanistic(study)
    record = judge_services.do_start_run(judge, scope=JudgeRun.Scope.ALL, queue=False)
    # The wall clock (cProfile's default): a CPU-time timer is a system call per function call, and made
    # the profiled run six times slower than the run.
    profiler = cProfile.Profile() if profile else None
    t0, c0 = time.perf_counter(), time.process_time()
    if profiler:
        profiler.enable()
    job = judge_services.run_inline(record)
    if profiler:
        profiler.disable()
        profiler.dump_stats(profile)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    record.refresh_from_db()
    return {"wall_s": wall, "cpu_s": cpu, "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "note": f"{job.status}, {record.labels_created:,} labels, {record.run.chunks.count()} chunks, in process"
                    + (" (profiled: CPU includes cProfile's)" if profiler else "")}


def stage_score(env: dict[str, str]) -> dict[str, Any]:
    wall, cpu, peak, out = _manage(env, "score", "--study", GENERATED_STUDY, "--inline")
    return {"wall_s": wall, "cpu_s": cpu, "peak_mib": peak, "note": out.strip().splitlines()[-1][:120] if out else ""}


def stage_score_spread(study, env: dict[str, str], processes: int, nodes: bool, logs: Path) -> dict[str, Any]:
    """The score job queued as the web queues it, its run's chunks worked by real ``celery worker`` processes."""
    from annotation.models import Job
    from scoring import services

    _drop_queued_work(env)
    with Workers(processes, nodes, env, logs) as workers:
        c0 = workers.cpu()
        t0 = time.perf_counter()
        job = services.do_queue_score_job(study, reason="benchmarks/scale.py")
        while not Job.objects.get(pk=job.pk).finished:
            time.sleep(0.5)
        wall = time.perf_counter() - t0
        cpu, peak = workers.cpu() - c0, workers.peak_mib()
    job.refresh_from_db()
    run = job.run
    holders = sorted(set(run.chunks.values_list("holder", flat=True)))
    return {"wall_s": wall, "cpu_s": cpu, "peak_mib": peak,
            "note": (f"{job.status}, {job.result.get('rows', 0):,} scores, {run.chunks.count()} chunks over "
                     f"{len(holders)} processes")}


def stage_pages(env: dict[str, str], url: str, traces: int, steps: int, requests: int) -> dict[str, Any]:
    wall, cpu, peak, out = run_usage([PY, "benchmarks/page_speed.py", "--traces", str(traces), "--steps-per-trace",
                                      str(steps), "--database-url", url, "--requests", str(requests)], env)
    result = json.loads(out[:out.index("\n\n|")])
    pages = result["pages"]
    warm = max(pages.items(), key=lambda kv: kv[1]["median_ms"])
    first = max(pages.items(), key=lambda kv: kv[1]["first_ms"])
    return {"wall_s": wall, "cpu_s": cpu, "peak_mib": peak,
            "note": (f"{len(pages)} pages; slowest warm median {warm[0]} {warm[1]['median_ms']:.0f} ms; slowest "
                     f"first {first[0]} {first[1]['first_ms']:.0f} ms; over {result['target_ms']} ms: "
                     f"{', '.join(result['over_target']) or 'none'}"),
            "pages": pages}


def _score_part(name: str) -> dict[str, Any]:
    """One part of the score job in this process (``--part``), already set up: wall, CPU and peak RSS."""
    import resource
    from unittest import mock

    from annotation.models import Study

    study = Study.objects.get(name=GENERATED_STUDY)
    base = _peak_mib(os.getpid())
    t0, c0 = time.perf_counter(), time.process_time()
    if name == "scores":
        from scoring import hooks, score_jobs

        with mock.patch.object(hooks, "summary_names", return_value=[]):  # the other parts are measured apart
            note = json.dumps(score_jobs.recompute(study, warm=False)["seconds"])
    elif name == "study-summary":
        from annotation import study_summary_writer
        from annotation.models import SummaryDisagreement

        counts = study_summary_writer.store(study)
        note = f"{SummaryDisagreement.objects.filter(study=study).count():,} disagreement steps, {counts['traces']:,} traces"
    elif name == "evidence":
        from faithfulness.evidence import store_summaries

        note = f"{store_summaries(study)} rows"
    elif name == "agreement":
        from agreement import stored_writer

        stored_writer.store(study)
        note = "pair and annotators reports"
    elif name == "warm":
        from scoring import score_jobs

        score_jobs.warm_cache(study)
        note = "analytics cache"
    else:
        raise SystemExit(f"--part: unknown part {name!r}")
    return {"wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0,
            "peak_mib": _peak_mib(os.getpid()), "base_mib": base, "note": note,
            "ru_maxrss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def stage_score_part(env: dict[str, str], url: str, name: str) -> dict[str, Any]:
    _, _, _, out = run_usage([PY, "benchmarks/scale.py", "--database-url", url, "--part", name], env)
    r = json.loads(out[out.index("{"):])
    r["note"] = f"base {r['base_mib']:.0f} MiB after setup; {r['note']}"
    return r


def _row(name: str, r: dict[str, Any], before: str) -> str:
    peak = f"{r['peak_mib']:,.0f}" if r.get("peak_mib") else ""
    return f"| {name} | {r['wall_s']:.1f} | {r['cpu_s']:.1f} | {peak} | {before} / {load()} | {r.get('note', '')} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traces", type=int, default=100_000)
    parser.add_argument("--steps-per-trace", type=int, default=10)
    parser.add_argument("--database-url", required=True, help="PostgreSQL (created when missing)")
    parser.add_argument("--broker", default="redis://127.0.0.1:6379/5")
    parser.add_argument("--workers", default="1,2", help="worker processes of each judge stage, comma-separated")
    parser.add_argument("--nodes", action="store_true", help="one Celery worker (node name) per process")
    parser.add_argument("--stages", default="build,import,judge,score,pages")
    parser.add_argument("--requests", type=int, default=3, help="timed requests per page")
    parser.add_argument("--profile", help="judge-inline: write the run's cProfile statistics to this file")
    parser.add_argument("--parts", default="scores,study-summary,evidence,agreement,warm",
                        help="score-parts: the parts of the score job to measure, comma-separated")
    parser.add_argument("--part", help=argparse.SUPPRESS)  # one part, in the process score-parts starts
    args = parser.parse_args()
    if args.part:
        import django

        django.setup()  # the environment is the parent's (_env): no migrate, the part's process only
        print(json.dumps(_score_part(args.part)))
        return
    if not args.database_url.startswith("postgres"):
        raise SystemExit("--database-url: a PostgreSQL URL (this benchmark measures the server setup)")
    stages = set(args.stages.split(","))
    _ensure_database(args.database_url)
    rows: list[str] = []
    results: dict[str, Any] = {"machine": machine(), "traces": args.traces, "steps_per_trace": args.steps_per_trace}
    with tempfile.TemporaryDirectory() as tmp:
        env = _env(args.database_url, args.broker, tmp)
        _setup(env)
        study = _study()
        path = Path(tmp) / "traces.jsonl"
        plan: list[tuple[str, Any]] = []
        if "import" in stages:
            plan += [("build", lambda: stage_build(path, args.traces, args.steps_per_trace)),
                     ("import", lambda: stage_import(env, path))]
        if "judge" in stages:
            for w in [int(x) for x in args.workers.split(",")]:
                label = f"judge, {w} process{'es' if w > 1 else ''}" + (f" on {w} nodes" if args.nodes else "")
                plan.append((label, lambda w=w: stage_judge(study, env, w, args.nodes, Path(tmp))))
        if "judge-inline" in stages:
            plan.append(("judge, in this process", lambda: stage_judge_inline(study, args.profile)))
        if "score" in stages:
            plan.append(("score", lambda: stage_score(env)))
        if "score-spread" in stages:
            for w in [int(x) for x in args.workers.split(",")]:
                label = f"score, {w} worker process{'es' if w > 1 else ''}" + (f" on {w} nodes" if args.nodes else "")
                plan.append((label, lambda w=w: stage_score_spread(study, env, w, args.nodes, Path(tmp))))
        if "score-parts" in stages:
            for part in args.parts.split(","):
                plan.append((f"score job part: {part}", lambda part=part: stage_score_part(env, args.database_url, part)))
        if "pages" in stages:
            plan.append(("pages", lambda: stage_pages(env, args.database_url, args.traces, args.steps_per_trace,
                                                      args.requests)))
        for name, fn in plan:
            before = load()
            r = fn()
            results[name] = r
            rows.append(_row(name, r, before))
            print(rows[-1], file=sys.stderr)
    print(json.dumps({k: v for k, v in results.items()}, indent=2, default=str))
    print()
    print(f"{args.traces:,} traces x {args.steps_per_trace} steps; {results['machine']}")
    print("| stage | wall s | CPU s | peak MiB | load before / after | |")
    print("| --- | --- | --- | --- | --- | --- |")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
