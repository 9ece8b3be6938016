"""Attachments resolved many times over are counted before anything is joined (issue 29, M1): an
Inspect sample whose input repeats one attachment in many messages is refused, by position, with the
setting named -- the other samples still import."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import inspect_ai._util.zipfile  # noqa: F401 - teaches zipfile the zstd members of Inspect's logs
import pytest

from tests.evallogs.conftest import INSPECT_LOG

pytestmark = pytest.mark.django_db

SAMPLE = "samples/duck-eggs_epoch_1.json"
KEY = "0123456789abcdef0123456789abcdef"


def repeated_attachment(path: Path, copies: int, size: int) -> Path:
    """The real log with one sample's input made of ``copies`` user messages, each one attachment
    of ``size`` characters (the log stays small: the attachment is stored once)."""
    with zipfile.ZipFile(INSPECT_LOG) as src, zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as out:
        for info in src.infolist():
            data = src.read(info)
            if info.filename == SAMPLE:
                sample = json.loads(data)
                sample["input"] = [{"role": "user", "content": f"attachment://{KEY}"}] * copies
                sample["attachments"] = {**(sample.get("attachments") or {}), KEY: "y" * size}
                data = json.dumps(sample).encode()
            out.writestr(info.filename, data)
    return path


def test_a_sample_whose_attachments_expand_past_the_statement_limit_is_refused(tmp_path, import_file, settings):
    settings.IMPORT_MAX_STATEMENT_CHARS = 1_000_000
    path = repeated_attachment(tmp_path / "repeat.eval", copies=300, size=10_000)  # 3,000,000 characters
    assert path.stat().st_size < 1 << 20
    report = import_file(path, "inspect", skip_invalid=True)
    # The other three problems' six traces; duck-eggs' problem is refused, so both its epochs are.
    assert report.traces_created == 6
    reasons = [r["reason"] for r in report.rejected]
    assert any("3,000,000 characters" in r and "REASONAUDIT_IMPORT_MAX_STATEMENT_CHARS" in r for r in reasons), reasons


def test_the_same_log_within_the_limit_imports(tmp_path, import_file, settings):
    settings.IMPORT_MAX_STATEMENT_CHARS = 4_000_000
    path = repeated_attachment(tmp_path / "repeat.eval", copies=300, size=10_000)
    report = import_file(path, "inspect")
    assert report.committed and report.traces_created == 8, report.rejected
