"""CSV files that are safe to open: every CSV the project writes goes through here.

Two dangers. A field holding a lone `\\r` is left unquoted by the csv module when rows end
in `\\n`, and readers split the row there; so every field holding `\\r`, `\\n`, `"` or `,`
is quoted (the rows still end in `\\n`). And a spreadsheet runs a cell that starts with
`=`, `+`, `-`, `@`, a tab or a CR as a formula (`=HYPERLINK(...)`): such a cell is written
with a `'` in front (OWASP's rule), which a spreadsheet shows as text. A plain number
(`-5`, `+3.2`) is left as it is: it runs nothing. `read_cell` takes the `'` off again,
so what the project reads back is what it wrote."""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import IO, Any

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")


def safe_cell(text: str) -> str:
    """The cell as written: a `'` in front of one a spreadsheet would run (and of one
    already starting with `'`, so reading back is exact)."""
    if text.startswith("'") or (text.startswith(FORMULA_STARTS) and not _NUMBER.match(text)):
        return "'" + text
    return text


def read_cell(text: str) -> str:
    """A cell as the project wrote it (`safe_cell` undone)."""
    if text.startswith("'") and (text[1:].startswith(("'", *FORMULA_STARTS))):
        return text[1:]
    return text


def format_row(cells: Sequence[str]) -> str:
    """One CSV line ending in `\\n`, every field holding `\\r`, `\\n`, `"` or `,` quoted.
    (The csv module quotes the characters of its line terminator: with `\\r\\n` it quotes
    both, and the terminator is then swapped for `\\n`.)"""
    out = io.StringIO()
    csv.writer(out, lineterminator="\r\n").writerow([safe_cell(c) for c in cells])
    return out.getvalue()[:-2] + "\n"


def csv_text(columns: Sequence[str], rows: Iterable[Mapping[str, object]]) -> str:
    """A whole file: the header, then each row's cells (missing ones empty)."""
    lines = [format_row(list(columns))]
    lines.extend(format_row(["" if r.get(c) is None else str(r.get(c)) for c in columns]) for r in rows)
    return "".join(lines)


def read_rows(handle: IO[str]) -> Iterator[dict[Any, Any]]:
    """csv.DictReader's rows with each cell as written (`read_cell`); cells past the header
    stay under the key None, as DictReader puts them."""
    for row in csv.DictReader(handle):
        yield {k: (read_cell(v) if isinstance(v, str) else v) for k, v in row.items()}
