"""WattBot submission files: written in the nine official columns, as train_QA.csv spells
them, and read back to be scored; the metadata's reference URLs for the ref_url column.
"""

from __future__ import annotations

import csv
from collections.abc import Mapping, Sequence
from pathlib import Path

from kohaku_rag.answers.normalise import is_blank_value, parse_ref_ids
from kohaku_rag.answers.question_files import WATTBOT_COLUMNS, describe_header, header_of, row_id
from kohaku_rag.answers.records import BLANK, BLANK_TEXT, Answer, Question
from kohaku_rag.lake.atomic import atomic_path
from kohaku_rag.lake.csv_cells import csv_text, read_rows

_REQUIRED_SUBMISSION_COLUMNS = ("id", "answer_value", "ref_id")


def load_submission(csv_path: str | Path) -> dict[str, Answer]:
    """A WattBot submission file read as written: question id -> `Answer`, nothing
    normalised (the scorer reads values leniently itself). `ref_url` and
    `supporting_materials` are kept for the 2026 abstention rule; a missing optional
    column reads as empty. A repeated id or a row with more fields than the header is an
    error naming the row."""
    path = Path(csv_path)
    try:
        with path.open(encoding="utf-8-sig", newline="") as handle:
            rows = list(read_rows(handle))
        header = [str(k) for k in rows[0] if k is not None] if rows else list(header_of(path))
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    except FileNotFoundError as exc:
        raise ValueError(f"{path}: submission file not found") from exc
    except OSError as exc:
        raise ValueError(f"{path}: cannot read the submission file: {exc.strerror or type(exc).__name__}") from exc
    except csv.Error as exc:
        raise ValueError(f"{path}: not a CSV submission file ({exc})") from exc
    missing = [c for c in _REQUIRED_SUBMISSION_COLUMNS if c not in header]
    if missing:
        raise ValueError(f"{path}: missing column(s) {', '.join(missing)}; {describe_header(header)}")
    out: dict[str, Answer] = {}
    for line_no, row in enumerate(rows, start=2):
        qid = row_id(path, line_no, row, out)
        value = (row.get("answer_value") or "").strip()
        out[qid] = Answer(
            answer=(row.get("answer") or "").strip(),
            answer_value=value,
            answer_unit=(row.get("answer_unit") or "").strip(),
            ref_id=parse_ref_ids(row.get("ref_id")),
            explanation=(row.get("explanation") or "").strip(),
            is_blank=is_blank_value(value),
            supporting_materials=(row.get("supporting_materials") or "").strip(),
            ref_url=(row.get("ref_url") or "").strip(),
        )
    return out


def format_ref_list(items: Sequence[str]) -> str:
    """WattBot's Python-list spelling, "['a','b']" (no space), or is_blank when empty."""
    if not items:
        return BLANK
    return "[" + ",".join("'" + item.replace("'", "\\'") + "'" for item in items) + "]"


def load_ref_urls(metadata_csv: str | Path) -> dict[str, str]:
    """id -> url from a WattBot metadata.csv (UTF-8, BOM tolerated)."""
    path = Path(metadata_csv)
    with path.open(encoding="utf-8-sig", newline="") as handle:
        reader = csv.DictReader(handle)
        if not reader.fieldnames or not {"id", "url"} <= set(reader.fieldnames):
            raise ValueError(f"{path}: needs 'id' and 'url' columns, header is {reader.fieldnames}")
        return {row["id"].strip().lower(): row["url"].strip() for row in reader if row["id"].strip()}


def to_submission_rows(
    preds: Mapping[str, Answer],
    questions: Sequence[Question],
    ref_urls: Mapping[str, str] | None = None,
) -> list[dict[str, str]]:
    """One WattBot row per question, in question order.

    A missing or blank prediction becomes the abstention row: answer = the "Unable to
    answer ..." sentence, every other field `is_blank` except answer_unit, which keeps the
    question's unit (as train q062/q164 do). The question's answer_unit wins over the
    prediction's when the question states one. ref_url lists the metadata URL of each
    ref_id (is_blank without `ref_urls`); an id missing from `ref_urls` is an error.
    Empty supporting_materials/explanation become is_blank (Kaggle rejects empty ones).
    """
    rows: list[dict[str, str]] = []
    for question in questions:
        answer = preds.get(question.id)
        question_unit = question.answer_unit.strip()
        if answer is None or answer.is_blank or is_blank_value(answer.answer_value):
            unit = question_unit or (answer.answer_unit.strip() if answer else "") or BLANK
            rows.append(_row(question, BLANK_TEXT, BLANK, unit, BLANK, BLANK, BLANK, BLANK))
            continue
        refs = parse_ref_ids(answer.ref_id)
        unit = question_unit if not is_blank_value(question_unit) else (answer.answer_unit.strip() or BLANK)
        rows.append(
            _row(
                question,
                answer.answer.strip() or answer.answer_value.strip(),
                answer.answer_value.strip(),
                unit,
                format_ref_list(refs),
                _ref_urls(question.id, refs, ref_urls),
                answer.supporting_materials.strip() or BLANK,
                answer.explanation.strip() or BLANK,
            )
        )
    return rows


def write_submission_csv(
    path: str | Path,
    questions: Sequence[Question],
    preds: Mapping[str, Answer],
    ref_urls: Mapping[str, str] | None = None,
) -> Path:
    """Write the submission atomically: UTF-8 without BOM, LF line endings, the nine
    official columns, quoting only where CSV needs it (like train_QA.csv), a cell a
    spreadsheet would run as a formula prefixed with `'` (csv_cells)."""
    target = Path(path)
    text = csv_text(WATTBOT_COLUMNS, to_submission_rows(preds, questions, ref_urls))
    with atomic_path(target) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return target


def _ref_urls(question_id: str, refs: Sequence[str], ref_urls: Mapping[str, str] | None) -> str:
    if ref_urls is None or not refs:
        return BLANK
    lowered = {k.strip().lower(): v for k, v in ref_urls.items()}
    unknown = [r for r in refs if r not in lowered]
    if unknown:
        raise ValueError(
            f"question {question_id}: ref_id {', '.join(unknown)} not in the metadata; "
            "resolve or drop it first (normalise.normalise_answer with known_ref_ids)"
        )
    return format_ref_list([lowered[r] for r in refs])


def _row(question: Question, answer: str, value: str, unit: str, ref_id: str, ref_url: str,
         materials: str, explanation: str) -> dict[str, str]:  # fmt: skip
    return dict(
        zip(
            WATTBOT_COLUMNS,
            (question.id, question.question, answer, value, unit, ref_id, ref_url, materials, explanation),
            strict=True,
        )
    )
