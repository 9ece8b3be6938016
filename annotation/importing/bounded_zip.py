"""A zip re-packed from what its members actually inflate to, within caps (docs/import-format.md).

A zip's directory declares each member's size, but a reader that inflates the member's whole
stream (inspect_ai's ``.eval`` reader does) produces whatever the stream holds: a 333 KB ``.eval``
whose sample declared 1,000 bytes inflated to 300 MiB (issue 29, M1). Here each member's compressed
bytes are read from its local header and inflated by our own loop, a chunk of at most ``CHUNK``
bytes at a time, counting what is produced -- never what is declared -- against the caps; the
result is written to a new zip whose directory is true. The library then reads that copy, so what
it can inflate is what we produced.
"""

from __future__ import annotations

import io
import struct
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO

CHUNK = 64 * 1024
# Members up to this size may compress as well as they like (a run of blanks): the ratio matters
# where memory does.
RATIO_FREE_BYTES = 1024 * 1024
ZIP_ZSTANDARD = 93  # the method inspect_ai writes (zipfile_zstd's number)
_LOCAL_HEADER = struct.Struct("<4s2B4HL2L2H")
_LOCAL_MAGIC = b"PK\x03\x04"


class ZipRefused(ValueError):
    """Why the archive is not read; the message names the member and the setting."""


@dataclass(frozen=True)
class ZipCaps:
    member_bytes: int  # REASONAUDIT_IMPORT_MAX_MEMBER_BYTES
    total_bytes: int  # REASONAUDIT_IMPORT_MAX_UNCOMPRESSED_BYTES
    ratio: int  # REASONAUDIT_IMPORT_MAX_ZIP_RATIO


class _Slice(io.RawIOBase):
    """``size`` bytes of ``f`` from its current position (a member's compressed data)."""

    def __init__(self, f: IO[bytes], size: int) -> None:
        self.f, self.left = f, size

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        n = self.left if n is None or n < 0 else min(n, self.left)
        data = self.f.read(n) if n else b""
        self.left -= len(data)
        return data

    def readinto(self, buffer) -> int:
        data = self.read(len(buffer))
        buffer[:len(data)] = data
        return len(data)


def _data_start(f: IO[bytes], info: zipfile.ZipInfo) -> None:
    f.seek(info.header_offset)
    header = f.read(_LOCAL_HEADER.size)
    if len(header) != _LOCAL_HEADER.size or header[:4] != _LOCAL_MAGIC:
        raise ZipRefused(f"member {info.filename!r} of the archive has no local header where its directory says")
    fields = _LOCAL_HEADER.unpack(header)
    name_length, extra_length = fields[-2], fields[-1]
    f.seek(info.header_offset + _LOCAL_HEADER.size + name_length + extra_length)


def _inflate(f: IO[bytes], info: zipfile.ZipInfo) -> Iterator[bytes]:
    """The bytes the member's data holds, in chunks of at most CHUNK, whatever its entry declares."""
    _data_start(f, info)
    raw = _Slice(f, info.compress_size)
    if info.compress_type == zipfile.ZIP_STORED:
        while chunk := raw.read(CHUNK):
            yield chunk
    elif info.compress_type == zipfile.ZIP_DEFLATED:
        inflater = zlib.decompressobj(-zlib.MAX_WBITS)
        while not inflater.eof and (data := raw.read(CHUNK)):
            while data:
                # max_length bounds each piece; the input it did not use waits in unconsumed_tail.
                yield inflater.decompress(data, CHUNK)
                data = inflater.unconsumed_tail
        yield inflater.flush()
    elif info.compress_type == ZIP_ZSTANDARD:
        import zstandard

        reader = zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True)
        while chunk := reader.read(CHUNK):  # read(n) returns at most n bytes
            yield chunk
    else:
        raise ZipRefused(f"member {info.filename!r} of the archive uses compression method {info.compress_type}; "
                         "stored, deflate and zstandard are read")


def repack(source: str, target: IO[bytes], caps: ZipCaps, what: str = "the .eval file") -> None:
    """Write to ``target`` a zip of ``source``'s members (the last of a repeated name, as zip readers
    resolve names) holding exactly what their data inflates to. ZipRefused when a member produces
    more than ``caps.member_bytes`` or ``caps.ratio`` times its compressed size (past
    RATIO_FREE_BYTES), when all produce more than ``caps.total_bytes``, or when a member is corrupt;
    a source that is not a zip at all is copied as it is (the library's reader says what it is)."""
    try:
        archive = zipfile.ZipFile(source)
    except (zipfile.BadZipFile, OSError, ValueError):
        with open(source, "rb") as f:
            while chunk := f.read(CHUNK):
                target.write(chunk)
        return
    total = 0
    with archive, open(source, "rb") as f, zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED,
                                                          compresslevel=1) as out:
        members = {info.filename: info for info in archive.infolist()}
        for info in members.values():
            if info.is_dir():
                continue
            produced, crc = 0, 0
            ratio_cap = max(RATIO_FREE_BYTES, caps.ratio * max(1, info.compress_size))
            try:
                with out.open(info.filename, "w", force_zip64=True) as dst:
                    for chunk in _inflate(f, info):
                        produced += len(chunk)
                        total += len(chunk)
                        if produced > caps.member_bytes:
                            raise ZipRefused(
                                f"member {info.filename!r} of {what} expands to more than {caps.member_bytes:,} "
                                f"bytes (REASONAUDIT_IMPORT_MAX_MEMBER_BYTES; its directory said "
                                f"{info.file_size:,})")
                        if produced > ratio_cap:
                            raise ZipRefused(
                                f"member {info.filename!r} of {what} expands more than {caps.ratio} times "
                                f"({info.compress_size:,} compressed bytes to more than {ratio_cap:,}; "
                                "REASONAUDIT_IMPORT_MAX_ZIP_RATIO)")
                        if total > caps.total_bytes:
                            raise ZipRefused(
                                f"{what} expands to more than {caps.total_bytes:,} bytes (at member "
                                f"{info.filename!r}; REASONAUDIT_IMPORT_MAX_UNCOMPRESSED_BYTES)")
                        crc = zlib.crc32(chunk, crc)
                        dst.write(chunk)
            except zlib.error as exc:
                raise ZipRefused(f"member {info.filename!r} of {what} is corrupt ({exc})") from None
            except zipfile.BadZipFile as exc:
                raise ZipRefused(f"member {info.filename!r} of {what} is corrupt ({exc})") from None
            except Exception as exc:  # a zstandard error: its class lives in an optional package
                if isinstance(exc, ZipRefused) or type(exc).__module__.split(".")[0] != "zstandard":
                    raise
                raise ZipRefused(f"member {info.filename!r} of {what} is corrupt ({exc})") from None
            if crc != info.CRC:
                raise ZipRefused(f"member {info.filename!r} of {what} is corrupt (its checksum does not match "
                                 "its data)")
