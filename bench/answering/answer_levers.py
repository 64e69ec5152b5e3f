"""Issue 34's answer-lever sweep with the bundled LLM on train + dev, as one command.

Writes into an indexed WattBot lake (bench/indexing/index_wattbot.py leaves one):
- `qa/train_dev_QA.csv`: WattBot 2025 train (41) and dev (92) questions in one file, with
  dev's evidence flag columns (blank on train rows, which have none);
- `configs/td.toml`: the defaults, asked over that file;
- `configs/sweeps/levers.toml`: one member per answer lever against the default (SWEEP);
then runs `kohaku sweep levers` (each member once; prompts they share with the default are
answered from the lake's LLM cache, so a member costs only what it asks anew) and prints
bench/answering/sweep_tables.py's tables (train, dev, both; paired against the default) and
bench/answering/abstention.py's margins for the support check. Run it alone on the machine: the
seconds per question are the LLM's, as first paid. About 75 min on 2 cores from an empty
cache.

    python bench/answering/answer_levers.py --lake LAKE [--wattbot DIR] [--corpus DIR]
"""

from __future__ import annotations

import argparse
import csv
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from kohaku_rag.answers.question_files import WATTBOT_COLUMNS  # noqa: E402
from kohaku_rag.answers.records import FLAG_COLUMNS  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
BENCH = Path(__file__).resolve().parent
FILES = ("train_QA.csv", "dev_QA.csv")
# The members, cheapest first: most of their prompts are the default's (cached).
SWEEP = """\
# Issue 34: every answer lever against the default, on train + dev (133 questions), one run each.
base = "td"
seeds = 1
[[variants]]
"generation.cite" = "source"      # the default
[[variants]]
"generation.cite" = "reply"
[[variants]]
"generation.compute" = "expression"
[[variants]]
"generation.compute" = "asked"
[[variants]]
# The support check on every answer, recorded only (margin -100 blanks nothing):
# bench/answering/abstention.py decides the margin on these log-odds.
"generation.abstain" = "unsupported"
"generation.abstain_margin" = -100.0
[[variants]]
"retrieval.entity_queries" = "rules"
[[variants]]
"generation.quote_evidence" = "off"
[[variants]]
"generation.choose" = "candidates"
[[variants]]
"generation.quote_evidence" = "all"
"""
DEFAULT = "levers--cite-source"
SUPPORT = "levers--abstain-unsupported--abstain_margin-100.0"


def write_questions(wattbot: Path, out: Path) -> None:
    """The files' rows in one file: the WattBot columns, then the flag columns any file has."""
    files = {}
    for name in FILES:
        with (wattbot / name).open(newline="", encoding="utf-8-sig") as f:
            files[name] = list(csv.DictReader(f))
    present = {c for rows in files.values() for c in (rows[0] if rows else {})}
    columns = [*WATTBOT_COLUMNS, *(c for c in FLAG_COLUMNS if c in present)]
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=columns)
        writer.writeheader()
        for rows in files.values():
            writer.writerows({c: row.get(c, "") for c in columns} for row in rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lake", type=Path, required=True, help="an indexed WattBot lake")
    parser.add_argument("--wattbot", type=Path, default=REPO.parent / "shared" / "wattbot")
    parser.add_argument("--corpus", type=Path, help="the corpus folder the lake was indexed from (kohaku's --corpus)")
    args = parser.parse_args()

    lake = args.lake.resolve()
    questions = lake / "qa" / "train_dev_QA.csv"
    write_questions(args.wattbot, questions)
    configs = lake / "configs"
    (configs / "sweeps").mkdir(parents=True, exist_ok=True)
    (configs / "td.toml").write_text(f"questions = {str(questions)!r}\n", encoding="utf-8")
    (configs / "sweeps" / "levers.toml").write_text(SWEEP, encoding="utf-8")
    kohaku = [sys.executable, "-m", "kohaku_assets.cli", "sweep", "levers", "--lake", str(lake)]
    subprocess.run(kohaku + (["--corpus", str(args.corpus)] if args.corpus else []), check=True)
    tables = [sys.executable, str(BENCH / "sweep_tables.py"), "--lake", str(lake), "--sweep", "levers"]
    subprocess.run([*tables, "--baseline", DEFAULT, "--wattbot", str(args.wattbot)], check=True)
    margins = [sys.executable, str(BENCH / "abstention.py"), "--lake", str(lake), "--config", SUPPORT]
    subprocess.run([*margins, "--wattbot", str(args.wattbot)], check=True)


if __name__ == "__main__":
    main()
