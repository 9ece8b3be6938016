"""./run keeps the demo's stand-in reasoning model running beside the web server (``python -m demo.standin.serve
PORT``, a process of its own that prints its URL once it listens) and the demo points its stand-in subject model
there, so a run a researcher starts against it from the runs page gets its answers; when a later ./run serves it on
another port, the demo moves the subject model there. Here the process is started as ./run starts it and the runs
are worked in this process, as the worker would."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from django.conf import settings
from django.test import Client

from annotation.models import Job, Trace
from demo import research
from runs import engine
from subjects import services as subjects
from subjects.models import STAND_IN_MODEL, Generation, GenerationRun, SubjectModel
from tests.run_fixtures import quick_retries_fixture  # noqa: F401 (fixture)
from tests.subjects.conftest import make_problems  # noqa: F401 (fixture)

pytestmark = pytest.mark.django_db

SERVE = [sys.executable, "-m", "demo.standin.serve"]  # ./run: .venv/bin/python -m demo.standin.serve "$STANDIN_PORT"


@contextmanager
def served(port: int = 0) -> Iterator[str]:
    """The stand-in's process, stopped (as ./run's trap stops it) on the way out; its URL."""
    proc = subprocess.Popen([*SERVE, str(port)], cwd=settings.BASE_DIR, stdout=subprocess.PIPE, text=True)
    try:
        url = proc.stdout.readline().strip()
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/v1", url), url
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def start_from_the_runs_page(owner, study, problems: str) -> Job:
    client = Client()
    client.force_login(owner)
    page = client.post(f"/studies/{study.pk}/runs/", {"kind": "generation", "model": research.STAND_IN_NAME,
                                                      "problems": problems, "samples": "1"})
    assert page.status_code == 302, page.content.decode()[:2000]
    record = GenerationRun.objects.latest("pk")
    assert page["Location"] == f"/jobs/{record.job_id}/"
    return engine.run_here(record.run)


def test_a_run_from_the_runs_page_against_the_demo_stand_in_gets_its_answers_and_follows_a_new_port(
        make_problems, study, owner):  # noqa: F811 - fixture imported above
    make_problems(6)  # p0..p5: "Ann has i+2 apples and buys i+3 more", the stand-in's sum is the gold answer
    said: list[str] = []
    with served() as first:
        research.run_stand_in(study, said.append, url=first)
        subject = SubjectModel.objects.get(study=study, name=research.STAND_IN_NAME)
        assert subject.base_url == first and subject.model == STAND_IN_MODEL and subject.version == 1
        assert "stand-in: generation succeeded, 5 traces" in said and said[-1].startswith("stand-in: fidelity succeeded")

        # The demo generated for the first five problems; a researcher's run over every problem adds the sixth,
        # answered by the stand-in process (not the response cache).
        job = start_from_the_runs_page(owner, study, "all")
        assert job.status == Job.Status.SUCCEEDED and job.failed == 0
        new = Generation.objects.get(run__job=job, problem__problem_id="p5", cached=False).trace
        assert (new.answer, new.answer_correct) == ("15", True) and new.thought.startswith("I start with 7.")

    # The next ./run serves it on another port: the demo moves the subject model (a new configuration version,
    # probed again) and a run against it is answered at the new port.
    with served() as second:
        assert second != first
        research.run_stand_in(study, said.append, url=second)
        assert said[-1] == f"stand-in: subject model 'stand-in' now points at {second}"
        subject.refresh_from_db()
        assert (subject.base_url, subject.version, subject.continuation) == (second, 2, "completions")
        job = start_from_the_runs_page(owner, study, "first:2")
        assert job.status == Job.Status.SUCCEEDED and (job.done, job.failed) == (2, 0)
        answers = Trace.objects.filter(generation__run__job=job, generation__cached=False).order_by("trace_id")
        assert [(t.answer, t.answer_correct) for t in answers] == [("5", True), ("7", True)]

        # Unchanged on the ./run after that.
        research.run_stand_in(study, said.append, url=second)
        assert said[-1] == "stand-in: subject model 'stand-in' exists already"
        assert SubjectModel.objects.get(pk=subject.pk).version == 2


def test_a_taken_port_stops_the_stand_in_before_it_prints_a_url():
    # ./run reads the first line: none (the process ended) means the port was taken, and ./run stops there.
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        proc = subprocess.run([*SERVE, str(taken.getsockname()[1])], cwd=settings.BASE_DIR, capture_output=True,
                              text=True, timeout=60)
    assert proc.returncode != 0 and proc.stdout == "" and "Address already in use" in proc.stderr


def test_the_demo_never_moves_the_stand_in_where_the_policy_refuses_loopback(settings, study):
    made, _ = subjects.do_save_subject(study, {"name": research.STAND_IN_NAME, "model": STAND_IN_MODEL,
                                               "base_url": "http://127.0.0.1:8001/v1"})  # a ./run of before
    settings.MODEL_NETWORKS = ()
    said: list[str] = []
    research.run_stand_in(study, said.append, url="http://127.0.0.1:9001/v1")
    assert said == ["stand-in: not moved -- the address policy (REASONAUDIT_MODEL_NETWORKS) allows no loopback "
                    "model server"]
    assert SubjectModel.objects.get(pk=made.pk).base_url == "http://127.0.0.1:8001/v1"


def test_ctrl_c_stops_the_stand_in_quietly():
    # Ctrl-C in ./run's terminal reaches the stand-in's process too (./run's trap then stops the rest).
    # With SIGINT's default action, as a terminal's foreground process has it: a test run started in the background
    # of a shell without job control (`./test ... &`) ignores SIGINT, and its children inherit that.
    proc = subprocess.Popen([*SERVE, "0"], cwd=settings.BASE_DIR, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert proc.stdout.readline().startswith("http://127.0.0.1:")
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert (proc.returncode, err) == (0, ""), err
