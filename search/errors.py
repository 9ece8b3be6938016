"""The refusal of bad search input (the filter set and scanners raise it; views answer 400)."""

from __future__ import annotations

from reasonlib.refusals import Invalid


class SearchError(Invalid):
    """Bad search input, given as each parameter's messages; ``by_field`` gives them back so."""

    def __init__(self, errors: dict[str, list[str]]) -> None:
        super().__init__(errors=[(k, " ".join(v)) for k, v in errors.items()])

    @property
    def by_field(self) -> dict[str, list[str]]:
        return {field: [message] for field, message in self.errors}


def bad(field: str, message: str) -> SearchError:
    return SearchError({field: [message]})
