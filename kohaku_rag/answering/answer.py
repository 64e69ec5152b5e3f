"""Answering one question: the retry loop over the prompt (prompt.py), the reply (reply.py),
citing (citing.py) and the true/false verdict (verdict.py).

* An is_blank reply is asked again with k×2, k×3 ... context units (and budget), up to
  `max_retries` times; a context overflow drops the lowest-ranked snippets and asks again.
  How each of those attempts asks (its context size, prompt rules, temperature) is its
  `Stage` (stages.py): HERO's question-type routing and two-stage generation are stages.
* A true/false statement's verdict comes, by default, from one more one-token call over the
  same context (verdict.py).
* Ensemble runs share one prompt and differ only by seed, and are sent together so the
  embedded backend reuses the prompt's KV cache.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from kohaku_rag.answering.citing import cite_source
from kohaku_rag.answering.compute import compute, with_working
from kohaku_rag.answering.entity_split import entity_queries
from kohaku_rag.answering.planner import plan_queries
from kohaku_rag.answering.prediction import Prediction
from kohaku_rag.answering.prompt import (
    ImageLoader,
    answer_request,
    choices,
    computes,
    context_doc_ids,
    explanation_cap,
    is_true_false,
    prompt_text,
)
from kohaku_rag.answering.qa_config import GenerationPart, QAConfig
from kohaku_rag.answering.question_types import search_config
from kohaku_rag.answering.reply import parse_reply, reply_json, with_confidence
from kohaku_rag.answering.searcher import Searcher, answering_searcher
from kohaku_rag.answering.stages import SINGLE, Stage, stage_for
from kohaku_rag.answering.support_check import apply_support, support_logodds, support_request
from kohaku_rag.answering.table_cells import read_cells, reply_fields
from kohaku_rag.answering.table_query import (
    asks_over_table,
    query_request,
    run_query,
    table_frame,
    value_of,
    with_query_value,
)
from kohaku_rag.answering.verdict import apply_verdict, verdict_logodds, verdict_request
from kohaku_rag.answers.records import Answer, Question
from kohaku_rag.answers.value_form import FORM_CHECK, form_problem
from kohaku_rag.answers.vote import vote
from kohaku_rag.errors import BackendError, RetriesExhausted
from kohaku_rag.llm import ChatModel, ChatRequest, ChatResult, ContextOverflowError
from kohaku_rag.llm.base import UnusableReply
from kohaku_rag.retrieval.context import ContextItem
from kohaku_rag.retrieval.retrieval_config import RetrievalConfig
from kohaku_rag.stores.vectors import MAX_K

__all__ = ["answer_question", "answer_runs", "answering_request", "counts_as_blank", "deepen", "plan_for"]

log = logging.getLogger(__name__)


def answering_request(
    question: Question,
    items: Sequence[ContextItem],
    gen: GenerationPart,
    seed: int,
    images: ImageLoader | None = None,
    stage: Stage = SINGLE,
) -> ChatRequest:
    """The answering request exactly as a run sends it: the prompt, with the fields a
    feature adds to the reply (a table's named cells) where the question and context call
    for them. What cost estimates and prefix measurements build too."""
    return answer_request(question, items, gen, seed, images, stage, reply_fields(question, items, gen))


def deepen(cfg: RetrievalConfig, level: int) -> RetrievalConfig:
    """Retry level n (1 = first try): n× the per-query hits (top_k and bm25_top_k, as
    KohakuRAG's k, 2k, 3k), n× the context units (no cut stays no cut) and n× the budget."""
    return dataclasses.replace(
        cfg,
        top_k=min(cfg.top_k * level, MAX_K),
        bm25_top_k=cfg.bm25_top_k * level,
        top_k_final=None if cfg.top_k_final is None else cfg.top_k_final * level,
        budget_chars=cfg.budget_chars * level,
    )


def counts_as_blank(answer: Answer | None) -> bool:
    """An abstention, or an answer citing no document (KohakuRAG retries both)."""
    return answer is not None and (answer.is_blank or not answer.ref_id)


@dataclass
class _Run:
    seed: int
    attempts: int = 0
    prompt_tokens: int = 0
    prompt_tokens_evaluated: int | None = 0  # None once a backend did not say
    completion_tokens: int = 0
    seconds: float = 0.0
    llm_calls: int = 0
    cached_calls: int = 0
    answer: Answer | None = None
    items: tuple[ContextItem, ...] = ()
    error: str = ""
    verdict_logodds: float | None = None
    support_logodds: float | None = None
    working: str = ""
    log: list[dict[str, Any]] = dataclasses.field(default_factory=list)


def _ask(
    chat: ChatModel,
    question: Question,
    items: list[ContextItem],
    gen: GenerationPart,
    runs: Sequence[_Run],
    images: ImageLoader | None = None,
    stage: Stage = SINGLE,
    retry: bool = False,
) -> list[ContextItem]:
    """Ask every run with `items`; on overflow, drop the lowest-ranked quarter and ask again.
    A `retry` (a deeper attempt) keeps the KV state of the opening it shares with the last
    attempt's prompt (the system prompt and the snippets both hold) instead of evaluating
    the whole prompt afresh.

    Returns the items the successful prompt used. Each run's counters and answer are updated.
    """
    if not runs:
        return items
    while True:
        # The prompt (sentence split, figure images) is built once; runs differ only by seed.
        fields = reply_fields(question, items, gen)
        shared = dataclasses.replace(
            answering_request(question, items, gen, runs[0].seed, images, stage), reuse_prefix=retry
        )
        reqs = [dataclasses.replace(shared, seed=r.seed) for r in runs]
        results = chat.complete_many(reqs)
        if any(isinstance(res, ContextOverflowError) for res in results) and items:
            items = items[: min(len(items) - 1, (len(items) * 3) // 4)]
            continue
        doc_ids = context_doc_ids(items)
        prompt = prompt_text(shared)
        for run, res in zip(runs, results, strict=True):
            run.attempts += 1
            run.items = tuple(items)
            run.working = ""
            reply = f"{type(res).__name__}: {res}" if isinstance(res, Exception) else res.text
            kind = "answer" if stage.name == "single" else f"answer ({stage.name})"
            run.log.append(
                {"attempt": run.attempts, "kind": kind, "k": len(items), "prompt": prompt, "reply": reply}
                | call_cost(res)
            )
            if isinstance(res, UnusableReply):  # a reply, though unusable: an abstention like bad JSON
                log.warning("%s: %s", question.id, res)
                run.answer = Answer.blank(question.answer_unit)
                continue
            if isinstance(res, Exception):  # a failed call: not an answer
                run.error = f"{type(res).__name__}: {res}"
                run.answer = Answer.blank(question.answer_unit)
                continue
            _count(run, res)
            chose = bool(choices(question, items, gen))
            answer = parse_reply(res.text, question, doc_ids, chose=chose, explanation_cap=explanation_cap(gen))
            working = None
            if computes(question, gen) and not answer.is_blank:
                working = compute(reply_json(res.text) or {}, items, question.answer_unit)
            if fields is not None and not answer.is_blank:
                read = read_cells(reply_json(res.text) or {}, items, question.answer_unit)
                working = read if read is not None and (read.result or working is None) else working
            if working is not None and working.result:
                answer = with_working(answer, working, doc_ids)  # cites every operand's document
            elif gen.cite == "source":
                answer = cite_source(answer, items, question)
            if working is not None and not working.founded and gen.abstain == "unfounded":
                answer = Answer.blank(question.answer_unit)
            run.working = working.to_json() if working is not None else ""
            problem = form_problem(question, answer, [i.text for i in items]) if gen.value_form == "abstain" else None
            if problem is not None:  # not an answer of the asked form: an abstention that says why
                run.log.append(
                    {"attempt": run.attempts, "kind": FORM_CHECK, "k": len(items), "prompt": "", "reply": problem}
                )
                answer = Answer.blank(question.answer_unit)
            run.answer = with_confidence(answer, res)
        return items


def _count(run: _Run, res: ChatResult) -> None:
    run.llm_calls += 1
    run.cached_calls += int(res.cached)
    run.prompt_tokens += res.prompt_tokens
    if run.prompt_tokens_evaluated is not None and res.prompt_tokens_evaluated is not None:
        run.prompt_tokens_evaluated += res.prompt_tokens_evaluated
    else:
        run.prompt_tokens_evaluated = None
    run.completion_tokens += res.completion_tokens
    run.seconds += res.seconds


def call_cost(res: ChatResult | Exception) -> dict[str, Any]:
    """One call's share of the time, for its entry in the run's log: prompt tokens, how many
    were evaluated (the rest reused from a KV state; None: the backend did not say), reply
    tokens, seconds, and whether the reply came from the response cache."""
    if isinstance(res, Exception):
        return {}
    return {
        "prompt_tokens": res.prompt_tokens,
        "evaluated": res.prompt_tokens_evaluated,
        "reply_tokens": res.completion_tokens,
        "seconds": round(res.seconds, 3),
        "cached": res.cached,
    }


def _answered_groups(runs: Sequence[_Run], key: Callable[[_Run], Hashable]) -> list[list[_Run]]:
    """The answered runs (not blank, not failed), grouped by `key`: one check per group."""
    groups: dict[Hashable, list[_Run]] = {}
    for run in runs:
        if run.answer is not None and not run.answer.is_blank and not run.error:
            groups.setdefault(key(run), []).append(run)
    return list(groups.values())


def _one_word(
    chat: ChatModel, question: Question, group: Sequence[_Run], req: ChatRequest, kind: str, unavailable: str
) -> ChatResult | None:
    """Ask a one-word probability check once for a group of runs (counted and logged on the
    first). None when it gave no probabilities: a failed endpoint marks the runs failed (asked
    again next time); a server without logprobs leaves the answers as they are and the log
    says `unavailable` (what stands, what to set)."""
    try:
        res = chat.complete(req)
    except RetriesExhausted as exc:
        for run in group:
            run.error = f"{type(exc).__name__}: {exc}"
        return None
    except BackendError as exc:
        log.warning("%s: no %s (%s); %s", question.id, kind, exc, unavailable)
        return None
    first = group[0]
    _count(first, res)
    reply = " ".join(f"{t!r}:{lp:.3f}" for t, lp in res.top_logprobs[:5])
    first.log.append(
        {"attempt": first.attempts, "kind": kind, "k": len(first.items), "prompt": prompt_text(req), "reply": reply}
        | call_cost(res)
    )
    return res


def _decide_true_false(chat: ChatModel, question: Question, gen: GenerationPart, runs: Sequence[_Run]) -> None:
    """Replace each answered run's 1/0 by the probability verdict on the context it read
    (one call per distinct context, counted on the first run that read it)."""
    for group in _answered_groups(runs, lambda run: tuple(i.node_id for i in run.items)):
        req = verdict_request(question, group[0].items, gen)
        unavailable = 'the reply\'s own stands. A server without logprobs needs true_false_verdict = "reply"'
        res = _one_word(chat, question, group, req, "verdict", unavailable)
        if res is None:
            continue
        logodds = verdict_logodds(res.top_logprobs)
        for run in group:
            assert run.answer is not None
            run.verdict_logodds = logodds
            run.answer = apply_verdict(run.answer, logodds, gen.true_false_margin)


def _context_and_value(run: _Run) -> Hashable:
    return tuple(i.node_id for i in run.items), run.answer.answer_value if run.answer is not None else ""


def _query_tables(chat: ChatModel, question: Question, runs: Sequence[_Run]) -> None:
    """A value computed by a query over a context table (table_query.py) replaces each run's
    own, once per distinct context (counted and logged on the first run that read it). The
    table is the first of the context kept as a record, preferring one the answer cites."""
    groups: dict[tuple[str, ...], list[_Run]] = {}
    for run in runs:
        if not run.error and run.answer is not None:
            groups.setdefault(tuple(i.node_id for i in run.items), []).append(run)
    for group in groups.values():
        first = group[0]
        assert first.answer is not None
        frames = [f for f in (table_frame(i) for i in first.items) if f is not None]
        if not frames:
            continue
        cited = [f for f in frames if f.item.doc_id in first.answer.ref_id]
        frame = (cited or frames)[0]
        req = query_request(question, frame)
        try:
            res = chat.complete(req)
        except BackendError as exc:
            log.warning("%s: no table query (%s); the reply's answer stands", question.id, exc)
            continue
        _count(first, res)
        value = value_of(run_query(res.text, frame))
        first.log.append(
            {
                "attempt": first.attempts,
                "kind": "table query",
                "k": len(first.items),
                "prompt": prompt_text(req),
                "reply": f"{res.text}\n-> {value}",
            }  # fmt: skip
            | call_cost(res)
        )
        if value is None:
            continue
        for run in group:
            assert run.answer is not None
            run.answer = with_query_value(run.answer, value, frame)


def _check_support(chat: ChatModel, question: Question, gen: GenerationPart, runs: Sequence[_Run]) -> None:
    """Blank each answered run whose answer the context does not state, by the model's
    probabilities (support_check.py; one call per distinct context and answer, counted on
    the first run that gave it). A true/false statement has its own verdict."""
    for group in _answered_groups(runs, _context_and_value):
        first = group[0]
        assert first.answer is not None
        req = support_request(question, first.items, first.answer, gen)
        unavailable = 'the answer stands. A server without logprobs needs abstain = "off"'
        res = _one_word(chat, question, group, req, "support", unavailable)
        if res is None:
            continue
        logodds = support_logodds(res.top_logprobs)
        for run in group:
            assert run.answer is not None
            run.support_logodds = logodds
            run.answer = apply_support(run.answer, logodds, gen.abstain_margin, question.answer_unit)


def answer_runs(
    question: Question,
    queries: Sequence[str],
    searcher: Searcher,
    chat: ChatModel,
    cfg: QAConfig,
    seeds: Sequence[int],
    first_context: Sequence[ContextItem] | None = None,
    images: ImageLoader | None = None,
) -> list[Prediction]:
    """One Prediction per seed (run i has seed seeds[i]). `first_context` is the level-1
    context when it was retrieved (and stored) before; deeper levels are searched here
    (`searcher` is the config's: `answering_searcher`). Each level asks as its `Stage` says."""
    search_cfg = search_config(question, cfg.retrieval)
    runs = [_Run(seed) for seed in seeds]
    level_items: dict[int, list[ContextItem]] = {
        1: list(first_context) if first_context is not None else searcher.search(queries, search_cfg)
    }
    pending = runs
    asked: tuple[list[str], Stage] | None = None  # the last attempt's snippets and stage
    for level in range(1, cfg.generation.max_retries + 2):
        if level not in level_items:
            try:
                level_items[level] = searcher.search(queries, deepen(search_cfg, level))
            except BackendError as exc:  # a search's LLM (diverse rerank) or reranker failed: a failure
                for run in pending:
                    run.error = f"{type(exc).__name__}: {exc}"
                break
        stage = stage_for(question, cfg.generation, level)
        items = level_items[level][: stage.k]
        # The same snippets asked the same way (k aside, which only cut them) as last time:
        # nothing more to find, a deeper retry would ask the same thing.
        prompt_key = ([i.node_id for i in items], dataclasses.replace(stage, k=None))
        if asked == prompt_key:
            break
        asked = prompt_key
        _ask(chat, question, items, cfg.generation, pending, images, stage, retry=level > 1)
        pending = [r for r in pending if counts_as_blank(r.answer) and not r.error]
        if not pending:
            break
    if cfg.generation.table_query == "sql" and not is_true_false(question) and asks_over_table(question):
        _query_tables(chat, question, runs)
    if is_true_false(question):  # a statement's verdict, never a support check of "1"/"0"
        if cfg.generation.true_false_verdict == "probability":
            _decide_true_false(chat, question, cfg.generation, runs)
    elif cfg.generation.abstain == "unsupported":
        _check_support(chat, question, cfg.generation, runs)
    out = []
    for index, run in enumerate(runs):
        assert run.answer is not None
        out.append(
            Prediction(
                question_id=question.id,
                run=index,
                seed=run.seed,
                answer=run.answer,
                attempts=run.attempts,
                k_used=len(run.items),
                context_chars=sum(len(i.text) for i in run.items),
                prompt_tokens=run.prompt_tokens,
                prompt_tokens_evaluated=run.prompt_tokens_evaluated,
                completion_tokens=run.completion_tokens,
                seconds=run.seconds,
                llm_calls=run.llm_calls,
                cached_calls=run.cached_calls,
                error=run.error,
                verdict_logodds=run.verdict_logodds,
                support_logodds=run.support_logodds,
                working=run.working,
                context=run.items,
                debug=tuple(run.log),
            )
        )
    return out


def plan_for(question: Question, chat: ChatModel | None, cfg: QAConfig) -> tuple[str, ...]:
    """The question, the planner's queries (`chat` writes them) and the entity queries."""
    queries: tuple[str, ...] = (question.question,)
    if cfg.retrieval.use_planner:
        if chat is None:
            raise ValueError("the planner is on but no chat model was given")
        queries = plan_queries(
            question.question, chat, cfg.retrieval.planner_max_queries, cfg.retrieval.planner_split_entities
        ).queries
    if cfg.retrieval.entity_queries == "rules":  # one per entity compared, after the planner's
        queries = tuple(dict.fromkeys([*queries, *entity_queries(question.question)]))
    return queries


def answer_question(
    question: Question,
    retriever: Searcher,
    chat: ChatModel,
    cfg: QAConfig,
    seed: int = 0,
    images: ImageLoader | None = None,
    planner_chat: ChatModel | None = None,
    progress: Callable[[str], None] | None = None,
) -> Prediction:
    """Plan, retrieve and answer one question: the config's `runs` runs (seeds seed, seed+1,
    ...) voted, or one (`seconds` is the wall time of all of it). `planner_chat` writes the
    queries when the config names a planner_model.
    `progress` hears each stage as it starts: "planning" (only when the planner runs),
    "retrieving", "answering"."""
    say = progress or (lambda _stage: None)
    started = time.perf_counter()
    if cfg.retrieval.use_planner:
        say("planning")
    queries = plan_for(question, planner_chat or chat, cfg)
    searcher = answering_searcher(retriever, cfg.retrieval, planner_chat or chat)
    if progress is not None:
        searcher = _ReportingSearcher(searcher, progress)
    seeds = [seed + r for r in range(cfg.voting.runs)]  # run r of an evaluation has seed r
    predictions = answer_runs(question, queries, searcher, chat, cfg, seeds, images=images)
    prediction = voted(predictions, cfg) if len(predictions) > 1 else predictions[0]
    return dataclasses.replace(prediction, seconds=time.perf_counter() - started)


def voted(predictions: Sequence[Prediction], cfg: QAConfig) -> Prediction:
    """The runs' vote, on the record of the first run that gave the voted value (its context
    and citations support it); every run's cost is added up."""
    failed = [p for p in predictions if p.error]
    if failed:
        return failed[0]
    v = cfg.voting
    answer = vote([p.answer for p in predictions], v.mode, v.ignore_blank, v.tiebreak)
    source = next((p for p in predictions if p.answer.answer_value == answer.answer_value), predictions[0])
    return dataclasses.replace(
        source,
        answer=answer,
        attempts=sum(p.attempts for p in predictions),
        prompt_tokens=sum(p.prompt_tokens for p in predictions),
        completion_tokens=sum(p.completion_tokens for p in predictions),
        llm_calls=sum(p.llm_calls for p in predictions),
        cached_calls=sum(p.cached_calls for p in predictions),
    )


@dataclass(frozen=True)
class _ReportingSearcher:
    """A searcher that says "retrieving" before each search and "answering" after it (each
    search of an answer run, a deeper retry's included, is followed by an answer call)."""

    inner: Searcher
    progress: Callable[[str], None]

    def search(self, queries: Sequence[str], cfg: RetrievalConfig) -> list[ContextItem]:
        self.progress("retrieving")
        items = self.inner.search(queries, cfg)
        self.progress("answering")
        return items
