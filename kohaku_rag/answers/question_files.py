"""WattBot question files: read into `Question` records, and checked by their header.

A question file (train_QA.csv, test_Q.csv, test_Q_full.csv) becomes `Question` records,
with a gold `Answer` where the file carries answers; a config's `questions` file is checked
when the config loads (`question_file_problem`). Submissions, the same nine columns written
back, are evaluation/submissions.py.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Collection, Sequence
from pathlib import Path

from kohaku_rag.answers.normalise import is_blank_value, parse_ref_ids
from kohaku_rag.answers.records import BLANK, FLAG_COLUMNS, Answer, Question
from kohaku_rag.lake.csv_cells import read_rows

# The columns of a WattBot question/submission file, in the official order.
WATTBOT_COLUMNS: tuple[str, ...] = (
    "id",
    "question",
    "answer",
    "answer_value",
    "answer_unit",
    "ref_id",
    "ref_url",
    "supporting_materials",
    "explanation",
)
_REQUIRED_QUESTION_COLUMNS = ("id", "question", "answer_unit")
# A question file with this column (the `feedback` set built from what users said) counts
# only the rows a reviewer marked yes: corrections count once a person checked them.
REVIEW_COLUMN = "reviewed"


def row_id(path: Path, line_no: int, row: dict[str | None, str | None], seen: Collection[str]) -> str:
    """A row's question id, checked: the row fits the header, the id is there and new."""
    if None in row:
        raise ValueError(f"{path}: row {line_no} has more fields than the header (unquoted comma?)")
    qid = (row.get("id") or "").strip()
    if not qid:
        raise ValueError(f"{path}: row {line_no} has an empty id")
    if qid in seen:
        raise ValueError(f"{path}: question id {qid!r} appears more than once (row {line_no})")
    return qid


def load_questions(csv_path: str | Path, *, require_unit: bool = True) -> list[Question]:
    """Read a WattBot question file (train_QA.csv, test_Q.csv, test_Q_full.csv).

    Tolerates a UTF-8 BOM, CRLF line endings, quoted fields with commas/newlines, and
    missing answer columns (and a missing answer_unit column with `require_unit=False`,
    for retrieval-only use). A row gets a gold `Answer` when its `answer_value` is filled
    (including `is_blank`, which marks an unanswerable question). A file with a `reviewed`
    column yields only the rows marked reviewed (yes/1/true).
    """
    path = Path(csv_path)
    try:
        # utf-8-sig strips a BOM; newline="" lets csv handle CRLF and quoted newlines.
        with path.open(encoding="utf-8-sig", newline="") as handle:
            rows = list(read_rows(handle))
            header = rows[0].keys() if rows else header_of(path)
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    except FileNotFoundError as exc:
        raise ValueError(f"{path}: question file not found") from exc
    except OSError as exc:  # a folder, a file without read permission
        raise ValueError(f"{path}: cannot read the question file: {exc.strerror or type(exc).__name__}") from exc
    except csv.Error as exc:  # a NUL byte, a field past the csv module's limit: not a CSV file
        raise ValueError(f"{path}: not a CSV question file ({exc})") from exc

    required = _REQUIRED_QUESTION_COLUMNS if require_unit else ("id", "question")
    missing = [c for c in required if c not in header]
    if missing:
        raise ValueError(f"{path}: missing column(s) {', '.join(missing)}; {describe_header(list(header))}")

    flag_columns = [c for c in FLAG_COLUMNS if c in header]
    questions: list[Question] = []
    seen: set[str] = set()
    reviewed_only = REVIEW_COLUMN in header
    for line_no, row in enumerate(rows, start=2):
        qid = row_id(path, line_no, row, seen)
        seen.add(qid)
        if reviewed_only and not is_true_flag(row.get(REVIEW_COLUMN) or ""):
            continue
        unit = (row.get("answer_unit") or "").strip() or BLANK
        questions.append(
            Question(
                id=qid,
                question=(row.get("question") or "").strip(),
                answer_unit=unit,
                gold=_gold_of(row, unit),
                flags=_flags_of(path, line_no, row, flag_columns),
                flagged=bool(flag_columns),
            )
        )
    return questions


# What a column name looks like. A first line that is not made of them is not shown: the
# file may be anything (`--questions /etc/passwd`, a .env file), and an error never prints it.
_COLUMN = re.compile(r"^[A-Za-z_][A-Za-z0-9_ .-]{0,63}$")


def describe_header(header: list[str]) -> str:
    if len(header) >= 2 and all(_COLUMN.match(name.strip()) for name in header):
        return f"header is {header}"
    return "its first line is not a CSV header of column names (not shown); is it a WattBot question file?"


def _flags_of(path: Path, line_no: int, row: dict[str, str], columns: Sequence[str]) -> tuple[str, ...]:
    """The flag columns set on a row: 1/true/yes set, 0/false/no/empty not, else an error."""
    flags = []
    for column in columns:
        cell = (row.get(column) or "").strip().lower()
        if cell in _TRUE_FLAGS:
            flags.append(column)
        elif cell not in _FALSE_FLAGS:
            raise ValueError(f"{path}: row {line_no} column {column}: expected 0 or 1, got {row.get(column)!r}")
    return tuple(flags)


_TRUE_FLAGS = frozenset({"1", "1.0", "true", "yes", "y", "t"})


def is_true_flag(cell: str) -> bool:
    return cell.strip().lower() in _TRUE_FLAGS


_FALSE_FLAGS = frozenset({"", "0", "0.0", "false", "no", "n", "f", "nan"})


def question_file_problem(csv_path: str | Path) -> str | None:
    """Why an existing file can't be a question file, read from its header line only (None:
    it can, or it does not exist yet: the run that reads it says so). What a config's
    `questions` is checked with when the config loads, so `/etc/passwd` fails there."""
    path = Path(csv_path)
    if not path.exists():
        return None
    if not path.is_file():
        return f"{path} is not a file"
    try:
        header = header_of(path)
    except UnicodeDecodeError as exc:
        return f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})"
    except (OSError, csv.Error) as exc:
        return f"{path}: cannot read it as a CSV question file ({getattr(exc, 'strerror', None) or exc})"
    missing = [c for c in ("id", "question") if c not in header]
    if missing:
        return f"{path}: not a question file (missing column(s) {', '.join(missing)}); {describe_header(list(header))}"
    return None


def header_of(path: Path) -> Sequence[str]:
    with path.open(encoding="utf-8-sig", newline="") as handle:
        return next(csv.reader(handle), [])


def _gold_of(row: dict[str, str], unit: str) -> Answer | None:
    value = (row.get("answer_value") or "").strip()
    if not value:
        return None
    blank = is_blank_value(value)
    return Answer(
        answer=(row.get("answer") or "").strip(),
        answer_value=value,
        answer_unit=unit,
        ref_id=parse_ref_ids(row.get("ref_id")),
        explanation=(row.get("explanation") or "").strip(),
        is_blank=blank,
        supporting_materials=(row.get("supporting_materials") or "").strip(),
    )
