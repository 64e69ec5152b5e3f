"""Answers before and after a change, on train + dev, paired question by question (issue 41:
tables as records). Each side is a lake indexed and evaluated by its own code (a worktree of
main, and this branch), so each side's runs are read by the code that wrote them:

    PYTHONPATH=<main worktree> python bench/answering/table_answers.py export --lake BASE --config td --out base.json
    python bench/answering/table_answers.py export --lake NEW --config td --out new.json
    python bench/answering/table_answers.py compare base.json new.json [--wattbot ../shared/wattbot] [--markdown FILE]

`compare` prints, for train, dev and both under the 2025 and 2026 metrics, each side's final
with its 95% bootstrap interval and the paired difference (bench/answering/sweep_tables.py's harness);
then right values per evidence flag of dev (Quote/Table/Figure/Math/is_NA), and the LLM
seconds and prompt tokens per question.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.answering.sweep_tables import METRICS, Stored, member_row, set_ids  # noqa: E402
from bench.paired_tables import table  # noqa: E402
from kohaku_rag.answering.prediction import Prediction, prediction_from_row  # noqa: E402
from kohaku_rag.answers.question_files import load_questions  # noqa: E402
from kohaku_rag.evaluation.metrics import score_with  # noqa: E402
from kohaku_rag.lake.layout import Lake  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


def export(lake: Path, config: str, out: Path) -> None:
    """The config's run 0 as JSON rows (read by the code that wrote it)."""
    from bench.answering.sweep_tables import load_member  # noqa: PLC0415 -- the caller's code reads its own lake

    member = load_member(Lake(lake), config)
    rows = [p.as_row() for p in member.preds.values()]
    out.write_text(json.dumps({"questions": str(_questions_of(lake, config)), "rows": rows}, default=str))
    print(f"{out}: {len(rows)} predictions")


def _questions_of(lake: Path, config: str) -> Path:
    from kohaku_rag.answering.config_folder import config_of  # noqa: PLC0415

    return Path(config_of(Lake(lake), config).questions)


def load(path: Path, name: str, wattbot: Path | None = None) -> Stored:
    """A side's predictions, scored against the WattBot files' own questions where they hold
    the ids (their evidence flags, Table/Quote/..., are what the per-flag rows count)."""
    data = json.loads(path.read_text())
    preds: dict[str, Prediction] = {r["id"]: prediction_from_row(r) for r in data["rows"]}
    questions = list(load_questions(Path(data["questions"])))
    if wattbot is not None:
        gold = {q.id: q for f in ("train_QA.csv", "dev_QA.csv") for q in load_questions(wattbot / f)}
        questions = [gold.get(q.id, q) for q in questions]
    return Stored(name, tuple(questions), preds)


def flag_right(side: Stored, ids: set[str]) -> dict[str, object]:
    """Right values per evidence flag (2026 value rule), among `ids`."""
    qs = [q for q in side.questions if q.id in ids]
    report = score_with("wattbot2026", qs, {q: p.answer for q, p in side.preds.items()})
    row: dict[str, object] = {"side": side.name}
    for flag, rate in sorted(report.per_flag.items()):
        row[flag] = f"{rate.n - rate.wrong}/{rate.n}"
    return row


def cost(side: Stored, ids: set[str]) -> dict[str, object]:
    preds = [p for q, p in side.preds.items() if q in ids]
    seconds = [p.seconds for p in preds]
    return {
        "side": side.name,
        "s/q mean": f"{np.mean(seconds):.1f}",
        "s/q median": f"{np.median(seconds):.1f}",
        "prompt tokens/q": f"{np.mean([p.prompt_tokens for p in preds]):.0f}",
        "reply tokens/q": f"{np.mean([p.completion_tokens for p in preds]):.0f}",
        "LLM calls/q": f"{np.mean([p.llm_calls for p in preds]):.2f}",
    }


def compare(base_path: Path, new_path: Path, wattbot: Path, markdown: Path | None) -> None:
    base, new = load(base_path, "main", wattbot), load(new_path, "tables", wattbot)
    sets = set_ids(wattbot, ["train_QA.csv", "dev_QA.csv"])
    out = []
    for metric in METRICS:
        for set_name, ids in sets.items():
            out.append(f"### {set_name}, {metric} (paired against main)\n")
            out.append(table([member_row(m, base, ids, metric) for m in (base, new)]) + "\n")
    out.append("### right values per evidence flag, dev (2026 value rule)\n")
    out.append(table([flag_right(m, sets["dev"]) for m in (base, new)]) + "\n")
    out.append("### right values per evidence flag, train + dev\n")
    out.append(table([flag_right(m, sets["both"]) for m in (base, new)]) + "\n")
    out.append("### LLM cost per question, train + dev (as first paid)\n")
    out.append(table([cost(m, sets["both"]) for m in (base, new)]) + "\n")
    text = "\n".join(out)
    print(text)
    if markdown:
        markdown.write_text(text, encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    ex = sub.add_parser("export")
    ex.add_argument("--lake", type=Path, required=True)
    ex.add_argument("--config", default="td")
    ex.add_argument("--out", type=Path, required=True)
    cp = sub.add_parser("compare")
    cp.add_argument("base", type=Path)
    cp.add_argument("new", type=Path)
    cp.add_argument("--wattbot", type=Path, default=REPO.parent / "shared" / "wattbot")
    cp.add_argument("--markdown", type=Path)
    args = parser.parse_args()
    if args.cmd == "export":
        export(args.lake, args.config, args.out)
    else:
        compare(args.base, args.new, args.wattbot, args.markdown)


if __name__ == "__main__":
    main()
