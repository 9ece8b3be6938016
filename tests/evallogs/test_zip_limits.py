"""Issue 20, ".eval uploads are ZIP files read whole into memory": the zip's directory is checked
before anything is decompressed -- a member too large, too much in all, or a member that expands too
many times is refused with an import error naming the member."""

from __future__ import annotations

import tracemalloc
import zipfile
from pathlib import Path

import inspect_ai._util.zipfile  # noqa: F401 - teaches zipfile the zstd members of Inspect's logs
import pytest

from annotation.importing.inspect_logs import zip_problem
from tests.evallogs.conftest import INSPECT_LOG

pytestmark = pytest.mark.django_db


def bomb(path: Path, size: int, name: str = "samples/1_epoch_1.json") -> Path:
    """A real log with one more member of ``size`` blanks, deflated (about 1,000 times smaller)."""
    with zipfile.ZipFile(INSPECT_LOG) as src, zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as out:
        for info in src.infolist():
            if info.filename != name:
                out.writestr(info.filename, src.read(info))  # deflated: the stdlib writes it without a patch
        added = zipfile.ZipInfo(name)
        added.compress_type = zipfile.ZIP_DEFLATED
        with out.open(added, "w", force_zip64=True) as member:
            chunk = b" " * (1 << 20)
            for _ in range(size >> 20):
                member.write(chunk)
    return path


def test_a_zip_bomb_is_refused_from_the_directory_without_reading_it(tmp_path, import_file, settings):
    # 128 MiB of blanks in about 128 KB, against a member limit of 64 MiB (the default is 256 MiB: the
    # same check, without compressing a gigabyte in the test).
    settings.IMPORT_MAX_MEMBER_BYTES = 64 << 20
    path = bomb(tmp_path / "bomb.eval", 128 << 20)
    assert path.stat().st_size < 1 << 20
    tracemalloc.start()
    report = import_file(path, "inspect")
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert not report.committed or report.traces_created == 0
    assert [r["line"] for r in report.rejected] == [0]
    reason = report.rejected[0]["reason"]
    assert "'samples/1_epoch_1.json'" in reason and "REASONAUDIT_IMPORT_MAX_MEMBER_BYTES" in reason
    assert peak < 32 << 20  # nothing was decompressed


def test_the_ratio_and_total_limits_name_the_member(tmp_path, settings):
    path = bomb(tmp_path / "dense.eval", 8 << 20)  # 8 MiB of blanks: under the member limit
    reason = zip_problem(str(path))
    assert "'samples/1_epoch_1.json'" in reason and "REASONAUDIT_IMPORT_MAX_ZIP_RATIO" in reason
    settings.IMPORT_MAX_ZIP_RATIO = 100_000
    assert zip_problem(str(path)) is None
    settings.IMPORT_MAX_UNCOMPRESSED_BYTES = 4 << 20
    assert "REASONAUDIT_IMPORT_MAX_UNCOMPRESSED_BYTES" in zip_problem(str(path))


def test_a_real_log_passes(import_file):
    assert zip_problem(str(INSPECT_LOG)) is None
    assert import_file(INSPECT_LOG, "inspect").traces_created == 8
