"""What the demo adds so the research pages are not empty (issue 31): the published abstraction outputs of
GPT-4o-mini (the Abstraction page), and a few runs of a deterministic stand-in reasoning model (demo/standin, on
loopback) that fill the Fidelity page and the Evidence page's IFR, anytime (thinking budgets) and early-answering
sections. Everything runs in this process through the same services and the one run engine the pages and commands
use. ``./run`` serves the stand-in (demo/standin/serve.py) for as long as the web server runs and names its URL
here, so the subject model points at a server that answers new runs from the pages; ``manage.py demo`` alone
starts one for its own runs and stops it at the end, and the subject model's URL then answers nothing (the
stand-in notice on its pages says both)."""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from pathlib import Path

from django.conf import settings

from abstraction import importing as abstraction_import
from abstraction.models import Benchmark
from annotation.models import Study
from demo.standin.serve import stand_in
from faithfulness import running as faithfulness
from fidelity import running as fidelity
from runs import engine, outbound
from subjects import services as subjects
from subjects.models import STAND_IN_MODEL, SubjectModel

DEMO_DIR = Path(settings.BASE_DIR) / "demo"
ABSTRACTION_OUTPUTS = DEMO_DIR / "data" / "abstraction" / "gpt-4o-mini"
ABSTRACTION_MODEL = "gpt-4o-mini"
STAND_IN_NAME = "stand-in"
# SmolLM2's chat template (as tests/runs/data has it): with it the stand-in's thought is continued on
# /v1/completions, which the interventions, thinking budgets and early answering need.
CHAT_TEMPLATE = DEMO_DIR / "standin" / "chat_template.jinja"
# Few problems keep ./run short (docs/benchmarks.md, "The demo"); each run's page says how many.
PROBLEMS = "first:5"
FIDELITY_PROBLEMS = "first:3"
THINKING_BUDGETS = "thinking:8,16,32,64,full"
INTERVENTIONS = "value_flip,step_ablation,paraphrase"

Say = Callable[[str], None]


def import_abstraction(study: Study, say: Say) -> None:
    """The published outputs of four sub-datasets (the raw bit task and its three remappings), once."""
    if Benchmark.objects.filter(study=study, name=abstraction_import.PUBLISHED).exists():
        say("abstraction: the published outputs are imported already")
        return
    report = abstraction_import.import_outputs(study, ABSTRACTION_OUTPUTS, model=ABSTRACTION_MODEL)
    if report.rejected:
        raise ValueError(f"abstraction import failed: {report.rejected[:3]}")
    say(f"abstraction: {report.traces_created} published answers of {ABSTRACTION_MODEL} imported")


def run_stand_in(study: Study, say: Say, *, url: str | None = None) -> None:
    """Generation, early answering, thinking budgets, interventions and a fidelity run of the stand-in
    reasoning model, once: a second demo finds its subject model and leaves its runs. ``url``: the base URL of
    the stand-in ``./run`` serves (None: one started here for these runs and stopped after them); the subject
    model is made, or moved, to point at it."""
    subject = SubjectModel.objects.filter(study=study, name=STAND_IN_NAME).first()
    if subject is not None and url in (None, subject.base_url):
        say(f"stand-in: subject model {STAND_IN_NAME!r} exists already")
        return
    # A deployment whose address policy keeps model calls off loopback (REASONAUDIT_MODEL_NETWORKS; the
    # production default): the stand-in cannot be called there, and the demo must not widen the policy.
    if not outbound.address_allowed(ipaddress.ip_address("127.0.0.1")):
        say(f"stand-in: {'not run' if subject is None else 'not moved'} -- the address policy "
            "(REASONAUDIT_MODEL_NETWORKS) allows no loopback model server"
            + ("; Fidelity and Evidence stay empty" if subject is None else ""))
        return
    if subject is not None:
        move_stand_in(subject, url)
        say(f"stand-in: subject model {STAND_IN_NAME!r} now points at {url}")
        return
    server = stand_in().start() if url is None else None
    try:
        subject, _ = subjects.do_save_subject(study, {
            "name": STAND_IN_NAME, "model": STAND_IN_MODEL, "base_url": url or server.url, "concurrency": 4,
            "max_retries": 1, "timeout_seconds": 10.0, "temperature": 0.0, "seed": 0, "thinking": "on",
            "chat_template": CHAT_TEMPLATE.read_text(encoding="utf-8")})
        subjects.do_probe_subject_model(subject)
        job = subjects.run_inline(subjects.do_start_generation(subject, scope=PROBLEMS, queue=False))
        say(f"stand-in: generation {job.status}, {job.done} traces")
        if not job.done:
            raise ValueError(f"the stand-in generated nothing ({job.status}: {job.error})")
        starts: list[tuple[str, Callable[[], object]]] = [  # one after the other: a subject runs one at a time
            ("early answering", lambda: faithfulness.do_start_early(subject, queue=False)),
            ("thinking budgets", lambda: faithfulness.do_start_anytime(subject, grid=THINKING_BUDGETS, queue=False)),
            ("interventions", lambda: faithfulness.do_start_interventions(subject, kinds=INTERVENTIONS, queue=False)),
            ("fidelity", lambda: fidelity.do_queue_run(study, "demo", subject, axes=["perturbation", "counterfactual"],
                                                       problems=FIDELITY_PROBLEMS, queue=False)),
        ]
        for label, start in starts:
            job = engine.run_here(start().run)
            say(f"stand-in: {label} {job.status} ({job.done} of {job.total} items)")
    finally:
        if server is not None:
            server.stop()


def move_stand_in(subject: SubjectModel, url: str) -> None:
    """Point the stand-in subject model at ``url`` (./run served it on another port before) through the one save
    of a subject model: another base URL is a new configuration version, as for any model, and clears the probe,
    so it is probed again here (three requests) -- the thought-continuing runs need its continuation mode."""
    subjects.do_save_subject(subject.study, {"base_url": url}, subject=subject)
    subjects.do_probe_subject_model(subject)
