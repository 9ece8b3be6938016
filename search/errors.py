"""The refusal of bad search input (the filter set and scanners raise it; views answer 400)."""

from __future__ import annotations


class SearchError(ValueError):
    """Bad search input: ``errors`` maps each parameter to its messages."""

    def __init__(self, errors: dict[str, list[str]]) -> None:
        self.errors = errors
        super().__init__("; ".join(f"{k}: {' '.join(v)}" for k, v in errors.items()))


def bad(field: str, message: str) -> SearchError:
    return SearchError({field: [message]})
