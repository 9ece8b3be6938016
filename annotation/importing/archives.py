"""Uploads that are folders: a .zip or .tar(.gz) archive unpacked into a temporary folder.

The upload form offers the formats the CLI reads from a path (``abstraction-outputs``: a tree of
``<level>/<sub_dataset>/output.json``; ``lm-eval``: a samples file with the results JSON beside it) by
unpacking an archive, or the two lm-eval files, into a folder of their own. Archive members may not
leave that folder (no absolute paths, no ``..``, no links), and the unpacked size is bounded like an
upload, so a small archive cannot fill the disk.
"""

from __future__ import annotations

import tarfile
import zipfile
from pathlib import Path, PurePosixPath

from reasonlib.refusals import Invalid

ARCHIVE_SUFFIXES = (".zip", ".tar", ".tar.gz", ".tgz")


class ArchiveError(Invalid):
    """An upload archive refused (a member outside its folder, too many or too large members)."""


def is_archive(name: str) -> bool:
    return name.lower().endswith(ARCHIVE_SUFFIXES)


def _safe_member(name: str) -> PurePosixPath:
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts or (path.parts and ":" in path.parts[0]):
        raise ArchiveError(f"{name}: archive member outside the archive's folder")
    return path


def extract(archive: Path, dest: Path, *, max_bytes: int, root_names: frozenset[str] = frozenset()) -> Path:
    """Unpack ``archive`` into ``dest`` and return the folder holding its content: ``dest`` itself, or the
    one top-level folder when the archive wraps everything in one (as zipping a folder does) and that
    folder is not itself one of ``root_names`` (the names the format expects at its root, e.g. ``l1_chat``)."""
    name = archive.name.lower()
    total = 0
    if name.endswith(".zip"):
        try:
            zf = zipfile.ZipFile(archive)
        except zipfile.BadZipFile as exc:
            raise ArchiveError(f"{archive.name}: not a zip archive ({exc})") from None
        with zf:
            for info in zf.infolist():
                _safe_member(info.filename)
                total += info.file_size
                if total > max_bytes:
                    raise ArchiveError(f"{archive.name}: unpacks to more than {max_bytes:,} bytes (the import limit)")
            zf.extractall(dest)
    elif name.endswith((".tar", ".tar.gz", ".tgz")):
        try:
            tf = tarfile.open(archive)
        except tarfile.TarError as exc:
            raise ArchiveError(f"{archive.name}: not a tar archive ({exc})") from None
        with tf:
            for member in tf.getmembers():
                _safe_member(member.name)
                if not (member.isfile() or member.isdir()):
                    raise ArchiveError(f"{member.name}: links and devices are not accepted in an archive")
                total += member.size
                if total > max_bytes:
                    raise ArchiveError(f"{archive.name}: unpacks to more than {max_bytes:,} bytes (the import limit)")
            tf.extractall(dest, filter="data")
    else:
        raise ArchiveError(f"{archive.name}: expected a .zip, .tar, .tar.gz or .tgz archive")
    entries = [p for p in dest.iterdir() if p.name != "__MACOSX"]
    if len(entries) == 1 and entries[0].is_dir() and entries[0].name not in root_names:
        return entries[0]
    return dest
