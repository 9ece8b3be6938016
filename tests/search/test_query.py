"""The query language (search.core.query) and its two translations."""

from __future__ import annotations

import pytest

from search.core import query as ql
from search.core.regex import RegexError, compile_bounded


def test_words_are_anded_and_lowercased():
    q = ql.parse("Wait  CHECK")
    assert q.websearch() == '"wait" "check"'
    assert q.fts5() == '("wait" AND "check")'


def test_or_binds_looser_than_and_as_in_postgres():
    q = ql.parse("a b or c")
    assert q.websearch() == '"a" "b" or "c"'
    assert q.fts5() == '("a" AND "b") OR ("c")'


def test_phrases_and_exclusions():
    q = ql.parse('"changes its mind" -wait -"let me"')
    assert q.websearch() == '"changes its mind" -"wait" -"let me"'
    assert q.fts5() == '((("changes its mind") NOT "wait") NOT "let me")'
    assert q.words == {"changes", "its", "mind"}


def test_words_with_punctuation_become_phrases_of_their_letters_and_digits():
    q = ql.parse("12.5 x=5")
    assert q.clauses == ((ql.Item(("12", "5")), ql.Item(("x", "5"))),)


def test_fts5_syntax_in_user_text_stays_text():
    # NEAR(), column filters, stars, carets and parentheses are not FTS5 syntax here.
    q = ql.parse('NEAR(a b) text:foo bar* ^x (y) AND')
    assert q.fts5() == '("near a" AND "b" AND "text foo" AND "bar" AND "x" AND "y" AND "and")'


def test_the_word_or_in_quotes_is_a_word():
    assert ql.parse('"or" x').websearch() == '"or" "x"'


def test_stray_or_and_empty_items_are_ignored():
    assert ql.parse("or a or or b or").websearch() == '"a" or "b"'
    assert ql.parse('"" ... --') is None
    assert ql.parse("   ") is None


def test_unclosed_quote_runs_to_the_end():
    assert ql.parse('"let me check').websearch() == '"let me check"'


def test_a_clause_of_exclusions_only_is_refused():
    with pytest.raises(ql.QueryError, match="only excludes"):
        ql.parse("-wait")
    with pytest.raises(ql.QueryError, match="only excludes"):
        ql.parse("a or -b")


def test_limits():
    with pytest.raises(ql.QueryError, match="at most 500"):
        ql.parse("a" * 501)
    with pytest.raises(ql.QueryError, match="at most 32"):
        ql.parse(" ".join(f"w{i}" for i in range(33)))


def test_snippets_escape_the_text_and_mark_matches():
    html = ql.snippet_html(f"<b>{ql.START}wait{ql.STOP}</b> & {ql.START}cut")
    assert html == "&lt;b&gt;<mark>wait</mark>&lt;/b&gt; &amp; <mark>cut</mark>"


def test_mark_words_finds_whole_words_only():
    marked = ql.mark_words("Waiting, I wait.", frozenset({"wait"}))
    assert marked == f"Waiting, I {ql.START}wait{ql.STOP}."
    assert ql.mark_words("nothing here", frozenset({"wait"})) is None


def test_regex_is_bounded():
    with pytest.raises(RegexError, match="at most 200"):
        compile_bounded("a" * 201)
    with pytest.raises(RegexError, match="not a valid pattern"):
        compile_bounded("(unclosed")
    assert compile_bounded(r"wait\W+no").search("Wait, no!")
    with pytest.raises(TimeoutError):
        compile_bounded(r"(a|aa)+$").search("a" * 60 + "b")
