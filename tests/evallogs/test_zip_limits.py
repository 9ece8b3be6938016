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


def liar(path: Path, size: int, declared: int = 1000, name: str = "samples/1_epoch_1.json") -> Path:
    """``bomb``, then its member's directory entry and local header rewritten to declare ``declared``
    bytes (with the checksum of that many): what the stdlib's reader would stop at, not what the
    library's inflates (issue 29, M1: 1,000 bytes declared, 300 MiB inflated)."""
    import struct
    import zlib

    bomb(path, size, name)
    with zipfile.ZipFile(path) as z:
        info, central = z.getinfo(name), z.start_dir
    data = bytearray(path.read_bytes())
    crc = zlib.crc32(b" " * declared)
    # The local header: CRC at 14, uncompressed size at 22 (zip64: 0xFFFFFFFF there, the real one in
    # the extra field; rewritten too).
    start = info.header_offset
    struct.pack_into("<L", data, start + 14, crc)
    name_len, extra_len = struct.unpack_from("<HH", data, start + 26)
    if struct.unpack_from("<L", data, start + 22)[0] == 0xFFFFFFFF:
        extra = start + 30 + name_len
        struct.pack_into("<Q", data, extra + 4, declared)
    else:
        struct.pack_into("<L", data, start + 22, declared)
    while True:  # the member's directory entry, walking the directory from its start
        n, e, c = struct.unpack_from("<HHH", data, central + 28)
        if bytes(data[central + 46:central + 46 + n]).decode() == name:
            break
        central += 46 + n + e + c
    struct.pack_into("<L", data, central + 16, crc)
    if struct.unpack_from("<L", data, central + 24)[0] == 0xFFFFFFFF:
        n, e = struct.unpack_from("<HH", data, central + 28)
        extra = central + 46 + n
        struct.pack_into("<Q", data, extra + 4, declared)  # the zip64 field's uncompressed size comes first
    else:
        struct.pack_into("<L", data, central + 24, declared)
    path.write_bytes(bytes(data))
    with zipfile.ZipFile(path) as z:
        assert z.getinfo(name).file_size == declared
    return path


def test_a_member_that_inflates_to_more_than_it_declares_is_refused_by_what_it_produces(tmp_path, import_file,
                                                                                        settings):
    settings.IMPORT_MAX_MEMBER_BYTES = 16 << 20
    settings.IMPORT_MAX_ZIP_RATIO = 100_000  # the member limit, not the ratio, is what this test meets
    path = liar(tmp_path / "liar.eval", 64 << 20)
    assert zip_problem(str(path)) is None  # the directory alone lets it through: 1,000 bytes declared
    tracemalloc.start()
    report = import_file(path, "inspect")
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert report.traces_created == 0 and [r["line"] for r in report.rejected] == [0]
    reason = report.rejected[0]["reason"]
    assert "'samples/1_epoch_1.json'" in reason and "REASONAUDIT_IMPORT_MAX_MEMBER_BYTES" in reason
    assert "its directory said 1,000" in reason
    assert peak < 16 << 20  # inflated a chunk at a time, never the member whole


def test_the_ratio_is_checked_on_what_a_member_produces(tmp_path, import_file):
    path = liar(tmp_path / "dense-liar.eval", 8 << 20)  # 8 MiB of blanks in ~8 KB, declared as 1,000 bytes
    assert zip_problem(str(path)) is None
    report = import_file(path, "inspect")
    assert report.traces_created == 0
    assert "REASONAUDIT_IMPORT_MAX_ZIP_RATIO" in report.rejected[0]["reason"]


def test_a_member_whose_data_does_not_match_its_checksum_is_refused(tmp_path, import_file):
    path = liar(tmp_path / "small-liar.eval", 1 << 20, declared=1000)  # 1 MiB: within the ratio's free size
    report = import_file(path, "inspect")
    assert report.traces_created == 0
    assert "checksum" in report.rejected[0]["reason"]
