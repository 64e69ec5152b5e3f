"""Answer and question records for the WattBot task, and the question-file loader.

An `Answer` holds the WattBot submission fields of one answer (gold or predicted), with
`ref_id` already parsed into a tuple of document ids. A `Question` is one row of a
WattBot question file; `gold` is filled only when the file carries answers (train_QA.csv),
never for the test file (test_Q_full.csv has the answer columns present but empty).
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

BLANK = "is_blank"
BLANK_TEXT = "Unable to answer with confidence based on the provided documents."

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


@dataclass(frozen=True)
class Answer:
    """One answer in WattBot form.

    `answer_value` is the scored field (canonical string: plain number, `[lo,hi]`,
    `1`/`0`, category text, or `is_blank`); `answer` is the human-readable form
    (`TRUE`/`FALSE` for booleans). `is_blank` marks an abstention. `confidence` is an
    optional model-reported confidence in [0, 1]; only ensemble voting reads it
    (tiebreak "highest_confidence").
    """

    answer: str
    answer_value: str
    answer_unit: str
    ref_id: tuple[str, ...]
    explanation: str = ""
    is_blank: bool = False
    supporting_materials: str = ""
    confidence: float | None = None

    def __post_init__(self) -> None:
        # A list here would make the record unhashable and silently mutable.
        if not isinstance(self.ref_id, tuple):
            raise TypeError(f"Answer.ref_id must be a tuple of ids, got {type(self.ref_id).__name__}")

    @classmethod
    def blank(cls, unit: str = BLANK) -> Answer:
        """The WattBot abstention: every field `is_blank` except the answer text and unit.

        The unit stays filled on unanswerable rows (train q062 keeps `MWh`), so pass the
        question's `answer_unit`.
        """
        return cls(
            answer=BLANK_TEXT,
            answer_value=BLANK,
            answer_unit=unit.strip() or BLANK,
            ref_id=(),
            explanation=BLANK,
            is_blank=True,
            supporting_materials=BLANK,
        )


@dataclass(frozen=True)
class Question:
    id: str
    question: str
    answer_unit: str
    gold: Answer | None = None


def load_questions(csv_path: str | Path) -> list[Question]:
    """Read a WattBot question file (train_QA.csv, test_Q.csv, test_Q_full.csv).

    Tolerates a UTF-8 BOM, CRLF line endings, quoted fields with commas/newlines, and
    missing answer columns. A row gets a gold `Answer` when its `answer_value` is filled
    (including `is_blank`, which marks an unanswerable question).
    """
    path = Path(csv_path)
    try:
        # utf-8-sig strips a BOM; newline="" lets csv handle CRLF and quoted newlines.
        with path.open(encoding="utf-8-sig", newline="") as handle:
            rows = list(csv.DictReader(handle))
            header = rows[0].keys() if rows else _header_of(path)
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    except FileNotFoundError as exc:
        raise ValueError(f"{path}: question file not found") from exc

    missing = [c for c in _REQUIRED_QUESTION_COLUMNS if c not in header]
    if missing:
        raise ValueError(f"{path}: missing column(s) {', '.join(missing)}; header is {list(header)}")

    questions: list[Question] = []
    seen: set[str] = set()
    for line_no, row in enumerate(rows, start=2):
        if None in row:
            raise ValueError(f"{path}: row {line_no} has more fields than the header (unquoted comma?)")
        qid = (row.get("id") or "").strip()
        if not qid:
            raise ValueError(f"{path}: row {line_no} has an empty id")
        if qid in seen:
            raise ValueError(f"{path}: question id {qid!r} appears more than once")
        seen.add(qid)
        unit = (row.get("answer_unit") or "").strip() or BLANK
        questions.append(
            Question(
                id=qid,
                question=(row.get("question") or "").strip(),
                answer_unit=unit,
                gold=_gold_of(row, unit),
            )
        )
    return questions


def _header_of(path: Path) -> Sequence[str]:
    with path.open(encoding="utf-8-sig", newline="") as handle:
        return next(csv.reader(handle), [])


def _gold_of(row: dict[str, str], unit: str) -> Answer | None:
    # Imported here: normalise imports this module for Answer.
    from kohaku_rag.normalise import is_blank_value, parse_ref_ids

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
