"""An abstention margin decided on the labelled questions, with an honest estimate of it.

Reads one computed config whose `[generation] abstain = "unsupported"` ran with
`abstain_margin = -100` (the support check's log-odds recorded on every answer, nothing
blanked), then for each margin m blanks the answers whose log P(Yes) - log P(No) < m and
scores them, question by question, under the 2026 rule (a right abstention earns 1.0;
refusing an answerable question loses what it scored) and the 2025 one. Printed:

- how well the log-odds separate unanswerable from answerable questions (ROC AUC), and
  their quantiles per class;
- a row per candidate margin: answers blanked, false answers left, false refusals made,
  both finals and the paired difference to no abstention with its 95% bootstrap interval;
- leave-one-out: each question scored with the margin that is best on the other
  questions (what a margin chosen on these questions is worth on a new one), against no
  abstention, paired; per question set (train, dev) and both.

    python bench/answering/abstention.py --lake LAKE --config NAME [--metric wattbot2026] [--sets ...]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.answering.sweep_tables import load_member, set_ids, totals  # noqa: E402
from bench.paired_tables import diff_cell, mean_cell, table  # noqa: E402
from kohaku_rag.answers.normalise import is_blank_value  # noqa: E402
from kohaku_rag.answers.records import Answer, Question  # noqa: E402
from kohaku_rag.lake.layout import Lake  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
NONE = -1e9  # a margin below every log-odds: nothing is blanked


def blanked(
    answers: Mapping[str, Answer], logodds: Mapping[str, float | None], margin: float, units: Mapping[str, str]
) -> dict[str, Answer]:
    """The answers with every one below the margin made a blank (no log-odds: kept)."""
    out = dict(answers)
    for qid, lo in logodds.items():
        if lo is not None and lo < margin and not out[qid].is_blank:
            out[qid] = Answer.blank(units[qid])
    return out


def margin_scores(metric: str, questions: Sequence[Question], variants: Sequence[Mapping[str, Answer]]) -> np.ndarray:
    """[margin, question] totals: one row per margin's answers."""
    return np.array([totals(metric, questions, answers) for answers in variants])


def candidate_margins(logodds: Mapping[str, float | None]) -> list[float]:
    """No abstention, then a margin just above each distinct log-odds (each blanks one more)."""
    values = sorted({round(v, 3) for v in logodds.values() if v is not None})
    return [NONE, *[v + 0.0005 for v in values]]


def loo(scores: np.ndarray) -> np.ndarray:
    """Each question's score under the margin best on the others (ties: the lowest margin,
    the one that blanks least)."""
    total = scores.sum(axis=1)
    out = np.empty(scores.shape[1])
    for i in range(scores.shape[1]):
        best = int(np.argmax(total - scores[:, i]))
        out[i] = scores[best, i]
    return out


def auc(pos: Sequence[float], neg: Sequence[float]) -> float:
    """P(a random unanswerable question's log-odds < a random answerable one's)."""
    if not pos or not neg:
        return float("nan")
    wins = sum((p < n) + 0.5 * (p == n) for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lake", type=Path, required=True)
    parser.add_argument("--config", required=True, help='a computed config with abstain = "unsupported", margin -100')
    parser.add_argument("--metric", default="wattbot2026", choices=["wattbot2025", "wattbot2026"])
    parser.add_argument("--wattbot", type=Path, default=REPO.parent / "shared" / "wattbot")
    parser.add_argument("--sets", default="train_QA.csv,dev_QA.csv")
    args = parser.parse_args()

    member = load_member(Lake(args.lake), args.config)
    questions = list(member.questions)
    answers = {q: p.answer for q, p in member.preds.items()}
    logodds = {q: p.support_logodds for q, p in member.preds.items()}
    if all(v is None for v in logodds.values()):
        raise SystemExit(f'{args.config}: no support log-odds recorded (it needs abstain = "unsupported")')
    unanswerable = {q.id for q in questions if q.gold is not None and is_blank_value(q.gold.answer_value)}
    pos = [v for q, v in logodds.items() if v is not None and q in unanswerable]
    neg = [v for q, v in logodds.items() if v is not None and q not in unanswerable]
    print(
        f"{args.config}: {len(questions)} questions, {len(unanswerable)} unanswerable; support checks: {len(pos) + len(neg)}"
    )
    print(f"ROC AUC (unanswerable below answerable): {auc(pos, neg):.3f}")
    for label, xs in (("unanswerable", pos), ("answerable", neg)):
        if xs:
            q = np.quantile(xs, [0.0, 0.25, 0.5, 0.75, 1.0])
            print(f"  {label:<13} log-odds min/25/50/75/max: " + " / ".join(f"{v:+.2f}" for v in q))

    margins = candidate_margins(logodds)
    units = {q.id: q.answer_unit for q in questions}
    variants = [blanked(answers, logodds, m, units) for m in margins]  # each margin's answers, made once
    already = sum(a.is_blank for a in answers.values())
    counts = [
        {
            "margin": "none" if m == NONE else f"{m:+.3f}",
            "blanked": sum(a.is_blank for a in now.values()) - already,
            "false answers": sum(not now[q].is_blank for q in unanswerable if q in now),
            "false refusals": sum(now[q].is_blank for q in now if q not in unanswerable),
        }
        for m, now in zip(margins, variants, strict=True)
    ]
    for metric in dict.fromkeys([args.metric, "wattbot2025", "wattbot2026"]):
        scores = margin_scores(metric, questions, variants)
        base = scores[0]
        rows = []
        for count, row in zip(counts, scores, strict=True):
            rows.append(
                {
                    **count,
                    "final": f"{row.mean():.3f}",
                    "vs none": diff_cell(row, base),
                }
            )
        # Print the margins up to the best one and a few beyond (the rest only blank more).
        best = int(np.argmax(scores.mean(axis=1)))
        print(f"\n### {metric}: margins (best in-sample: {rows[best]['margin']})\n")
        print(table(rows[: best + 6]))
        held_out = loo(scores)
        index = {q.id: i for i, q in enumerate(questions)}
        print(f"\n{metric}, leave-one-out margin against no abstention:")
        for name, ids in set_ids(args.wattbot, args.sets.split(",")).items():
            cols = sorted(index[q] for q in ids if q in index)  # question order: the same resamples every run
            vs_none = diff_cell(held_out[cols], base[cols])
            print(f"  {name:<6} n={len(cols):>3}  final {mean_cell(held_out[cols])}  vs none {vs_none}")


if __name__ == "__main__":
    main()
