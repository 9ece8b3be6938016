"""The committed logs of tests/data/evallogs (written by make_logs.py) and a helper that imports a file from disk,
as ``manage.py import_traces`` does (lm-eval needs the results JSON beside the samples file)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from annotation.importing.pipeline import ImportReport, import_stream
from annotation.models import Study

DATA = Path(__file__).resolve().parent.parent / "data" / "evallogs"
INSPECT_LOG = DATA / "inspect.eval"
LM_EVAL_DIR = DATA / "lm-eval"
LM_EVAL_SAMPLES = next(LM_EVAL_DIR.glob("samples_gsm8k_local_*.jsonl"))
LM_EVAL_RESULTS = next(LM_EVAL_DIR.glob("results_*.json"))


@pytest.fixture
def import_file(study) -> Callable[..., ImportReport]:
    def run(path: Path, fmt: str, *, skip_invalid: bool = False, target: Study | None = None) -> ImportReport:
        with path.open("rb") as fh:
            return import_stream(target or study, fh, fmt, skip_invalid=skip_invalid)

    return run
