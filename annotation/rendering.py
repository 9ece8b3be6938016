r"""Turning user text into safe HTML.

Two kinds of text reach a page:

* text people write on purpose in Markdown -- skeleton assertions, notes,
  adjudication reasons, problem statements: Markdown is rendered, math
  (``$..$``, ``$$..$$``, ``\(..\)``, ``\[..\]``) is kept verbatim in a
  ``span.math`` for KaTeX (run in the browser with ``trust: false``), and the
  HTML is sanitized with nh3 against an allow-list;
* text models wrote -- trace steps, raw outputs: escaped, never interpreted,
  so ``<<48/2=24>>`` and stray tags show as written (KaTeX typesets only
  ``\(..\)``, ``\[..\]`` and ``$$..$$`` there: a lone ``$`` is money).

Raw HTML inside Markdown is escaped first, so an ``<img onerror>`` shows as
text instead of being dropped silently; nh3 is the second wall.
"""

from __future__ import annotations

import html
import re
from functools import lru_cache

import markdown
import nh3
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from reasonlib.step_functions import FUNCTION_LABELS, FUNCTION_NAMES, FUNCTIONS

# Display math first so "$$" is never read as two empty inline spans.
_MATH_RE = re.compile(
    r"(\$\$.+?\$\$|\\\[.+?\\\]|\\\(.+?\\\)|(?<![\\$\w])\$(?=\S)(?:[^$\n\\]|\\.)+?(?<=\S)\$(?!\w))",
    re.DOTALL,
)
_ALLOWED_TAGS = {
    "p", "br", "em", "strong", "code", "pre", "ul", "ol", "li", "blockquote", "a", "sub", "sup", "span",
    "h4", "h5", "h6", "hr", "del", "table", "thead", "tbody", "tr", "th", "td",
}
_ALLOWED_ATTRS = {"a": {"href", "title"}, "span": {"class"}, "code": {"class"}}
_MD_EXTENSIONS = ["sane_lists", "tables"]


def _sanitize(fragment: str) -> str:
    return nh3.clean(
        fragment,
        tags=_ALLOWED_TAGS,
        attributes=_ALLOWED_ATTRS,
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer nofollow",
        strip_comments=True,
    )


@lru_cache(maxsize=4096)
def _markdown(text: str) -> str:
    math: list[str] = []

    def stash(m: re.Match[str]) -> str:
        math.append(m.group(0))
        return f"\ue000{len(math) - 1}\ue001"

    # The placeholders' private-use characters cannot come from the user.
    protected = _MATH_RE.sub(stash, text.replace("\ue000", "").replace("\ue001", ""))
    # Escape raw HTML so Markdown never passes tags through; entities survive
    # Markdown untouched.
    body = markdown.markdown(html.escape(protected, quote=False), extensions=_MD_EXTENSIONS, output_format="html")
    body = _sanitize(body)
    # Math goes back escaped inside a marked span: KaTeX (static/js/math.js)
    # typesets exactly these spans, and without JavaScript they read as TeX.
    return re.sub("\ue000(\\d+)\ue001", lambda m: _math_span(math[int(m.group(1))]), body)


def _math_span(tex: str) -> str:
    if tex.startswith("$$") or tex.startswith("\\["):
        inner, display = tex[2:-2], True
    elif tex.startswith("\\("):
        inner, display = tex[2:-2], False
    else:
        inner, display = tex[1:-1], False
    return format_html('<span class="{}">{}</span>', "math display" if display else "math", inner)


def render_markdown(text: str | None) -> SafeString:
    """Markdown + math -> sanitized HTML; math spans are typeset by static/js/math.js."""
    if not text:
        return mark_safe("")
    return mark_safe(_markdown(text))  # noqa: S308 - sanitized by nh3 above


_MARKUP_RE = re.compile(r"[$*_\\`\[#>~|]|^\s*(?:[-+]|\d+\.)\s", re.MULTILINE)


def has_markup(text: str | None) -> bool:
    """Whether rendering changes how ``text`` looks (the editor previews only then)."""
    return bool(text and _MARKUP_RE.search(text))


def render_inline(text: str | None) -> SafeString:
    """Like :func:`render_markdown` for one-liners: without the wrapping <p>."""
    out = str(render_markdown(text))
    if out.startswith("<p>") and out.endswith("</p>") and out.count("<p>") == 1:
        out = out[3:-4]
    return mark_safe(out)  # noqa: S308


def raw_with_boundaries(raw: str, spans: list[tuple[int, int | None, int | None]]) -> SafeString:
    """The raw model output, escaped, with each step's span wrapped in a
    ``<mark>`` that names the step. ``spans`` are (index, start, end)."""
    pieces: list[tuple[str, str]] = []  # (text before the step, the step's mark); escaped by format_html
    pos = 0
    for index, start, end in sorted((s for s in spans if s[1] is not None and s[2] is not None), key=lambda s: s[1]):
        if start < pos or end > len(raw) or end < start:
            continue
        mark = format_html('<mark class="seg" data-step="{}" id="raw-{}"><sup>{}</sup>{}</mark>',
                           index, index, index, raw[start:end])
        pieces.append((raw[pos:start], mark))
        pos = end
    return format_html("{}{}", format_html_join("", "{}{}", pieces), raw[pos:])


_VERDICT_KEYS = (("valid", "V"), ("invalid", "I"), ("neutral", "N"))
_VERDICTS = frozenset(value for value, _ in _VERDICT_KEYS)
_LABEL_KINDS = frozenset({"human", "judge", "adjudication"})
#: The step-function tags' chips (reasonlib.step_functions), keyed ``f`` then 1..8 on the page.
_TAG_SHORT = dict(zip(FUNCTION_NAMES, ("setup", "plan", "fact", "compute", "uncertain", "consolidate", "check",
                                       "answer"), strict=True))
_TAG_KINDS = frozenset({"human", "judge", "imported"})


def step_rows_html(rows: list[dict], positions: list[int], first_error: int | None) -> SafeString:
    """The review page's step list items.

    Not a template loop: a 200-step trace with a 10-step skeleton has ~3,000
    inputs, which Django's template engine renders in ~80 ms. One
    ``format_html`` per row instead, whose format string (``_row_format``)
    holds only constant markup and placeholder names; every value fills a
    placeholder and is escaped there. A verdict or label kind becomes part of
    a ``class`` only when it is a known one (an allow-list): a re-rendered
    form whose posted verdict is anything else shows the step as unlabelled.
    """
    fmt = _row_format(len(positions))
    # The same for every row: the skeleton positions, marked safe once (digits only).
    shown = {f"k{j}": _number(k) for j, k in enumerate(positions)}
    return format_html_join("", "{}", ((_step_row(fmt, shown, r, positions, first_error),) for r in rows))


@lru_cache(maxsize=64)
def _row_format(n_positions: int) -> str:
    """The format string of one step row for a skeleton of ``n_positions``
    steps: constant markup and placeholder names, no data."""
    verdicts = "".join(
        f'<label class="vb {value}"><input type="radio" name="v{{i}}" value="{value}"{{c_{value}}}>'
        f"<span>{key}</span></label>"
        for value, key in _VERDICT_KEYS
    )
    refs = ""
    if n_positions:
        boxes = "".join(f'<label class="rb"><input type="checkbox" name="r{{i}}" value="{{k{j}}}"{{c{j}}}>'
                        f"<span>{{k{j}}}</span></label>" for j in range(n_positions))
        refs = f'<span class="refs" aria-label="skeleton steps established by step {{i}}">{boxes}</span>'
    # The eight names and labels are constants of reasonlib.step_functions: markup, not data.
    tags = "".join(
        f'<label class="tb" title="{FUNCTION_LABELS[name]}: {meaning}"><input type="checkbox" name="f{{i}}" '
        f'value="{name}"{{t_{name}}}><span><kbd>{n}</kbd>{_TAG_SHORT[name]}</span></label>'
        for n, (name, _, meaning) in enumerate(FUNCTIONS, start=1)
    )
    return (
        '<li class="{cls}" id="s{i}" data-step="{i}"><a class="step-no" href="#s{i}">{i}</a>'
        '<div class="step-text">{text}</div><div class="step-controls">'
        f'<span class="verdicts" role="radiogroup" aria-label="verdict of step {{i}}">{verdicts}'
        '<label class="vb none"><input type="radio" name="v{i}" value=""{c_none}><span>–</span></label></span>'
        f"{refs}"
        '<input type="text" class="note" name="n{i}" value="{note}" placeholder="note" aria-label="note on step {i}" '
        'maxlength="5000"></div>'
        f'<div class="ftags" role="group" aria-label="function of step {{i}}">{tags}</div>{{other_tags}}{{others}}</li>'
    )


def _number(n: int) -> SafeString:
    return mark_safe(str(int(n)))  # noqa: S308 - digits only


def _step_row(fmt: str, shown: dict[str, SafeString], r: dict, positions: list[int],
              first_error: int | None) -> SafeString:
    verdict = r["verdict"] if r["verdict"] in _VERDICTS else ""
    chosen = set(r["refs"])
    others = ""
    if r["others"]:
        others = format_html('<ul class="{}">{}</ul>', "others disagree" if r["disagree"] else "others",
                             format_html_join("", "{}", ((_other(o),) for o in r["others"])))
    mine = set(r.get("tags", ()))
    other_tags = ""
    if r.get("other_tags"):
        other_tags = format_html('<ul class="other-tags">{}</ul>', format_html_join("", "{}", (
            (_other_tag(o),) for o in r["other_tags"])))
    return format_html(
        fmt,
        other_tags=other_tags, **{f"t_{name}": _checked(name in mine) for name in FUNCTION_NAMES},
        cls="step" + (" thought" if r.get("channel") == "thought" else "") + (f" is-{verdict}" if verdict else "")
        + (" first-error" if r["index"] == first_error else "") + (" conflict" if r.get("conflict") else ""),
        i=_number(r["index"]), text=r["text"], note=r["note"], others=others,
        c_none=_checked(not verdict), **{f"c_{value}": _checked(verdict == value) for value, _ in _VERDICT_KEYS},
        **shown, **{f"c{j}": _checked(k in chosen) for j, k in enumerate(positions)},
    )


def _other(o: dict) -> SafeString:
    verdict = o["verdict"] if o["verdict"] in _VERDICTS else ""
    kind = o["kind"] if o["kind"] in _LABEL_KINDS else ""
    refs = format_html(' <span class="refs-shown">[{}]</span>', ", ".join(str(x) for x in o["refs"])) if o["refs"] else ""
    reason = format_html(' <span class="reason">{}</span>', o["reason"]) if o["reason"] else ""
    return format_html('<li class="other {}"><span class="verdict {}">{}</span> <span class="who">{}{}</span>{}{}</li>',
                       kind, verdict, verdict, "final · " if kind == "adjudication" else "", o["source"], refs, reason)


def _other_tag(o: dict) -> SafeString:
    kind = o["kind"] if o["kind"] in _TAG_KINDS else ""
    short = _TAG_SHORT.get(o["tag"], "")
    return format_html('<li class="other-tag {}"><span class="tag" title="{}">{}</span> <span class="who">{}</span></li>',
                       kind, FUNCTION_LABELS.get(o["tag"], ""), short, o["source"])


_CHECKED, _UNCHECKED = mark_safe(" checked"), mark_safe("")


def _checked(on: bool) -> SafeString:
    return _CHECKED if on else _UNCHECKED
