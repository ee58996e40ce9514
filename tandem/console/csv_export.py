"""The console's CSV files, written one way: every cell a visitor, an agent or a tenant
could have typed is neutralised against formula injection as OWASP recommends (a cell
that starts with =, +, -, @, a tab or a carriage return gets a leading apostrophe), so a
spreadsheet shows `=HYPERLINK(...)` as text instead of running it. Numbers and None are
ours and stay as they are. JSON exports carry the text unchanged: no spreadsheet reads
them."""

from __future__ import annotations

import csv
from collections.abc import Iterable, Iterator

FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value):
    """`value` as a spreadsheet will take it as text."""
    if isinstance(value, str) and value.startswith(FORMULA_PREFIXES):
        return "'" + value
    return value


class _Echo:
    """csv.writer's file: hands each formatted line back instead of storing it."""

    def write(self, value):
        return value


def csv_lines(fieldnames: list[str], rows: Iterable[dict]) -> Iterator[str]:
    """The header, then one line per row (dicts keyed by `fieldnames`), every cell
    through `csv_cell`: for a StreamingHttpResponse."""
    writer = csv.DictWriter(_Echo(), fieldnames=fieldnames)
    yield writer.writeheader()
    for row in rows:
        yield writer.writerow({k: csv_cell(v) for k, v in row.items()})
