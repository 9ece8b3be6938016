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
from django.utils.safestring import SafeString, mark_safe

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
    cls = "math display" if display else "math"
    return f'<span class="{cls}">{html.escape(inner)}</span>'


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
    out: list[str] = []
    pos = 0
    for index, start, end in sorted((s for s in spans if s[1] is not None and s[2] is not None), key=lambda s: s[1]):
        if start < pos or end > len(raw) or end < start:
            continue
        out.append(html.escape(raw[pos:start]))
        out.append(
            f'<mark class="seg" data-step="{index}" id="raw-{index}"><sup>{index}</sup>{html.escape(raw[start:end])}</mark>'
        )
        pos = end
    out.append(html.escape(raw[pos:]))
    return mark_safe("".join(out))  # noqa: S308 - every piece is escaped


_VERDICT_KEYS = (("valid", "V"), ("invalid", "I"), ("neutral", "N"))


def step_rows_html(rows: list[dict], positions: list[int], first_error: int | None) -> SafeString:
    """The review page's step list items.

    Built here rather than in a template loop: a 200-step trace with a
    10-step skeleton has ~3,000 inputs, which Django's template engine
    renders in ~100 ms and this in a few. Every piece of text is escaped.
    """
    esc = html.escape
    out: list[str] = []
    for r in rows:
        i = r["index"]
        verdict = r["verdict"]
        cls = "step"
        if verdict:
            cls += f" is-{verdict}"
        if i == first_error:
            cls += " first-error"
        parts = [
            f'<li class="{cls}" id="s{i}" data-step="{i}"><a class="step-no" href="#s{i}">{i}</a>'
            f'<div class="step-text">{esc(r["text"], quote=False)}</div><div class="step-controls">'
            f'<span class="verdicts" role="radiogroup" aria-label="verdict of step {i}">'
        ]
        for value, key in _VERDICT_KEYS:
            checked = " checked" if verdict == value else ""
            parts.append(f'<label class="vb {value}"><input type="radio" name="v{i}" value="{value}"{checked}>'
                         f'<span>{key}</span></label>')
        checked = "" if verdict else " checked"
        parts.append(f'<label class="vb none"><input type="radio" name="v{i}" value=""{checked}><span>–</span></label></span>')
        if positions:
            refs = set(r["refs"])
            parts.append(f'<span class="refs" aria-label="skeleton steps established by step {i}">')
            for k in positions:
                checked = " checked" if k in refs else ""
                parts.append(f'<label class="rb"><input type="checkbox" name="r{i}" value="{k}"{checked}><span>{k}</span></label>')
            parts.append("</span>")
        parts.append(f'<input type="text" class="note" name="n{i}" value="{esc(r["note"])}" placeholder="note" '
                     f'aria-label="note on step {i}" maxlength="5000"></div>')
        if r["others"]:
            parts.append(f'<ul class="others{" disagree" if r["disagree"] else ""}">')
            for o in r["others"]:
                who = ("final · " if o["kind"] == "adjudication" else "") + esc(o["source"])
                refs_shown = f' <span class="refs-shown">[{", ".join(str(x) for x in o["refs"])}]</span>' if o["refs"] else ""
                reason = f' <span class="reason">{esc(o["reason"])}</span>' if o["reason"] else ""
                parts.append(f'<li class="other {o["kind"]}"><span class="verdict {o["verdict"]}">{o["verdict"]}</span> '
                             f'<span class="who">{who}</span>{refs_shown}{reason}</li>')
            parts.append("</ul>")
        parts.append("</li>")
        out.append("".join(parts))
    return mark_safe("".join(out))  # noqa: S308 - every piece of text above is escaped
