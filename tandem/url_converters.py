"""The `<id:…>` path converter, for every row id in a URL (the console's, the actions'
and the evaluations' pages): a bigint primary key, 1 to 2**63 - 1.

Django's `<int:…>` takes any number of digits. Django answers `pk=<too big>` with no
row, but not every query an id reaches does: an update (PostgreSQL's DataError), an
`__in` lookup on SQLite (OverflowError), raw SQL, each a 500. Here such an id does not
match the route at all, so it is a 404 like a missing row, before any view or query
runs. `row_id` is the same check for an id that a form or a query string sends.
Importing this module registers the converter; each urls module that uses it imports it."""

from __future__ import annotations

from django.urls import register_converter

ID_MAX = 2**63 - 1  # a BigAutoField's largest value (DEFAULT_AUTO_FIELD, every app's)


def row_id(value) -> int:
    """`value` (a path part, a form's or a query's string) as a row id; ValueError when
    it is none, out of range included, so no query is ever asked for it."""
    number = int(str(value))
    if not 0 < number <= ID_MAX:
        raise ValueError(f"{value} is not a row id")
    return number


class IdConverter:
    regex = "[0-9]{1,19}"  # ID_MAX has 19 digits; longer never matches, whatever its value

    def to_python(self, value: str) -> int:
        return row_id(value)  # a ValueError: the route does not match, a 404

    def to_url(self, value) -> str:
        return str(row_id(value))  # a ValueError: reverse() says NoReverseMatch


register_converter(IdConverter, "id")
