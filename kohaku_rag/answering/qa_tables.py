"""The answering pipeline's tables in the lake, each stored under the hash of what made it.

    qa/retrievals/<retrieval_key>.parquet          one row per question: planned queries, context
    qa/predictions/<prediction_key>/run-<r>.parquet one row per question for run r (seed r)
    qa/ensembles/<ensemble_key>.parquet            the voted answer per question
    qa/scores/<score_key>.parquet                  WattBot score rows (when gold answers exist);
                                                   score_key = ensemble_key under wattbot2025,
                                                   <ensemble_key>-<metric> under another metric
    qa/leaderboard.parquet                         one row per scored config
    qa/submissions/<config>.csv                    the ensemble as a WattBot submission

Keys chain: retrieval_key = (retrieval_hash, question file content, index contents);
prediction_key = (generation_hash, retrieval_key); ensemble_key = (voting_hash,
prediction_key). A table whose key is already on disk is reused, never recomputed, so a
generation-only edit reuses the contexts and a voting-only edit reuses the predictions.

A failed LLM call is a failure, not an answer: a prediction row whose `error` is set makes
its run incomplete, the next materialization asks only those questions again (the good
rows are kept), and nothing is voted or scored from a failed row. An ensemble records the
run files it was voted from, so repaired runs are voted again.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from kohaku_rag.answering.answer import answer_runs, plan_for
from kohaku_rag.answering.prediction import Prediction, prediction_from_row
from kohaku_rag.answering.prompt import ImageLoader
from kohaku_rag.answering.qa_config import DEFAULT_METRIC, QAConfig, check_metric
from kohaku_rag.answering.question_types import search_config
from kohaku_rag.answering.searcher import Searcher, answering_searcher
from kohaku_rag.answers.records import Answer, Question
from kohaku_rag.answers.vote import vote
from kohaku_rag.config_files import stable_hash
from kohaku_rag.errors import BackendError, KohakuError
from kohaku_rag.indexing.search_aids import search_aids_fingerprint
from kohaku_rag.indexing.steps import INDEX_ROWS, stored_version
from kohaku_rag.lake.layout import Lake
from kohaku_rag.lake.tables import is_stored, write_parquet_atomic
from kohaku_rag.llm import ChatModel
from kohaku_rag.progress import Ticker
from kohaku_rag.retrieval.context import ContextItem

Progress = Callable[[str], None]


class QuestionsFailed(KohakuError):
    """Some questions' LLM calls failed (after their retries); what succeeded is kept and the
    next materialization asks only the failed questions again."""

    def __init__(self, failed: dict[str, str], total: int) -> None:
        self.failed = failed
        self.total = total
        first = next(iter(failed.values()), "")
        super().__init__(f"{len(failed)} of {total} questions failed: {first}; re-run to retry them")


def file_sha(path: Path) -> str:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]
    except OSError as exc:
        raise ValueError(f"question file {path}: {exc.strerror or exc}") from exc


def index_fingerprint(lake: Lake) -> str:
    """What the index holds: every document's index-rows version (content hash, index
    settings, code version). Re-assembling an unchanged corpus keeps stored retrievals."""
    if not lake.bm25_path.exists():
        raise FileNotFoundError(f"no index in {lake.root}: run `kohaku index --lake {lake.root}` first")
    return stable_hash([(doc_id, stored_version(lake, INDEX_ROWS, doc_id)) for doc_id in corpus_ids(lake)])


def corpus_ids(lake: Lake) -> list[str]:
    """The indexed document ids (what a typo'd reference id is resolved against when scoring)."""
    return lake.partitions(INDEX_ROWS)


@dataclass(frozen=True)
class QAKeys:
    questions: str
    retrieval: str
    prediction: str
    ensemble: str


def keys_for(lake: Lake, cfg: QAConfig) -> QAKeys:
    questions = file_sha(Path(cfg.questions))
    index = index_fingerprint(lake)
    if cfg.retrieval.search.uses_search_aids:  # the dictionary/metadata follow corpus files too
        index = stable_hash([index, search_aids_fingerprint(lake)])
    retrieval = stable_hash([cfg.retrieval_hash, questions, index])
    prediction = stable_hash([cfg.generation_hash, retrieval])
    return QAKeys(questions, retrieval, prediction, stable_hash([cfg.voting_hash, prediction]))


def qa_dir(lake: Lake) -> Path:
    return lake.root / "qa"


def retrieval_path(lake: Lake, key: str) -> Path:
    return qa_dir(lake) / "retrievals" / f"{key}.parquet"


def run_path(lake: Lake, key: str, run: int) -> Path:
    return qa_dir(lake) / "predictions" / key / f"run-{run}.parquet"


def ensemble_path(lake: Lake, key: str) -> Path:
    return qa_dir(lake) / "ensembles" / f"{key}.parquet"


def debug_path(lake: Lake, key: str, run: int) -> Path:
    """Every LLM call of run `run` (prompt and raw reply) under its prediction key."""
    return qa_dir(lake) / "debug" / key / f"run-{run}.parquet"


def debug_rows(preds: Sequence[Prediction]) -> list[dict[str, Any]]:
    return [{"id": p.question_id, "run": p.run, **call} for p in preds for call in p.debug]


def read_debug(lake: Lake, key: str, run: int) -> list[dict[str, Any]]:
    path = debug_path(lake, key, run)
    return pq.read_table(path).to_pylist() if is_stored(path) else []


def score_path(lake: Lake, key: str) -> Path:
    return qa_dir(lake) / "scores" / f"{key}.parquet"


def score_key(ensemble_key: str, metric: str = DEFAULT_METRIC) -> str:
    """Where an ensemble's scores under `metric` are stored: the ensemble key itself for the
    2025 metric (the tables stored before the choice existed), `<key>-<metric>` otherwise."""
    return ensemble_key if check_metric(metric) == DEFAULT_METRIC else f"{ensemble_key}-{metric}"


def submission_path(lake: Lake, name: str) -> Path:
    return qa_dir(lake) / "submissions" / f"{name}.csv"


def leaderboard_path(lake: Lake) -> Path:
    return qa_dir(lake) / "leaderboard.parquet"


# ── retrievals ────────────────────────────────────────────────────────────


@dataclass(frozen=True)
class Retrieved:
    queries: tuple[str, ...]
    context: tuple[ContextItem, ...]


def question_workers(chat: ChatModel | None, runs: int = 1) -> int:
    """Questions asked at once: a backend that serves `max_concurrent` requests (an HTTP
    server) gets that many requests in flight across questions; the in-process model,
    which answers one prompt at a time, gets one question at a time."""
    limit = int(getattr(chat, "max_concurrent", 1) or 1)
    return max(1, limit // max(1, runs))


def _map_questions(fn: Callable[[Question], Any], questions: Sequence[Question], workers: int) -> Iterator[Any]:
    """fn over the questions, `workers` at a time, results in question order."""
    if workers <= 1 or len(questions) <= 1:
        yield from map(fn, questions)
        return
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="kohaku-question") as pool:
        yield from pool.map(fn, questions)


def compute_retrievals(
    questions: Sequence[Question],
    cfg: QAConfig,
    retriever: Searcher,
    chat: ChatModel | None,
    progress: Progress = lambda _m: None,
) -> list[dict[str, Any]]:
    if cfg.retrieval.uses_llm and chat is None:
        raise ValueError("the planner or the diverse rerank is on but no chat model was given")
    searcher = answering_searcher(retriever, cfg.retrieval, chat, shared=True)

    def one(q: Question) -> tuple[dict[str, Any], int]:
        started = time.perf_counter()
        try:
            queries = plan_for(q, chat, cfg)
            items = searcher.search(queries, search_config(q, cfg.retrieval))
        # The planner's, a hosted reranker's or the diverse rerank's call failed (the endpoint
        # is down, or refused the request: a 401): a failure, retrieved again by the next run.
        except BackendError as exc:
            error = f"{type(exc).__name__}: {exc}"
            return {"id": q.id, "queries": [], "context": "[]", "seconds": 0.0, "error": error}, 0
        return {
            "id": q.id,
            "queries": list(queries),
            "context": json.dumps([i.as_dict() for i in items]),
            "seconds": round(time.perf_counter() - started, 4),
            "error": "",
        }, len(items)

    rows = []
    workers = question_workers(chat) if cfg.retrieval.uses_llm else 1
    ticker = Ticker("retrieved", len(questions), progress)
    for row, snippets in _map_questions(one, questions, workers):
        rows.append(row)
        shown = f"FAILED: {row['error']}" if row["error"] else f"{snippets} snippets"
        ticker.tick(f"{row['id']}: {shown}")
    return rows


def retrieval_errors(path: Path) -> dict[str, str]:
    """question id -> why its retrieval failed (a planner outage), for a stored table."""
    if "error" not in pq.read_schema(path).names:  # written before failures were stored
        return {}
    table = pq.read_table(path, columns=["id", "error"]).to_pylist()
    return {row["id"]: row["error"] for row in table if row["error"]}


def merge_rows(path: Path, fresh: Sequence[dict[str, Any]], order: Sequence[str]) -> list[dict[str, Any]]:
    """A stored table's rows with `fresh` rows in place of the ones they redo, in `order`."""
    by_id = {row["id"]: row for row in pq.read_table(path).to_pylist()} if is_stored(path) else {}
    by_id.update((row["id"], row) for row in fresh)
    return [by_id[q] for q in order if q in by_id]


def write_rows(rows: list[dict[str, Any]], path: Path, metadata: dict[str, str] | None = None) -> None:
    write_parquet_atomic(pa.Table.from_pylist(rows), path, metadata)


def read_retrievals(path: Path) -> dict[str, Retrieved]:
    """The questions' stored retrievals; a failed one (see `retrieval_errors`) is left out."""
    out = {}
    for row in pq.read_table(path).to_pylist():
        if row.get("error"):
            continue
        items = tuple(ContextItem(**item) for item in json.loads(row["context"]))
        out[row["id"]] = Retrieved(tuple(row["queries"]), items)
    return out


# ── predictions ───────────────────────────────────────────────────────────


def missing_runs(lake: Lake, key: str, runs: int) -> list[int]:
    """The runs not stored, or stored with failed rows (both must be (re)computed)."""
    return [r for r in range(runs) if not is_stored(run_path(lake, key, r)) or failed_ids(read_run(lake, key, r))]


def failed_ids(run: Sequence[Prediction]) -> list[str]:
    return [p.question_id for p in run if p.error]


def pending_questions(lake: Lake, key: str, runs: int, question_ids: Sequence[str]) -> dict[int, list[str]]:
    """run -> the questions it still needs: every question of a run not stored, the failed
    (or absent) ones of a stored run; runs with nothing to do are left out."""
    out: dict[int, list[str]] = {}
    for r in range(runs):
        if not is_stored(run_path(lake, key, r)):
            out[r] = list(question_ids)
            continue
        good = {p.question_id for p in read_run(lake, key, r) if not p.error}
        todo = [q for q in question_ids if q not in good]
        if todo:
            out[r] = todo
    return out


def merge_run(
    lake: Lake, key: str, run: int, fresh: Sequence[Prediction], order: Sequence[str]
) -> list[dict[str, Any]]:
    """Run `run`'s rows in question order: the stored rows kept as written, the fresh
    predictions in place of the ones they redo."""
    return merge_rows(run_path(lake, key, run), [p.as_row() for p in fresh], order)


def failed_prediction(question: Question, run: int, error: str) -> Prediction:
    """A run of a question that could not be asked (its retrieval failed)."""
    return Prediction(
        question_id=question.id,
        run=run,
        seed=run,
        answer=Answer.blank(question.answer_unit),
        attempts=0,
        k_used=0,
        context_chars=0,
        prompt_tokens=0,
        completion_tokens=0,
        seconds=0.0,
        llm_calls=0,
        cached_calls=0,
        error=error,
    )


def compute_runs(
    questions: Sequence[Question],
    retrieved: dict[str, Retrieved],
    cfg: QAConfig,
    retriever: Searcher,
    chat: ChatModel,
    runs: Sequence[int] | Mapping[int, Collection[str]],
    progress: Progress = lambda _m: None,
    images: ImageLoader | None = None,
) -> dict[int, list[Prediction]]:
    """Every requested run of every question; a question's runs are asked together (run r
    has seed r) so they share the prompt's KV cache. An HTTP backend answers several
    questions at once (`question_workers`). `runs` maps a run to the question ids it needs
    (`pending_questions`), or lists runs that need every question. A prediction whose LLM
    call failed is returned with its `error` set."""
    wanted: dict[int, set[str]] = (
        {r: set(ids) for r, ids in runs.items()}
        if isinstance(runs, Mapping)
        else {r: {q.id for q in questions} for r in runs}
    )
    asked = [q for q in questions if any(q.id in ids for ids in wanted.values())]
    searcher = answering_searcher(retriever, cfg.retrieval, chat, shared=True)

    def one(q: Question) -> tuple[list[int], list[Prediction]]:
        got = retrieved[q.id]
        seeds = [r for r, ids in wanted.items() if q.id in ids]
        return seeds, answer_runs(q, got.queries, searcher, chat, cfg, seeds, got.context, images)

    out: dict[int, list[Prediction]] = {r: [] for r in wanted}
    workers = question_workers(chat, max(1, len(wanted)))
    ticker = Ticker("answered", len(asked), progress)
    for q, (seeds, preds) in zip(asked, _map_questions(one, asked, workers)):
        for r, pred in zip(seeds, preds, strict=True):
            out[r].append(replace(pred, run=r))
        failed = [p.error for p in preds if p.error]
        shown = f"FAILED: {failed[0]}" if failed else [p.answer.answer_value for p in preds]
        ticker.tick(f"{q.id}: {shown}")
    return out


def read_run(lake: Lake, key: str, run: int) -> list[Prediction]:
    return [prediction_from_row(row) for row in pq.read_table(run_path(lake, key, run)).to_pylist()]


def runs_fingerprint(lake: Lake, key: str, runs: int) -> str:
    """What the stored run files hold: an ensemble voted from other contents (runs since
    repaired) is stale. Recorded in the ensemble table as `runs_fingerprint`."""
    digest = hashlib.sha256()
    for r in range(runs):
        path = run_path(lake, key, r)
        digest.update(hashlib.sha256(path.read_bytes()).digest() if path.exists() else b"-")
    return digest.hexdigest()[:16]


# ── ensembles and scores ──────────────────────────────────────────────────


def ensemble(runs: Sequence[Sequence[Prediction]], cfg: QAConfig) -> dict[str, Answer]:
    v = cfg.voting
    return vote_pool([answers_of(run) for run in runs], v.mode, v.ignore_blank, v.tiebreak)


def answers_of(run: Sequence[Prediction]) -> dict[str, Answer]:
    return {p.question_id: p.answer for p in run}


def vote_pool(voters: Sequence[dict[str, Answer]], mode: str, ignore_blank: bool, tiebreak: str) -> dict[str, Answer]:
    """One vote per question over every voter (a run, or a config's ensemble) that answered
    it; voters vote in the order given, which is what the `first` tiebreak prefers."""
    by_question: dict[str, list[Answer]] = {}
    for voter in voters:
        for qid, answer in voter.items():
            by_question.setdefault(qid, []).append(answer)
    return {qid: vote(answers, mode, ignore_blank, tiebreak) for qid, answers in by_question.items()}


def answer_rows(answers: dict[str, Answer]) -> list[dict[str, Any]]:
    return [
        {
            "id": qid,
            "answer": a.answer,
            "answer_value": a.answer_value,
            "answer_unit": a.answer_unit,
            "ref_id": list(a.ref_id),
            "explanation": a.explanation,
            "is_blank": a.is_blank,
            "supporting_materials": a.supporting_materials,
            "confidence": a.confidence,
        }
        for qid, a in answers.items()
    ]


def read_answers(path: Path) -> dict[str, Answer]:
    return {
        row["id"]: Answer(
            row["answer"],
            row["answer_value"],
            row["answer_unit"],
            tuple(row["ref_id"] or ()),
            row["explanation"],
            bool(row["is_blank"]),
            row["supporting_materials"],
            confidence=row.get("confidence"),
        )
        for row in pq.read_table(path).to_pylist()
    }


def answer_pending(
    lake: Lake,
    keys: QAKeys,
    cfg: QAConfig,
    questions: Sequence[Question],
    pending: dict[int, list[str]],
    retriever: Searcher,
    chat: ChatModel,
    *,
    progress: Progress = lambda _m: None,
) -> dict[int, list[Prediction]]:
    """Answer the `pending` questions of each run (run -> question ids) and store them with
    the run's other rows, plus the prompts and raw replies of every attempt. A question whose
    retrieval failed cannot be asked: its runs fail with that reason. Returns the fresh
    predictions by run (their llm_calls / cached_calls say which asked the LLM)."""
    path = retrieval_path(lake, keys.retrieval)
    retrieved = read_retrievals(path)
    unretrieved = {q: f"retrieval failed: {e}" for q, e in retrieval_errors(path).items()}
    asked = {r: [q for q in ids if q not in unretrieved] for r, ids in pending.items()}
    computed = compute_runs(
        [q for q in questions if q.id not in unretrieved],
        retrieved,
        cfg,
        retriever,
        chat,
        asked,
        progress=progress,
        images=lambda h: lake.blob(h).read_bytes(),
    )
    by_id = {q.id: q for q in questions}
    order = [q.id for q in questions]
    for run, ids in pending.items():
        computed.setdefault(run, []).extend(
            failed_prediction(by_id[q], run, unretrieved[q]) for q in ids if q in unretrieved
        )
    for run, preds in computed.items():
        write_rows(
            merge_run(lake, keys.prediction, run, preds, order),
            run_path(lake, keys.prediction, run),
            {"generation_hash": cfg.generation_hash, "run": str(run)},
        )
        write_rows(debug_rows(preds), debug_path(lake, keys.prediction, run))
    return computed
