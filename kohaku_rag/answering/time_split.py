"""Where the time of a config's answers went: per question, the LLM's seconds, the prompt
tokens evaluated against those reused from a KV state, the reply tokens and the calls.

Why per question and summed over its runs: that is what a reader waits for, and what
`kohaku eval` and the Dagster UI show beside the score, to say where the time goes.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from kohaku_rag.answering.prediction import Prediction

__all__ = ["TimeSplit", "time_split"]


@dataclass(frozen=True)
class TimeSplit:
    """Per question (all its runs together), over the questions of a config's runs."""

    questions: int
    median_seconds: float
    p90_seconds: float
    prompt_tokens: float  # mean per question
    evaluated_tokens: float | None  # of them, evaluated (None: a backend did not say)
    reply_tokens: float
    llm_calls: float
    cached_calls: float

    @property
    def reused_tokens(self) -> float | None:
        return None if self.evaluated_tokens is None else self.prompt_tokens - self.evaluated_tokens

    def as_dict(self) -> dict[str, float | int | None]:
        return asdict(self) | {"reused_tokens": self.reused_tokens}

    def line(self) -> str:
        """One line for a terminal: 'LLM time per question: median 9.8 s, p90 14.2 s; ...'."""
        prompt = f"{self.prompt_tokens:.0f} prompt tokens"
        if self.evaluated_tokens is not None:
            prompt += f" ({self.evaluated_tokens:.0f} evaluated, {self.reused_tokens:.0f} reused)"
        return (
            f"LLM time per question: median {self.median_seconds:.1f} s, p90 {self.p90_seconds:.1f} s; "
            f"{prompt}, {self.reply_tokens:.0f} reply tokens, {self.llm_calls:.1f} calls "
            f"({self.cached_calls:.1f} from the response cache)"
        )


def time_split(runs: Sequence[Sequence[Prediction]]) -> TimeSplit | None:
    """The split over every question of `runs` (each a run's predictions); None when empty."""
    by_question: dict[str, list[Prediction]] = defaultdict(list)
    for run in runs:
        for pred in run:
            by_question[pred.question_id].append(pred)
    if not by_question:
        return None
    groups = list(by_question.values())
    seconds = sorted(sum(p.seconds for p in g) for g in groups)
    n = len(groups)

    def mean(values: Sequence[float]) -> float:
        return round(sum(values) / n, 1)

    evaluated = [p.prompt_tokens_evaluated for g in groups for p in g]
    return TimeSplit(
        questions=n,
        median_seconds=round(statistics.median(seconds), 2),
        p90_seconds=round(seconds[min(n - 1, int(0.9 * n))], 2),
        prompt_tokens=mean([sum(p.prompt_tokens for p in g) for g in groups]),
        evaluated_tokens=None if any(e is None for e in evaluated) else mean([float(e or 0) for e in evaluated]),
        reply_tokens=mean([sum(p.completion_tokens for p in g) for g in groups]),
        llm_calls=mean([sum(p.llm_calls for p in g) for g in groups]),
        cached_calls=mean([sum(p.cached_calls for p in g) for g in groups]),
    )
