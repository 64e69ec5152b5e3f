"""`kohaku score`: a submission file against a gold question file, with no lake and no LLM.

The question file gives the gold answers (and, for a 2026 file, the evidence flags); the
submission is read as written (`submissions.load_submission`). A question without a row in
the submission is scored as an abstention and reported; a submission row for a question
not in the gold file is reported and ignored.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from kohaku_assets.cli.commands import Subcommands
from kohaku_rag.answering.qa_config import DEFAULT_METRIC, METRICS
from kohaku_rag.answers.question_files import load_questions
from kohaku_rag.evaluation.metrics import score_with
from kohaku_rag.evaluation.submissions import load_submission


def cmd_score(args: argparse.Namespace) -> int:
    say = (lambda m: print(m, file=sys.stderr)) if args.json else print
    questions = load_questions(Path(args.questions))
    if not any(q.gold is not None for q in questions):
        raise ValueError(f"{args.questions}: no gold answers (answer_value is empty on every row)")
    preds = load_submission(Path(args.submission))
    report = score_with(args.metric, questions, preds)
    for line in report.lines():
        say(line)
    if report.extra:
        say(f"  {len(report.extra)} submission row(s) not in the gold file, ignored: {', '.join(report.extra[:10])}")
    if args.json:
        print(json.dumps(report.summary()))
    return 0


def add_parser(sub: Subcommands) -> None:
    p = sub.add_parser("score", help="score a WattBot submission CSV against a gold question file (no lake, no LLM)")
    p.add_argument("--questions", required=True, help="gold WattBot question file (with answer_value filled)")
    p.add_argument("--submission", required=True, help="submission CSV (id, answer_value, ref_id, ...)")
    p.add_argument("--metric", choices=METRICS, default=DEFAULT_METRIC, help="(default: %(default)s)")
    p.add_argument("--json", action="store_true", help="report to stderr; the last stdout line is the JSON summary")
    p.set_defaults(func=cmd_score)
