"""Statistics over stored runs: single-run scores (mean ± sd over seeds), the ensemble-size
curve, and paired bootstrap intervals for the difference between two configs.

Everything here reads answers already stored; nothing asks an LLM.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from kohaku_rag.answering.qa_config import DEFAULT_METRIC
from kohaku_rag.answers.records import Answer, Question
from kohaku_rag.answers.vote import vote
from kohaku_rag.evaluation.metrics import score_with

__all__ = [
    "Comparison",
    "bootstrap_mean",
    "ensemble_curve",
    "mean_sd",
    "paired_bootstrap",
    "run_finals",
    "voted",
]

# Subsets of m runs averaged per point of the ensemble-size curve at most (all of them when fewer).
MAX_SUBSETS = 20


def mean_sd(values: Sequence[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (n - 1; 0 for a single value)."""
    n = len(values)
    if n == 0:
        return math.nan, math.nan
    mean = sum(values) / n
    if n == 1:
        return mean, 0.0
    return mean, math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))


def _final(
    questions: Sequence[Question], answers: Mapping[str, Answer], known: Sequence[str] | None, metric: str
) -> float:
    gold = [q for q in questions if q.gold is not None]
    return score_with(metric, gold, dict(answers), known or None).final if gold else math.nan


def run_finals(
    questions: Sequence[Question],
    runs: Sequence[Mapping[str, Answer]],
    known: Sequence[str] | None = None,
    metric: str = DEFAULT_METRIC,
) -> list[float]:
    """The WattBot final score (under `metric`) of each single run."""
    return [_final(questions, run, known, metric) for run in runs]


def voted(runs: Sequence[Mapping[str, Answer]], mode: str, ignore_blank: bool, tiebreak: str) -> dict[str, Answer]:
    """One vote per question over `runs` (in the order given, which the `first` tiebreak prefers)."""
    by_question: dict[str, list[Answer]] = {}
    for run in runs:
        for qid, answer in run.items():
            by_question.setdefault(qid, []).append(answer)
    return {qid: vote(answers, mode, ignore_blank, tiebreak) for qid, answers in by_question.items()}


def _subsets(n: int, m: int, limit: int) -> list[tuple[int, ...]]:
    """Every m-subset of range(n) in order when there are at most `limit`, else `limit`
    distinct ones drawn with a fixed seed (so the curve is reproducible)."""
    if math.comb(n, m) <= limit:
        return list(itertools.combinations(range(n), m))
    rng = random.Random(1000 * n + m)
    picked: set[tuple[int, ...]] = set()
    while len(picked) < limit:
        picked.add(tuple(sorted(rng.sample(range(n), m))))
    return sorted(picked)


def ensemble_curve(
    questions: Sequence[Question],
    runs: Sequence[Mapping[str, Answer]],
    mode: str,
    ignore_blank: bool = True,
    tiebreak: str = "first",
    known: Sequence[str] | None = None,
    limit: int = MAX_SUBSETS,
    metric: str = DEFAULT_METRIC,
) -> list[float]:
    """Score of m voted runs for m = 1..len(runs), each the mean over subsets of m runs."""
    curve = []
    for m in range(1, len(runs) + 1):
        scores = [
            _final(questions, voted([runs[i] for i in subset], mode, ignore_blank, tiebreak), known, metric)
            for subset in _subsets(len(runs), m, limit)
        ]
        curve.append(sum(scores) / len(scores))
    return curve


@dataclass(frozen=True)
class Comparison:
    """a − b over paired questions: the mean difference and its bootstrap interval."""

    diff: float
    low: float
    high: float
    questions: int
    confidence: float

    @property
    def significant(self) -> bool:
        """The interval excludes 0."""
        return self.low > 0.0 or self.high < 0.0


def bootstrap_mean(
    values: Sequence[float], *, resamples: int = 2000, confidence: float = 0.95, seed: int = 0
) -> Comparison:
    """Percentile bootstrap over questions of mean(values): `diff` is the mean (of the
    differences, when `values` are paired differences) and low/high its interval."""
    if not len(values):
        return Comparison(math.nan, math.nan, math.nan, 0, confidence)
    arr = np.asarray(values, dtype=float)
    rng = np.random.default_rng(seed)
    means = arr[rng.integers(0, len(arr), size=(resamples, len(arr)))].mean(axis=1)
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(means, [tail, 1.0 - tail])
    return Comparison(float(arr.mean()), float(low), float(high), len(arr), confidence)


def paired_bootstrap(
    a: Sequence[float], b: Sequence[float], *, resamples: int = 2000, confidence: float = 0.95, seed: int = 0
) -> Comparison:
    """Percentile bootstrap over questions of mean(a − b); `a[i]` and `b[i]` score the same
    question (resampling pairs keeps what the two configs share per question)."""
    if len(a) != len(b):
        raise ValueError(f"paired scores differ in length: {len(a)} and {len(b)}")
    diffs = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    return bootstrap_mean(list(diffs), resamples=resamples, confidence=confidence, seed=seed)
