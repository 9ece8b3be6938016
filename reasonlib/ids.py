"""Ids typed by people: a row id is ASCII digits and fits a signed 64-bit integer (pure).

``str.isdigit`` is true for "²" and "٣", which ``int()`` then refuses or reads as 3 -- a 500 where a
parameter said ``cohort=²`` (issue 29, L3) -- and a number past 64 bits overflows the database
driver. Every door that reads an id from text asks ``is_id`` first."""

from __future__ import annotations

MAX_ID = 2**63 - 1  # every id column is at most a signed 64-bit integer (BigAutoField)


def is_id(text: object) -> bool:
    """True when ``text`` is a string of ASCII digits whose value is at most MAX_ID."""
    return (isinstance(text, str) and 0 < len(text) <= 19 and text.isascii() and text.isdigit()
            and int(text) <= MAX_ID)
