"""A computed sweep's members as tables per question set, each paired against one member.

`kohaku sweep NAME` computes the members over one question file and `kohaku report` compares
them with the best row over that file. Issue 34 asks for train, dev and both, against the
default: this reads every member's stored run 0 from the lake (nothing is asked), scores it
question by question under both WattBot metrics, and prints per set the final with its 95%
bootstrap interval, the paired difference to --baseline with its interval, the value and
reference parts, false answers (unanswerable questions given a value) and false refusals
(answerable ones left blank), and the mean LLM seconds per question (as first paid: a reply
the cache served counts the seconds its call took). Then the wrong-value rate per evidence
flag of the question file (Quote/Table/Figure/Math/is_NA), where the file has them.

    python bench/answering/sweep_tables.py --lake LAKE --sweep NAME --baseline MEMBER \
        [--sets train_QA.csv,dev_QA.csv] [--markdown FILE]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.paired_tables import diff_cell, mean_cell, table  # noqa: E402
from kohaku_rag.answering import qa_tables as st  # noqa: E402
from kohaku_rag.answering.config_folder import config_of  # noqa: E402
from kohaku_rag.answering.prediction import Prediction  # noqa: E402
from kohaku_rag.answers.question_files import load_questions  # noqa: E402
from kohaku_rag.answers.records import Answer, Question  # noqa: E402
from kohaku_rag.evaluation.metrics import MetricReport, score_with  # noqa: E402
from kohaku_rag.experiments.sweep import expand, sweep_of  # noqa: E402
from kohaku_rag.lake.layout import Lake  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
METRICS = ("wattbot2025", "wattbot2026")


@dataclass(frozen=True)
class Stored:
    name: str
    questions: tuple[Question, ...]
    preds: Mapping[str, Prediction]  # run 0, by question id


def load_member(lake: Lake, name: str) -> Stored:
    """A computed config's questions and its run 0 (an error naming it when not computed)."""
    cfg = config_of(lake, name)  # a ValueError naming the folder when the file is not there
    keys = st.keys_for(lake, cfg)
    if st.missing_runs(lake, keys.prediction, 1):
        raise SystemExit(f"{name}: not computed yet (run `kohaku sweep` or `kohaku eval --config {name}` first)")
    run = st.read_run(lake, keys.prediction, 0)
    return Stored(name, tuple(load_questions(cfg.questions)), {p.question_id: p for p in run})


def in_order(report: MetricReport, questions: Sequence[Question]) -> list[float]:
    """Each question's total in the report, in question order."""
    by_id = {r.id: r.total for r in report.rows}
    return [by_id[q.id] for q in questions]


def totals(metric: str, questions: Sequence[Question], answers: Mapping[str, Answer]) -> list[float]:
    """Each question's total under `metric`, in question order."""
    return in_order(score_with(metric, questions, answers), questions)


def short(name: str) -> str:
    """A member's name without its sweep's prefix ("levers--cite-reply" -> "cite-reply")."""
    return name.split("--", 1)[1] if "--" in name else name


def set_ids(wattbot: Path, files: Sequence[str]) -> dict[str, set[str]]:
    """Each question file's ids by its stem ("train", "dev"), and "both"."""
    sets = {Path(f).stem.removesuffix("_QA"): {q.id for q in load_questions(wattbot / f)} for f in files}
    sets["both"] = set().union(*sets.values())
    return sets


def member_row(member: Stored, base: Stored, ids: set[str], metric: str) -> dict[str, object]:
    qs = [q for q in member.questions if q.id in ids]
    report = score_with(metric, qs, {q: p.answer for q, p in member.preds.items()})
    mine = in_order(report, qs)
    theirs = totals(metric, qs, {q: p.answer for q, p in base.preds.items()})
    seconds = [member.preds[q.id].seconds for q in qs if q.id in member.preds]
    same = sum(member.preds[q.id].answer == base.preds[q.id].answer for q in qs)
    return {
        "member": short(member.name),
        "n": len(qs),
        "final": mean_cell(mine),
        "diff": "—" if member is base else diff_cell(mine, theirs),
        "value": f"{report.value:.3f}",
        "ref": f"{report.ref:.3f}",
        "false ans": f"{report.false_answers}/{report.unanswerable}",
        "false ref": f"{report.false_refusals}/{report.answerable}",
        "same": f"{same}/{len(qs)}",
        "s/q": f"{np.mean(seconds):.1f}" if seconds else "—",
    }


def flag_rows(members: Sequence[Stored]) -> list[dict[str, object]]:
    """Per member, the wrong-value rate per evidence flag (2026 value rule)."""
    rows = []
    for m in members:
        report = score_with("wattbot2026", m.questions, {q: p.answer for q, p in m.preds.items()})
        row: dict[str, object] = {"member": short(m.name)}
        for flag, rate in sorted(report.per_flag.items()):
            row[flag] = f"{rate.wrong}/{rate.n}"
        rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lake", type=Path, required=True)
    parser.add_argument("--sweep", required=True, help="a sweep of the lake's configs/sweeps folder")
    parser.add_argument("--baseline", required=True, help="the member every row is paired against")
    parser.add_argument("--wattbot", type=Path, default=REPO.parent / "shared" / "wattbot")
    parser.add_argument("--sets", default="train_QA.csv,dev_QA.csv", help="question files that split the rows")
    parser.add_argument("--markdown", type=Path, help="also write the tables to this file")
    args = parser.parse_args()

    lake = Lake(args.lake)
    sweep = sweep_of(lake, args.sweep)

    names = [m.name for m in expand(sweep)]
    members = []
    for name in names:
        try:
            members.append(load_member(lake, name))
        except (SystemExit, ValueError) as exc:  # not computed (or written) yet: the others are shown
            print(f"{name}: skipped ({exc})")
    base = next((m for m in members if m.name == args.baseline), None)
    if base is None:
        raise SystemExit(f"--baseline {args.baseline!r} is not a member of {args.sweep}: {', '.join(names)}")
    out = []
    for metric in METRICS:
        for set_name, ids in set_ids(args.wattbot, args.sets.split(",")).items():
            out.append(f"### {set_name}, {metric} (paired against {base.name})\n")
            out.append(table([member_row(m, base, ids, metric) for m in members]) + "\n")
    out.append("### wrong values per evidence flag (2026 value rule)\n")
    out.append(table(flag_rows(members)) + "\n")
    text = "\n".join(out)
    print(text)
    if args.markdown:
        args.markdown.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
