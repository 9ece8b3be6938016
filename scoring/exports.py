"""Exports: a registry of export kinds (``--what``) and the writers of every
format (JSONL, CSV, Parquet), shared by the ``export`` command, the download
links of the pages and any app that adds a kind.

Adding a kind::

    from scoring import exports

    @exports.register("agreement", help="metrics of --candidate against --reference")
    def agreement(request: exports.ExportRequest) -> exports.Table:
        return exports.Table(columns=[...], rows=[{...}, ...])

Register in the app's ``AppConfig.ready`` so the command sees it. Kinds named
in ``PLANNED`` but not registered answer a clear "not implemented yet".
"""

from __future__ import annotations

import csv
import importlib
import io
import json
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import IO, Any

import numpy as np
import pandas as pd

FORMATS = ("jsonl", "csv", "parquet")
CONTENT_TYPES = {"jsonl": "application/x-ndjson", "csv": "text/csv; charset=utf-8",
                 "parquet": "application/vnd.apache.parquet"}
#: Every kind docs/interfaces.md names; those not registered are not implemented yet.
PLANNED = ("scores", "labels", "hazard", "leaderboard", "agreement", "lucky-guesses", "prm-training")
#: First characters that make a spreadsheet read a cell as a formula.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


class ExportError(ValueError):
    """A request that cannot be exported; the message is shown to the user."""


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
    """Rows to write: a DataFrame or dicts, with the column order."""

    columns: list[str]
    rows: pd.DataFrame | list[dict[str, Any]]

    def records(self) -> Iterable[dict[str, Any]]:
        if isinstance(self.rows, pd.DataFrame):
            from scoring.core import to_records

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


_REGISTRY: dict[str, Kind] = {}
# Modules whose @register calls fill the registry. Loaded on first use rather
# than at start-up: they pull in pandas and the analytics code.
KIND_MODULES = ["scoring.export_kinds"]


def _load_kinds() -> None:
    for module in KIND_MODULES:
        importlib.import_module(module)


def register(name: str, *, help: str = "") -> Callable:
    def decorate(fn: Callable[[ExportRequest], Table]) -> Callable[[ExportRequest], Table]:
        _REGISTRY[name] = Kind(name, fn, help)
        return fn

    return decorate


def kinds() -> list[str]:
    """Every --what value: registered ones and the planned ones."""
    _load_kinds()
    return list(dict.fromkeys([*PLANNED, *_REGISTRY]))


def build(request: ExportRequest) -> Table:
    _load_kinds()
    kind = _REGISTRY.get(request.what)
    if kind is None:
        if request.what in PLANNED:
            raise ExportError(f"--what {request.what} is not implemented yet; available: {', '.join(sorted(_REGISTRY))}")
        raise ExportError(f"unknown export {request.what!r}; choose one of {', '.join(kinds())}")
    return kind.build(request)


# ---------------------------------------------------------------------------
# Writers
# ---------------------------------------------------------------------------
def neutralize(value: Any) -> Any:
    """A CSV cell a spreadsheet will not run: text starting with = + - @, tab
    or CR gets a leading single quote. Numbers stay numbers (-1.5 is data)."""
    if isinstance(value, str) and value.startswith(_FORMULA_START):
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
    for row in table.records():
        writer.writerow([_csv_cell(row.get(c)) for c in table.columns])
        n += 1
    return n


def write_parquet(table: Table, out: IO[bytes]) -> int:
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


def render(table: Table, fmt: str) -> bytes:
    """The whole export in memory (downloads from the pages)."""
    if fmt == "parquet":
        buf = io.BytesIO()
        write_parquet(table, buf)
        return buf.getvalue()
    text = io.StringIO()
    write(table, fmt, text)
    return text.getvalue().encode()
