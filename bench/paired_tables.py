"""The one harness for the benches' paired bootstrap tables: a score with its 95% interval,
a paired difference with its interval (marked when the interval excludes 0), and a
Markdown table of such rows. The statistics are kohaku_rag.evaluation.run_stats's
(`bootstrap_mean`, `paired_bootstrap`: the leaderboard's), so a bench prints what the
leaderboard would.

Used by answering/sweep_tables.py, answering/abstention.py, answering/table_answers.py,
answering/sweep_wattbot.py and retrieval/retrieval_sweep.py.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kohaku_rag.evaluation.run_stats import bootstrap_mean, paired_bootstrap


def mean_cell(values: Sequence[float]) -> str:
    """The mean with its 95% bootstrap interval: `0.612 [0.580, 0.640]`."""
    m = bootstrap_mean(list(values))
    return f"{m.diff:.3f} [{m.low:.3f}, {m.high:.3f}]"


def diff_cell(mine: Sequence[float], theirs: Sequence[float], mark: str = "") -> str:
    """mine − theirs, paired by position, with its 95% interval: `+0.012 [-0.010, +0.034]`,
    `mark` appended when the interval excludes 0."""
    d = paired_bootstrap(list(mine), list(theirs))
    return f"{d.diff:+.3f} [{d.low:+.3f}, {d.high:+.3f}]{mark if d.significant else ''}"


def table(rows: Sequence[Mapping[str, object]]) -> str:
    """A Markdown table (it reads as plain text too), the columns of every row in order."""
    cols = list(dict.fromkeys(k for r in rows for k in r))
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(str(r.get(c, "")) for c in cols) + " |" for r in rows]
    return "\n".join(lines)
