"""The list of kinds of run and their parameters in docs/runs.md, written from the registry (runs.kinds) by
``manage.py run_kinds_doc``; tests/runs/test_kinds_doc.py fails when the file is out of date."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from django.conf import settings
from rest_framework import serializers

from runs import kinds

BEGIN = "<!-- run kinds: written by `manage.py run_kinds_doc` from runs.kinds; do not edit by hand -->"
END = "<!-- end of run kinds -->"


def doc_path() -> Path:
    return Path(settings.BASE_DIR) / "docs" / "runs.md"


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _number(v: float) -> str:
    return f"{int(v):,}" if float(v) == int(v) else f"{v:g}"


def _kind_of_value(f: serializers.Field) -> str:
    if isinstance(f, serializers.BooleanField):
        return "yes / no / any" if f.allow_null else "flag"
    if isinstance(f, serializers.ChoiceField):
        return " / ".join(f"`{c}`" if c else "(empty)" for c in f.choices)
    if isinstance(f, (serializers.IntegerField, serializers.FloatField)):
        low = "" if f.min_value is None else _number(f.min_value)
        high = "" if f.max_value is None else _number(f.max_value)
        return f"{'whole ' if isinstance(f, serializers.IntegerField) else ''}number {low} to {high}".strip()
    if isinstance(f, serializers.ListField):
        return "list"
    return "text"


def _default(f: serializers.Field) -> str:
    if f.required:
        return "required"
    default = f.default
    if default is serializers.empty or default is None or default == "":
        return "--"
    if isinstance(default, bool):
        return "yes" if default else "no"
    if isinstance(default, (list, tuple)):
        default = ",".join(map(str, default))
    return f"`{default}`"


def _help(f: serializers.Field) -> str:
    # The range is its own column: the help's "(1 to 100)" would say it twice.
    return re.sub(r" \([\d.,]+ to [\d.,]+\)$", "", f.help_text or "")


def _row(name: str, f: serializers.Field) -> str:
    return (f"| `{name}` | `--{name.replace('_', '-')}` | {_cell(kinds.label_of(name, f))} | {_cell(_kind_of_value(f))} "
            f"| {_cell(_default(f))} | {_cell(_help(f))} |")


HEAD = "| parameter | option | label | value | default | what it does |\n| --- | --- | --- | --- | --- | --- |"


def render() -> str:
    every = kinds.all_kinds()
    lines = [BEGIN, "", f"{len(every)} kinds. Start any of them with `POST /api/v1/studies/{{id}}/runs/` and "
             '`{"kind": KIND, ...parameters}`, with `python manage.py run KIND --study S [--option value ...] [--wait]`, '
             "or from the study's runs page; the same serializer validates all three.", ""]
    lines += ["**Shared by every kind** (`runs.kinds.RunParams`; a kind that cannot honour one leaves it out):", "", HEAD]
    shared = kinds.RunParams().fields
    lines += [_row(name, shared[name]) for name in kinds.SHARED]
    for kind in every:
        fields = kinds.input_fields(kind, None)
        missing = [name for name in kinds.SHARED if name not in fields]
        lines += ["", f"### `{kind.name}`: {kind.label}", "", kind.help, ""]
        retry = "its own" if kind.retry is not None else "the same parameters again, without force"
        lines += [f"Engine kind `{kind.engine_kind}`; retry: {retry}"
                  + (f"; takes no {', '.join(f'`{m}`' for m in missing)}" if missing else "") + ".", ""]
        own = [name for name in fields if name not in kinds.SHARED]
        if own:
            lines += [HEAD, *(_row(name, fields[name]) for name in own)]
        else:
            lines.append("No parameters of its own.")
    lines += ["", END]
    return "\n".join(lines)


def current(text: str) -> str | None:
    """The generated section of ``text`` (markers included), or None when it has none."""
    start, end = text.find(BEGIN), text.find(END)
    return None if start < 0 or end < 0 else text[start:end + len(END)]


def updated(text: str) -> str:
    section = current(text)
    if section is None:
        raise ValueError(f"docs/runs.md has no section between {BEGIN!r} and {END!r}")
    return text.replace(section, render())
