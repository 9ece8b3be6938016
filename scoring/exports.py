"""Exports: a registry of export kinds (``--what``) and the writers of every
format (JSONL, CSV, Parquet), shared by the ``export`` command, the download
links of the pages and any app that adds a kind.

Adding a kind::

    from scoring import exports

    @exports.register("agreement", help="metrics of --candidate against --reference")
    def agreement(request: exports.ExportRequest) -> exports.Table:
        return exports.Table(columns=[...], rows=[{...}, ...])

Register in the module an app names as ``export_kinds`` on its AppConfig
(loaded on first use, so that this app never imports the apps that add
kinds, e.g. ``agreement``). Kinds
named in ``PLANNED`` but not registered answer a clear "not implemented yet".
A kind registered with ``restricted=True`` is refused to members who are not
owners or adjudicators (``ExportForbidden``); ``check`` validates a request
cheaply before an export job is queued. Every kind declares the label sources
it reads (``reads``, annotation.gate; a kind that declares nothing reads every
source) and the visibility gate refuses it to a member who may not read them.

Every written file can carry a manifest (``manifest``; ``write_file`` puts it
next to the file as ``<file>.manifest.json``): study, export, filters,
profile version, sources, counts, code version and time -- what a paper
cites. Tables whose rows are an iterator are written as they come (flat
memory); Parquet then goes out in row groups through ``ParquetWriter``.
"""

from __future__ import annotations

import csv
import importlib
import io
import json
import math
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np
import pandas as pd

from annotation import access, gate
from annotation.access import AccessDenied
from annotation.gate import Source
from reasonlib.refusals import Invalid
from runs.version import code_version

FORMATS = ("jsonl", "csv", "parquet")
CONTENT_TYPES = {"jsonl": "application/x-ndjson", "csv": "text/csv; charset=utf-8",
                 "parquet": "application/vnd.apache.parquet"}
#: Every kind docs/exports.md names; those not registered are not implemented yet.
PLANNED = ("scores", "labels", "hazard", "leaderboard", "agreement", "lucky-guesses", "prm-training")
#: First characters that make a spreadsheet read a cell as a formula.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


class ExportError(Invalid):
    """A request that cannot be exported; the message is shown to the user as it was written. Raisers
    write the field (or the command's option) first ("--profile: no profile named ..."), so the field is
    read off the message; without one it is about ``what`` is exported."""

    def __init__(self, message: str) -> None:
        named = re.match(r"^-*([a-z_]+): (.*)$", message, re.S)
        super().__init__(named.group(2) if named else message, field=named.group(1) if named else "what",
                         said=message)


class ExportForbidden(AccessDenied):
    """The member's role does not allow this kind of export: a refusal
    (annotation.access), answered 403 like every other, not a bad request."""


@dataclass
class ExportRequest:
    study: Any
    what: str
    source: str | None = None
    profile: str | None = None
    reference: str | None = None
    candidate: str | None = None
    model: str = ""
    domain: str = ""
    membership: Any = None  # restricts trace-level rows for annotators of blind studies
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Table:
    """Rows to write: a DataFrame, or dicts (a list, or an iterator that is
    written as it comes), with the column order.

    ``schema`` (column -> ``string``, ``int64``, ``float64``, ``bool``,
    ``list<int64>``, ``list<float64>``, ``list<string>``, ``timestamp`` or
    ``json``) fixes the Parquet types, so a streamed table is written in
    row groups; ``json`` columns (nested objects) are JSON text in Parquet.
    ``meta`` goes into the manifest (profile, sources, counts, ...); a
    builder may fill it while its rows stream.
    """

    columns: list[str]
    rows: pd.DataFrame | list[dict[str, Any]] | Iterator[dict[str, Any]]
    schema: dict[str, str] | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    # Each row is a whole JSON object (an import record, ``--what traces``): JSONL writes it as it is,
    # with only its own keys; CSV and Parquet one row per object (``line_cells``).
    lines: bool = False

    def records(self) -> Iterable[dict[str, Any]]:
        if self.lines:
            return iter(self.rows)  # type: ignore[arg-type]
        if isinstance(self.rows, pd.DataFrame):
            from scoring.core.aggregate import to_records

            return to_records(self.rows[self.columns])
        return ({c: row.get(c) for c in self.columns} for row in self.rows)

    def frame(self) -> pd.DataFrame:
        if isinstance(self.rows, pd.DataFrame):
            return self.rows[self.columns]
        return pd.DataFrame(list(self.records()), columns=self.columns)


@dataclass(frozen=True)
class Kind:
    name: str
    build: Callable[[ExportRequest], Table]
    help: str = ""
    restricted: bool = False  # owners and adjudicators only
    check: Callable[[ExportRequest], None] | None = None
    reads: frozenset[Source] = frozenset(Source)  # what it reads (annotation.gate); undeclared: everything
    # About a suite or benchmark (fidelity, abstraction): reads their variants and items. Every other kind
    # reads the study's own traces only (Trace.objects.of_study), which tests/test_own_items.py checks.
    suites: bool = False


_REGISTRY: dict[str, Kind] = {}


def kind_modules() -> list[str]:
    """Modules whose @register calls fill the registry: the ``export_kinds``
    of every installed app (scoring's own and, e.g., agreement's). Loaded
    on first use rather than at start-up: they pull in pandas and the
    analytics code."""
    from django.apps import apps

    return [m for cfg in apps.get_app_configs() if (m := getattr(cfg, "export_kinds", None))]


def _load_kinds() -> None:
    for module in kind_modules():
        importlib.import_module(module)


def register(name: str, *, help: str = "", restricted: bool = False,
             check: Callable[[ExportRequest], None] | None = None, reads: Iterable[Source] | None = None,
             suites: bool = False) -> Callable:
    def decorate(fn: Callable[[ExportRequest], Table]) -> Callable[[ExportRequest], Table]:
        _REGISTRY[name] = Kind(name, fn, help, restricted, check,
                               frozenset(reads) if reads is not None else frozenset(Source), suites)
        return fn

    return decorate


def kind(name: str) -> Kind:
    """The registered kind ``name``; ExportError for planned or unknown ones."""
    _load_kinds()
    found = _REGISTRY.get(name)
    if found is None:
        if name in PLANNED:
            raise ExportError(f"--what {name} is not implemented yet; available: {', '.join(sorted(_REGISTRY))}")
        raise ExportError(f"unknown export {name!r}; choose one of {', '.join(kinds())}")
    return found


def allowed(request: ExportRequest) -> None:
    """Raise ExportForbidden when the request's member may not export its kind
    (no membership: the command line, which the server's operator runs)."""
    found = kind(request.what)
    m = request.membership
    if found.restricted and m is not None and not access.can_adjudicate(m):
        raise ExportForbidden(f"{request.what} exports carry every source's labels: they are for owners and "
                              f"adjudicators; you are {m.role}")
    gate.check(m, f"the {request.what} export", found.reads)


def check(request: ExportRequest) -> None:
    """Validate a request without building it (permission, then the kind's own check)."""
    allowed(request)
    found = kind(request.what)
    if found.check is not None:
        found.check(request)


def kinds() -> list[str]:
    """Every --what value: registered ones and the planned ones."""
    _load_kinds()
    return list(dict.fromkeys([*PLANNED, *_REGISTRY]))


def build(request: ExportRequest) -> Table:
    allowed(request)
    return kind(request.what).build(request)


# ---------------------------------------------------------------------------
# Writers
# ---------------------------------------------------------------------------
def neutralize(value: Any) -> Any:
    """A CSV cell a spreadsheet will not run: text starting with = + - @, tab
    or CR -- also after leading spaces, tabs or line breaks, which spreadsheets skip
    (" =1+1", "\n@SUM(A1)") -- gets a leading single quote. Numbers stay numbers (-1.5 is data)."""
    if isinstance(value, str) and (value.startswith(_FORMULA_START) or value.lstrip().startswith(_FORMULA_START)):
        return "'" + value
    return value


def _csv_cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, float) and math.isnan(value):
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple, dict)):
        return json.dumps(value)  # "[0.1, 0.2]": starts with [ or {, nothing to neutralize
    if isinstance(value, (int, float)):
        return value
    return neutralize(str(value))


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def _clean(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def line_cells(row: dict[str, Any]) -> dict[str, Any]:
    """A whole-object row as table cells: its kind, problem and trace ids, and the object as JSON."""
    return {"kind": row.get("kind"), "problem_id": row.get("problem_id"), "trace_id": row.get("trace_id"),
            "record": json.dumps(row, ensure_ascii=False, default=_json_default, allow_nan=False)}


def _cells(table: Table) -> Iterable[dict[str, Any]]:
    rows = table.records()
    return (line_cells(r) for r in rows) if table.lines else rows


def write_jsonl(table: Table, out: IO[str]) -> int:
    n = 0
    for row in table.records():
        out.write(json.dumps({k: _clean(v) for k, v in row.items()}, default=_json_default, allow_nan=False))
        out.write("\n")
        n += 1
    return n


def write_csv(table: Table, out: IO[str]) -> int:
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([neutralize(c) for c in table.columns])
    n = 0
    for row in _cells(table):
        writer.writerow([_csv_cell(row.get(c)) for c in table.columns])
        n += 1
    return n


#: Rows per Parquet row group (and per batch held in memory) of streamed tables.
ROW_GROUP_ROWS = 50_000


def _arrow_type(name: str):
    import pyarrow as pa

    simple = {"string": pa.string(), "int64": pa.int64(), "float64": pa.float64(), "bool": pa.bool_(),
              "json": pa.string(), "timestamp": pa.timestamp("us", tz="UTC")}
    if name in simple:
        return simple[name]
    if name.startswith("list<") and name.endswith(">"):
        return pa.list_(_arrow_type(name[5:-1]))
    raise ValueError(f"unknown column type {name!r}")


def _json_text(value: Any) -> str | None:
    if value is None:
        return None
    return json.dumps(value, default=_json_default, allow_nan=False)


def _write_parquet_batches(table: Table, out: IO[bytes]) -> int:
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema([(c, _arrow_type(table.schema[c])) for c in table.columns])
    as_json = [c for c in table.columns if table.schema[c] == "json"]
    n = 0
    with pq.ParquetWriter(out, schema) as writer:
        batch: list[dict[str, Any]] = []

        def flush() -> None:
            if as_json:
                for row in batch:
                    for c in as_json:
                        row[c] = _json_text(row.get(c))
            writer.write_table(pa.Table.from_pylist(batch, schema=schema), row_group_size=ROW_GROUP_ROWS)
            batch.clear()

        for row in _cells(table):
            batch.append({k: _clean(v) for k, v in row.items()})
            n += 1
            if len(batch) >= ROW_GROUP_ROWS:
                flush()
        if batch or n == 0:
            flush()
    return n


def write_parquet(table: Table, out: IO[bytes]) -> int:
    if table.schema is not None:
        return _write_parquet_batches(table, out)
    import pyarrow as pa
    import pyarrow.parquet as pq

    frame = table.frame()
    # Lists (confidence intervals) and mixed columns as Arrow infers them;
    # nullable pandas types map to nullable Arrow types.
    arrow = pa.Table.from_pandas(frame, preserve_index=False)
    pq.write_table(arrow, out)
    return len(frame)


def write(table: Table, fmt: str, out: IO) -> int:
    """Write ``table`` as ``fmt`` to ``out`` (text stream for jsonl/csv, binary
    for parquet). Returns the number of rows."""
    if fmt == "jsonl":
        return write_jsonl(table, out)
    if fmt == "csv":
        return write_csv(table, out)
    if fmt == "parquet":
        return write_parquet(table, out)
    raise ExportError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")


# ---------------------------------------------------------------------------
# Manifests: what a paper cites
# ---------------------------------------------------------------------------


_UNSET = object()


def _profile_of(request: ExportRequest) -> dict[str, Any] | None:
    from scoring import services

    try:
        p = services.resolve_profile(request.study, request.profile)
    except services.UnknownProfile:
        return None
    return {"name": p.name, "version": p.version, "params": p.params}


def manifest(request: ExportRequest, table: Table, fmt: str, rows: int, *, filename: str | None = None) -> dict[str, Any]:
    """The manifest of one written export (JSON-ready)."""
    from django.utils import timezone

    meta = dict(table.meta)
    meta.pop("expected_rows", None)
    profile = meta.pop("profile", _UNSET)
    if profile is _UNSET:
        profile = _profile_of(request)
    filters = {k: getattr(request, k) for k in ("source", "reference", "candidate", "model", "domain")
               if getattr(request, k)}
    filters.update({k: v for k, v in request.extra.items() if v not in (None, "") and k != "group"})
    if request.what == "leaderboard":
        filters["group"] = request.extra.get("group", "model")
    applied = meta.pop("applied", None)
    if applied is not None:
        # A builder that names the filters it applies: the manifest lists only
        # those, and the given ones it ignored apart, so no filter is claimed
        # that was not applied (issue 23).
        ignored = sorted(k for k in filters if k not in applied)
        filters = {k: v for k, v in filters.items() if k in applied}
        if ignored:
            meta["ignored_options"] = ignored
    sources = meta.pop("sources", None)
    if sources is None:
        sources = [request.source or "final"]
    counts = {"rows": rows, **meta.pop("counts", {})}
    return json.loads(json.dumps({
        "generator": "ReasonAudit",
        "code_version": code_version(),
        "created_at": timezone.now().isoformat(),
        "study": {"id": request.study.pk, "name": request.study.name},
        "export": {"what": request.what, "format": fmt, "file": filename, "columns": list(table.columns)},
        "filters": filters,
        "profile": profile,
        "sources": sources,
        "counts": counts,
        **meta,
    }, default=_json_default, allow_nan=False))


def download(request: ExportRequest, fmt: str, *, manifest_only: bool = False, filename: str = ""):
    """A page's download: the table of ``request`` as an attachment, or (``manifest_only``) the
    manifest describing that file. ExportError (a bad format too) and ExportForbidden go to the caller
    (400 / 403)."""
    from django.http import HttpResponse

    if fmt not in FORMATS:
        raise ExportError(f"format: choose one of {', '.join(FORMATS)}")
    table = build(request)
    name = filename or f"{request.what}.{fmt}"
    buffer: IO[Any] = io.BytesIO() if fmt == "parquet" else io.StringIO()
    n = write(table, fmt, buffer)
    if manifest_only:
        return HttpResponse(json.dumps(manifest(request, table, fmt, n, filename=name), indent=2),
                            content_type="application/json")
    response = HttpResponse(buffer.getvalue(), content_type=CONTENT_TYPES[fmt])
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response


def manifest_path(path: Path) -> Path:
    return path.with_name(path.name + ".manifest.json")


def write_file(table: Table, fmt: str, path: Path, request: ExportRequest) -> dict[str, Any]:
    """Write ``table`` to ``path`` and its manifest to ``<path>.manifest.json``;
    returns the manifest."""
    path = Path(path)
    mode, kwargs = ("wb", {}) if fmt == "parquet" else ("w", {"encoding": "utf-8", "newline": ""})
    with path.open(mode, **kwargs) as fh:
        n = write(table, fmt, fh)
    info = manifest(request, table, fmt, n, filename=path.name)
    manifest_path(path).write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
    return info
