"""Replies whose value is not of the asked form, before and after the form check, on one lake.

Two configs that differ only by `value_form` ("off" and "abstain") are evaluated on the same
lake (the second's replies come from the response cache: the check changes no prompt):

    kohaku eval --lake LAKE --config formoff && kohaku eval --lake LAKE --config formon
    python bench/answering/value_forms.py --lake LAKE [--off formoff] [--on formon]

Prints each reply the check turned into an abstention (question id, gold value, the reason):
with "off" each of them was shown as a value, with "abstain" none is. Then, for the score,
`bench/answering/table_answers.py export` both configs and `compare` them (paired, 95% CI).
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from kohaku_rag.answering import qa_tables as st  # noqa: E402
from kohaku_rag.answering.config_folder import config_of  # noqa: E402
from kohaku_rag.answers.value_form import FORM_CHECK  # noqa: E402
from kohaku_rag.lake.layout import Lake  # noqa: E402


def form_failures(lake: Lake, config: str) -> list[dict[str, object]]:
    """The form-check entries of the config's run 0, in question order."""
    keys = st.keys_for(lake, config_of(lake, config))
    rows = pq.read_table(st.debug_path(lake, keys.prediction, 0)).to_pylist()
    return [r for r in rows if r.get("kind") == FORM_CHECK]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lake", type=Path, required=True)
    parser.add_argument("--off", default="formoff")
    parser.add_argument("--on", default="formon")
    args = parser.parse_args()
    lake = Lake(args.lake)
    gold = {}
    questions = Path(config_of(lake, args.on).questions)
    with questions.open(newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            gold[row["id"]] = (row.get("answer_value", ""), row.get("answer_unit", ""))
    failures = form_failures(lake, args.on)
    off_failures = form_failures(lake, args.off)
    print(f"{questions.name}: {len(gold)} questions")
    print(f"replies not of the asked form: {len(failures)}")
    print(f"  shown as a value with value_form = off:     {len(failures)}  (its run logs {len(off_failures)} checks)")
    print("  shown as a value with value_form = abstain: 0  (each is an abstention with its reason)")
    for r in failures:
        value, unit = gold.get(str(r.get("id") or r.get("question_id") or ""), ("?", "?"))
        print(f"  - {r.get('id') or r.get('question_id')}: {r['reply']}  (gold {value} {unit})")


if __name__ == "__main__":
    main()
