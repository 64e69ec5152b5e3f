"""Answer and question records for the WattBot task.

An `Answer` holds the WattBot submission fields of one answer (gold or predicted), with
`ref_id` already parsed into a tuple of document ids. A `Question` is one row of a
WattBot question file; `gold` is filled only when the file carries answers (train_QA.csv),
never for the test file (test_Q_full.csv has the answer columns present but empty).
"""

from __future__ import annotations

from dataclasses import dataclass

BLANK = "is_blank"
BLANK_TEXT = "Unable to answer with confidence based on the provided documents."


@dataclass(frozen=True)
class Answer:
    """One answer in WattBot form.

    `answer_value` is the scored field (canonical string: plain number, `[lo,hi]`,
    `1`/`0`, category text, or `is_blank`); `answer` is the human-readable form
    (`TRUE`/`FALSE` for booleans). `is_blank` marks an abstention. `confidence` is an
    optional model-reported confidence in [0, 1]; only ensemble voting reads it
    (tiebreak "highest_confidence"). `ref_url` is the submission's ref_url column when the
    answer was read from a submission file (the 2026 abstention rule reads it); answers the
    pipeline makes leave it empty, their URLs come from the corpus metadata when written.
    """

    answer: str
    answer_value: str
    answer_unit: str
    ref_id: tuple[str, ...]
    explanation: str = ""
    is_blank: bool = False
    supporting_materials: str = ""
    confidence: float | None = None
    ref_url: str = ""

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


# The WattBot 2026 question files' 0/1 evidence flags (the official scorer prints the
# wrong-rate per flag); a question file without them has no flags.
FLAG_COLUMNS: tuple[str, ...] = ("Quote", "Table", "Figure", "Math", "is_NA", "CrossPaper", "Reconcile")


@dataclass(frozen=True)
class Question:
    """One question; `flags` names the FLAG_COLUMNS set to 1 on its row, `flagged` says
    whether the file had flag columns at all (so "no flag set" differs from "no flags")."""

    id: str
    question: str
    answer_unit: str
    gold: Answer | None = None
    flags: tuple[str, ...] = ()
    flagged: bool = False
