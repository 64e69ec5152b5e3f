"""What a sweep will cost before it runs: the LLM calls its members still need × the
measured seconds (and tokens) per call.

Calls still needed: every (question, run) a member's stored predictions lack (members that
share a prediction table are counted once, with the most runs any of them asks for) and
whose first answer request is not in the response cache (checked when its context, the
retrieval table, is stored: members whose contexts come out the same share replies), times
the calls one answer took on average in this lake's stored predictions (retries and
true/false verdicts included; 1 when nothing is stored yet), plus one planner call per
question for each distinct planner request among the retrieval tables not stored. Seconds
and tokens per call are the means over the lake's LLM response cache (`cache/llm/llm.sqlite`,
which records what each reply took) for that model. An estimate, not a promise: retries
and verdicts depend on the replies, and a context not retrieved yet cannot be looked up.
"""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import duckdb

from kohaku_rag.answering import qa_tables as st
from kohaku_rag.answering.answer import answering_request
from kohaku_rag.answering.qa_config import QAConfig
from kohaku_rag.answers.question_files import load_questions
from kohaku_rag.config_files import stable_hash
from kohaku_rag.http_retry import endpoint_id
from kohaku_rag.lake.layout import Lake
from kohaku_rag.llm import LLMSpec
from kohaku_rag.llm.cache import request_key

__all__ = [
    "CacheStats",
    "Estimate",
    "cache_model_id",
    "cache_stats",
    "cached_first_calls",
    "calls_per_answer",
    "estimate",
]


@dataclass(frozen=True)
class CacheStats:
    replies: int  # replies of this model in the cache
    seconds_per_call: float | None
    tokens_per_call: float | None


@dataclass(frozen=True)
class Estimate:
    members: int
    answers_missing: int  # (question, run) pairs not stored, over distinct prediction tables
    answers_cached: int  # of those, the ones whose first request the response cache holds
    planner_calls: int
    calls_per_answer: float
    calls_per_answer_measured: bool
    calls: int
    seconds_per_call: float | None
    seconds: float | None
    tokens: int | None

    def summary(self) -> str:
        how = "measured" if self.calls_per_answer_measured else "assumed"
        per = f"{self.calls_per_answer:.2f} calls per answer ({how})"
        if self.seconds is None:
            time = "no measured seconds per call yet (the cache holds no reply of this model)"
        else:
            time = f"~{self.seconds / 60:.1f} min at {self.seconds_per_call:.2f} s per call"
        tokens = f", ~{self.tokens:,} tokens" if self.tokens is not None else ""
        cached = f" ({self.answers_cached} of them in the response cache)" if self.answers_cached else ""
        return (
            f"{self.members} members: {self.answers_missing - self.answers_cached} answers missing{cached} × {per} "
            f"+ {self.planner_calls} planner calls = ~{self.calls} LLM calls, {time}{tokens}"
        )


def _cache_path(lake: Lake) -> Path:
    return lake.root / "cache" / "llm" / "llm.sqlite"  # where make_chat_model puts the CachedChat


def cache_stats(lake: Lake, model: str) -> CacheStats:
    """Mean seconds and tokens per reply the cache recorded for `model` (its model id names it)."""
    path = _cache_path(lake)
    if not path.exists():
        return CacheStats(0, None, None)
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        row = con.execute(
            "SELECT count(*), avg(seconds), avg(prompt_tokens + completion_tokens) FROM responses "
            "WHERE instr(model_id, ?) > 0",
            (model,),
        ).fetchone()
    except sqlite3.Error:
        return CacheStats(0, None, None)
    finally:
        con.close()
    count, seconds, tokens = row
    return CacheStats(int(count), seconds, tokens) if count else CacheStats(0, None, None)


def calls_per_answer(lake: Lake) -> float | None:
    """Mean LLM calls one stored answer (question × run) took, over the lake's predictions."""
    pattern = str(st.qa_dir(lake) / "predictions" / "*" / "run-*.parquet")
    if not any((st.qa_dir(lake) / "predictions").glob("*/run-*.parquet")):
        return None
    con = duckdb.connect()
    try:
        value = con.execute(f"SELECT avg(llm_calls) FROM read_parquet('{pattern}') WHERE error = ''").fetchone()
    finally:
        con.close()
    return float(value[0]) if value and value[0] else None


def cache_model_id(spec: LLMSpec) -> str:
    """The model id the response cache keys `spec`'s replies under (as make_chat_model's
    backends name themselves), without loading the model."""
    if spec.backend == "llama":
        return f"llama.cpp:{Path(spec.model).stem if spec.model.endswith('.gguf') else spec.model}"
    assert spec.base_url is not None  # checked by LLMSpec
    return f"openai:{spec.model}@{endpoint_id(spec.base_url)}"


def cached_first_calls(lake: Lake, cfg: QAConfig, keys: st.QAKeys, pending: dict[int, list[str]]) -> int:
    """How many pending (question, run) answers would find their first request in the
    response cache; 0 when the retrieval table (their context) is not stored yet. The later
    calls of an answer (retries, verdict) follow from replies, so a cached first call means
    a cached answer."""
    path = st.retrieval_path(lake, keys.retrieval)
    cache = _cache_path(lake)
    if not pending or not path.exists() or not cache.exists():
        return 0
    retrieved = st.read_retrievals(path)
    questions = {q.id: q for q in load_questions(cfg.questions)}
    model_id = cache_model_id(cfg.generation.llm)
    wanted = [
        request_key(model_id, answering_request(questions[qid], retrieved[qid].context, cfg.generation, run))
        for run, ids in pending.items()
        for qid in ids
        if qid in retrieved and qid in questions
    ]
    con = sqlite3.connect(f"file:{cache}?mode=ro", uri=True)
    try:
        return sum(con.execute("SELECT 1 FROM responses WHERE key = ?", (k,)).fetchone() is not None for k in wanted)
    except sqlite3.Error:
        return 0
    finally:
        con.close()


def estimate(lake: Lake, configs: Sequence[QAConfig]) -> Estimate:
    """The calls `configs` still need and what they should take (see the module docstring)."""
    runs_by_key: dict[str, tuple[int, QAConfig, st.QAKeys]] = {}
    retrievals: dict[str, QAConfig] = {}
    for cfg in configs:
        keys = st.keys_for(lake, cfg)
        runs = max(cfg.voting.runs, runs_by_key.get(keys.prediction, (0, cfg, keys))[0])
        runs_by_key[keys.prediction] = (runs, cfg, keys)
        retrievals[keys.retrieval] = cfg
    missing = cached = 0
    for key, (runs, cfg, keys) in runs_by_key.items():
        ids = [q.id for q in load_questions(cfg.questions)]
        pending = st.pending_questions(lake, key, runs, ids)
        missing += sum(len(todo) for todo in pending.values())
        cached += cached_first_calls(lake, cfg, keys, pending)
    # Retrieval tables that differ only in search settings ask the planner the same thing
    # (the cache answers the second): one call per question per distinct planner request.
    planners = {
        stable_hash([cfg.questions, cfg.retrieval.planner_max_queries, dataclasses.asdict(cfg.planner_llm)]): cfg
        for key, cfg in retrievals.items()
        if cfg.retrieval.use_planner and not st.retrieval_path(lake, key).exists()
    }
    planner = sum(len(load_questions(cfg.questions)) for cfg in planners.values())
    measured = calls_per_answer(lake)
    per_answer = measured if measured is not None else 1.0
    calls = round((missing - cached) * per_answer) + planner
    model = configs[0].generation.llm.model if configs else ""
    stats = cache_stats(lake, model)
    seconds = calls * stats.seconds_per_call if stats.seconds_per_call is not None else None
    tokens = round(calls * stats.tokens_per_call) if stats.tokens_per_call is not None else None
    return Estimate(
        len(configs),
        missing,
        cached,
        planner,
        per_answer,
        measured is not None,
        calls,
        stats.seconds_per_call,
        seconds,
        tokens,
    )
