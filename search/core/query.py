"""The search query language (docs/search.md) and its two translations.

The language is PostgreSQL's ``websearch_to_tsquery``: words are ANDed, ``"quoted words"`` are
phrases, ``or`` between items makes alternatives, ``-word`` / ``-"a phrase"`` excludes. As in
PostgreSQL, ``or`` binds looser than the implicit AND: ``a b or c`` is ``(a AND b) OR c``.

Both backends index the same words: maximal runs of letters and digits, lowercased (PostgreSQL
indexes ``regexp_replace(text, '[^[:alnum:]]+', ' ')`` with the ``simple`` configuration, SQLite
FTS5 tokenizes with ``unicode61 remove_diacritics 0``). A user's word is cut the same way, so
``12.5`` or ``x=5`` become the phrase ``"12 5"`` / ``"x 5"`` on both.

The parsed query is re-rendered from its tree for each backend: user text is never passed to
FTS5 as syntax, and only the canonical form reaches ``websearch_to_tsquery``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from reasonlib.refusals import Invalid

MAX_QUERY_CHARS = 500
MAX_ITEMS = 32

# Letters and digits (Unicode): the words both indexes store.
_WORD = re.compile(r"[^\W_]+")


class QueryError(Invalid):
    """A query that cannot be searched; the message says why, for the ``q`` field."""


@dataclass(frozen=True)
class Item:
    """A word or a phrase (its words in order); ``negated`` for ``-item``."""

    words: tuple[str, ...]
    negated: bool = False


@dataclass(frozen=True)
class Query:
    """Alternatives (OR) of clauses; a clause is items ANDed, at least one not negated."""

    clauses: tuple[tuple[Item, ...], ...]

    @property
    def words(self) -> frozenset[str]:
        """The words a match contains (of the items not negated): what snippets highlight."""
        return frozenset(w for clause in self.clauses for it in clause if not it.negated for w in it.words)

    def websearch(self) -> str:
        """The canonical websearch_to_tsquery text: every item quoted (so a word ``or`` stays a word)."""
        return " or ".join(
            " ".join(("-" if it.negated else "") + '"' + " ".join(it.words) + '"' for it in clause)
            for clause in self.clauses
        )

    def fts5(self) -> str:
        """The FTS5 MATCH expression, fully parenthesized (FTS5's NOT is binary: ``(a AND b) NOT c``)."""
        out = []
        for clause in self.clauses:
            expr = " AND ".join(_fts5_phrase(it.words) for it in clause if not it.negated)
            for it in clause:
                if it.negated:
                    expr = f"({expr}) NOT {_fts5_phrase(it.words)}"
            out.append(f"({expr})")
        return " OR ".join(out)


def _fts5_phrase(words: tuple[str, ...]) -> str:
    # Words hold only letters and digits; doubling quotes keeps that safe should the rule change.
    return '"' + " ".join(w.replace('"', '""') for w in words) + '"'


def words_of(text: str) -> tuple[str, ...]:
    return tuple(_WORD.findall(text.lower()))


def _lex(text: str) -> list[tuple[str, str, bool]]:
    """Tokens (kind, text, negated): kind "or", "word" or "phrase". Like websearch_to_tsquery,
    an unclosed quote runs to the end and a ``-`` counts only at the start of an item."""
    tokens: list[tuple[str, str, bool]] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch.isspace():
            i += 1
            continue
        negated = False
        if ch == "-" and i + 1 < n and not text[i + 1].isspace():
            negated, i = True, i + 1
            ch = text[i]
        if ch == '"':
            end = text.find('"', i + 1)
            end = n if end < 0 else end
            tokens.append(("phrase", text[i + 1:end], negated))
            i = end + 1
            continue
        j = i
        while j < n and not text[j].isspace() and text[j] != '"':
            j += 1
        word = text[i:j]
        if word.lower() == "or" and not negated:
            tokens.append(("or", word, False))
        else:
            tokens.append(("word", word, negated))
        i = j
    return tokens


def parse(text: str | None) -> Query | None:
    """The query tree of ``text``; None for a query with no word at all (searches nothing)."""
    text = (text or "").strip()
    if len(text) > MAX_QUERY_CHARS:
        raise QueryError(f"the query is {len(text)} characters long; at most {MAX_QUERY_CHARS}")
    clauses: list[list[Item]] = [[]]
    n_items = 0
    for kind, value, negated in _lex(text):
        if kind == "or":
            # A leading, trailing or doubled "or" is ignored, as websearch_to_tsquery does.
            if clauses[-1]:
                clauses.append([])
            continue
        words = words_of(value)
        if not words:
            continue
        n_items += 1
        clauses[-1].append(Item(words, negated))
    if n_items > MAX_ITEMS:
        raise QueryError(f"the query has {n_items} words or phrases; at most {MAX_ITEMS}")
    clauses = [c for c in clauses if c]
    if not clauses:
        return None
    for clause in clauses:
        if all(it.negated for it in clause):
            shown = " ".join("-" + " ".join(it.words) for it in clause)
            raise QueryError(f"'{shown}' only excludes words; add a word to search for (e.g. 'wait {shown}')")
    return Query(tuple(tuple(c) for c in clauses))


# --------------------------------------------------------------------------
# Snippets: the databases mark matches with two private-use characters; the
# text is escaped first and only then are the marks turned into <mark> tags.

START, STOP = "\ue000", "\ue001"


def snippet_html(marked: str) -> str:
    """HTML of a database snippet: escaped text, matches in <mark>."""
    from html import escape

    out = escape(marked.replace("\x00", ""), quote=True)
    opened = out.count(START)
    out = out.replace(START, "<mark>").replace(STOP, "</mark>")
    # A cut snippet may lose a closing mark: close what is open so the page's markup stays whole.
    return out + "</mark>" * max(0, opened - marked.count(STOP))


def mark_words(text: str, words: frozenset[str], *, context: int = 80) -> str | None:
    """Marked snippet of ``text`` around its first word in ``words`` (for the regex option and for
    matches the database did not mark); None when no word occurs."""
    first = None
    pieces: list[str] = []
    last = 0
    for m in _WORD.finditer(text):
        if m.group().lower() in words:
            if first is None:
                first = m.start()
            pieces.append(text[last:m.start()] + START + m.group() + STOP)
            last = m.end()
    if first is None:
        return None
    marked = "".join(pieces) + text[last:]
    return window(marked, first, context)


def window(marked: str, at: int, context: int) -> str:
    lo = max(0, at - context)
    hi = min(len(marked), at + 2 * context)
    return ("…" if lo else "") + marked[lo:hi] + ("…" if hi < len(marked) else "")
