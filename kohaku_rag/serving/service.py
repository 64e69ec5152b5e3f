"""Answering for the server: which configs exist, the queue in front of each LLM, and the
answers given before (this process's, or any process's through the served store). The
answer's JSON is written by answer_json.py.

The lake is read through the public Python API (`kohaku_rag.open`, `Rag.ask`). A
re-assembled index is picked up without a restart: the lake is reopened when its index
settings change, and the model pool reopens the retriever when the index files change."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio.to_thread
import pyarrow.parquet as pq

import kohaku_rag as kr
from kohaku_rag.answering.config_folder import config_files, configs_dir
from kohaku_rag.answering.followup import Turn, rewrite_followup
from kohaku_rag.answering.qa_config import QAConfig
from kohaku_rag.answering.qa_config_file import load_qa_config
from kohaku_rag.answering.qa_tables import index_fingerprint, leaderboard_path
from kohaku_rag.errors import BackendError, IndexUnavailable, KohakuError
from kohaku_rag.lake.layout import Lake
from kohaku_rag.lake.tables import check_key
from kohaku_rag.llm.reply_stream import streaming_reply
from kohaku_rag.model_pool import ModelPool
from kohaku_rag.retrieval.published import published_problem
from kohaku_rag.serving.answer_json import AnswerJson
from kohaku_rag.serving.documents import Documents
from kohaku_rag.serving.errors import ApiError
from kohaku_rag.serving.gate import Gate
from kohaku_rag.serving.index_watch import IndexWatch
from kohaku_rag.serving.served_answers import AnswerKey, append_served, response_by_id, response_by_key, typical_seconds
from kohaku_rag.serving.settings import ServeSettings

DEFAULT_CONFIG = "default"
Progress = Callable[[dict[str, Any]], None]


@dataclass(frozen=True)
class Answered:
    key: tuple[str, str, str, str, str]  # question, unit, config, its hash, the index version
    response: dict[str, Any]


@dataclass(frozen=True)
class NamedConfig:
    name: str
    config: QAConfig


class AnswerService:
    def __init__(self, settings: ServeSettings, models: ModelPool | None = None) -> None:
        self.settings = settings
        self.lake = Lake(settings.lake.resolve())
        self.models = models or ModelPool()
        self.documents = Documents(self.lake)
        self.answer_json = AnswerJson(self.documents)
        self._rag: tuple[int | None, kr.Rag] | None = None
        self._gates: dict[tuple[str, str, str | None], Gate] = {}
        # answers this process computed (delivered or not) and delivered ones by id; what
        # other processes on the lake served is looked up in the served store on a miss
        self._answered: dict[AnswerKey, dict[str, Any]] = {}
        self._by_id: dict[str, dict[str, Any]] = {}
        self._index_version: tuple[tuple[object, ...] | None, str] | None = None
        self._configs: dict[str, tuple[int | None, NamedConfig]] = {}
        self._manifest_check: tuple[tuple[object, ...] | None, str | None] | None = None
        self.watch = IndexWatch(self.lake, settings.verify_every)
        self._lock = threading.Lock()

    # ---------------------------------------------------------------- the lake

    def index_problem(self) -> str | None:
        """What search would meet (None: it can search): the published generation checked
        as search opens it (read again only when the index files change), or what the last
        read of its checksums found (index_watch.py)."""
        stamp = self.lake.index_stamp()
        with self._lock:
            held = self._manifest_check
        if held is None or held[0] != stamp:
            try:
                problem = published_problem(self.lake)
            except OSError as exc:
                why = exc.strerror or type(exc).__name__
                problem = f"index/manifest.json can't be read ({why}); `kohaku doctor` says more"
            if problem is not None and stamp is None:
                problem = "no index in the lake yet: run `kohaku index` on it first"
            held = (stamp, self.lake_relative(problem) if problem is not None else None)
            with self._lock:
                self._manifest_check = held
        return held[1] or self.watch.problem()

    def rag(self) -> kr.Rag:
        """The opened lake, reopened when its recorded index settings change (503 with the
        reason when its index can't be searched)."""
        problem = self.index_problem()
        if problem is not None:
            code = "no_index" if self.lake.index_stamp() is None else "index_unavailable"
            raise ApiError(503, problem, code=code)
        try:
            stamp = self.lake.index_config_path.stat().st_mtime_ns
        except OSError:
            stamp = None
        with self._lock:
            if self._rag is None or self._rag[0] != stamp:
                try:
                    self._rag = (stamp, kr.Rag(self.lake, kr.open(self.lake.root).index_config, self.models))
                except FileNotFoundError as exc:
                    raise ApiError(503, self.lake_relative(str(exc)), code="no_index") from exc
            return self._rag[1]

    def config_names(self) -> list[str]:
        names = sorted(config_files(configs_dir(self.lake)))
        return names if DEFAULT_CONFIG in names else [DEFAULT_CONFIG, *names]

    def default_config(self) -> str:
        return self.settings.config or DEFAULT_CONFIG

    def named_config(self, name: str | None) -> NamedConfig:
        """A config of the configs folder by name; `default` without a file is the defaults."""
        name = name or self.default_config()
        try:
            check_key(name)
        except ValueError as exc:
            raise ApiError(400, f"config: {exc}") from exc
        path = config_files(configs_dir(self.lake)).get(name)
        if path is None:
            if name == DEFAULT_CONFIG:
                return NamedConfig(name, QAConfig())
            raise ApiError(404, f"no config {name!r}; GET /api/configs lists them")
        stamp = _mtime(path)
        with self._lock:
            held = self._configs.get(name)
        if held is not None and held[0] == stamp:
            return held[1]
        try:
            named = NamedConfig(name, load_qa_config(path))
        except (ValueError, OSError) as exc:
            raise ApiError(400, f"config {name!r} is unavailable: {self.lake_relative(str(exc))}") from exc
        with self._lock:  # kept until the file changes (loading checks every key: ~0.1 s)
            self._configs[name] = (stamp, named)
        return named

    def lake_relative(self, message: str) -> str:
        """A message with the server's own paths shown relative to the lake (or the configs
        folder): a client learns which file is wrong, not where the server keeps it."""
        for root, shown in ((configs_dir(self.lake), "configs"), (self.lake.root, ".")):
            message = message.replace(f"{root}/", f"{shown}/" if shown != "." else "").replace(str(root), shown)
        return message

    def config_problem(self, name: str) -> str | None:
        """Why a config of the folder cannot answer (a broken file), or None when it can."""
        try:
            self.named_config(name)
        except ApiError as exc:
            return exc.message
        return None

    def configs(self) -> list[dict[str, Any]]:
        """Every config with its leaderboard scores (None where it was never scored) and,
        for a broken file, `available: false` and the reason."""
        scores: dict[str, dict[str, Any]] = {}
        board = leaderboard_path(self.lake)
        if board.exists():
            for row in pq.read_table(board).to_pylist():
                if "final" in row:
                    scores[row["config"]] = row
        out = []
        for name in self.config_names():
            row = scores.get(name, {})
            problem = self.config_problem(name)
            typical = typical_seconds(self.lake, name)
            out.append(
                {
                    "name": name,
                    "default": name == self.default_config(),
                    "available": problem is None,
                    "error": problem,
                    **{k: row.get(k) for k in ("final", "value", "ref", "na")},
                    # the median seconds of its last answers here, and of how many (null: none yet)
                    "typical_seconds": round(typical[0], 1) if typical else None,
                    "typical_of": typical[1] if typical else 0,
                }
            )
        return out

    # ---------------------------------------------------------------- answering

    def gate(self, cfg: QAConfig) -> Gate:
        """One queue per LLM backend: the bundled model takes one prompt at a time."""
        llm = cfg.generation.llm
        key = (llm.backend, llm.model, llm.base_url)
        with self._lock:
            if key not in self._gates:
                concurrency = 1 if llm.backend == "llama" else llm.max_concurrent
                self._gates[key] = Gate(concurrency, self.settings.queue_size)
            return self._gates[key]

    def check_question(self, question: object) -> str:
        if not isinstance(question, str) or not question.strip():
            raise ApiError(400, "question: give a non-empty string")
        if len(question) > self.settings.max_question_chars:
            raise ApiError(400, f"question: {len(question)} characters, at most {self.settings.max_question_chars}")
        return question.strip()

    async def answer(
        self,
        question: str,
        config: str | None,
        unit: str | None,
        progress: Progress,
        started: float,
        admitted: Callable[[], None] = lambda: None,
        answer_id: str = "",
        history: tuple[Turn, ...] = (),
        taken_over: bool = False,
    ) -> Answered:
        """The answer as JSON: from a stored answer at once when the same question was
        answered with the same config and index, else through the config's queue
        (`admitted` hears when it leaves the queue). A follow-up (`history`: the earlier
        turns) is first rewritten into a standalone question by the LLM, in the queue. An
        answer `taken_over` from a process that died waits in the queue even when it is full.
        `seconds` counts from `started` (the request's arrival), the wait in the queue
        included. Nothing is recorded as served here: `deliver` does that once a client got
        it. File and model work runs in worker threads: the event loop only routes events."""
        asked = self.check_question(question)
        unit = self.check_unit(unit)
        named, key, stored = await anyio.to_thread.run_sync(lambda: self._prepare(asked, unit, config))
        if stored is not None and not history:
            admitted()
            progress({"stage": "done", "stored": True})
            return Answered(key, self._again(stored, answer_id, asked))
        loop = asyncio.get_running_loop()

        def say(stage: str) -> None:  # from the answering thread
            loop.call_soon_threadsafe(progress, {"stage": stage})

        def write(text: str) -> None:  # the model's reply as it is generated (bundled model)
            loop.call_soon_threadsafe(progress, {"reply": text})

        def answer(queued: float) -> Answered:
            try:
                standalone, rewrite_failed = asked, ""
                if history:
                    say("planning")
                    chat = self.rag().models.chat(named.config.generation.llm, self.lake)
                    rewrite = rewrite_followup(asked, history, chat)
                    standalone, rewrite_failed = rewrite.question, rewrite.failure
                    told: dict[str, str] = {"standalone_question": standalone}
                    if rewrite_failed:  # answered as typed: the asker is told why
                        told["rewrite_failed"] = rewrite_failed
                    loop.call_soon_threadsafe(progress, told)
                    found = self._prepare(standalone, unit, config)
                    if found[2] is not None:
                        return Answered(found[1], self._again(found[2], answer_id, asked) | told)
                with streaming_reply(write):
                    result = self.rag().ask(standalone, config=named.config, unit=unit, progress=say)
            except BackendError as exc:
                raise ApiError(502, f"the LLM failed: {exc}") from exc
            except IndexUnavailable as exc:
                raise ApiError(503, self.lake_relative(str(exc)), code="index_unavailable") from exc
            except ApiError:
                raise  # already an HTTP answer (an unknown config, a refused question)
            except KohakuError as exc:
                raise ApiError(500, f"answering failed: {self.lake_relative(str(exc))}") from exc
            response = self.answer_json.response(result, named.name, time.perf_counter() - started)
            response.update(queued_seconds=round(queued, 3), answer_id=answer_id, asked=asked)
            response["standalone_question"] = standalone
            if rewrite_failed:  # the asker is told the follow-up was answered as typed
                response["rewrite_failed"] = rewrite_failed
            done_key = (standalone, *key[1:])
            with self._lock:  # kept for the next asker, delivered or not
                self._answered[done_key] = response
            return Answered(done_key, response)

        def on_queued(place: int) -> None:
            progress({"stage": "queued", "place": place})

        async with self.gate(named.config).slot(on_queued, refuse_when_full=not taken_over):
            admitted()
            queued = time.perf_counter() - started
            answered = await anyio.to_thread.run_sync(lambda: answer(queued))
        progress({"stage": "done", "stored": answered.response["stored"]})
        return answered

    @staticmethod
    def _again(stored: dict[str, Any], answer_id: str, asked: str) -> dict[str, Any]:
        """A stored answer served again, under the id of this request."""
        again = {**stored, "stored": True, "seconds": 0.0, "queued_seconds": 0.0, "answer_id": answer_id}
        again.pop("rewrite_failed", None)  # how the earlier asker's follow-up went, not this one's
        again["usage"] = {"prompt_tokens": 0, "completion_tokens": 0}  # no model call made for it
        again.update(asked=asked, standalone_question=stored["question"])
        return again

    def check_unit(self, unit: str | None) -> str:
        unit = (unit or "is_blank").strip() or "is_blank"
        if len(unit) > 100:
            raise ApiError(400, "unit: at most 100 characters")
        return unit

    def _prepare(
        self, question: str, unit: str, config: str | None
    ) -> tuple[NamedConfig, tuple[str, str, str, str, str], dict[str, Any] | None]:
        """The config, the stored-answer key (question, unit, config, its hash, the index
        version) and the stored answer under it, if any."""
        named = self.named_config(config)
        self.rag()  # 503 when there is no index
        key = (question, unit, named.name, named.config.generation_hash, self.index_version())
        return named, key, self.earlier_answer(key)

    def index_version(self) -> str:
        """What the index holds (every document's index-rows version), recomputed only when
        the assembled index files change on disk."""
        stamp = self.lake.index_stamp()
        with self._lock:
            if self._index_version is not None and self._index_version[0] == stamp:
                return self._index_version[1]
        try:
            version = index_fingerprint(self.lake)
        except FileNotFoundError as exc:
            raise ApiError(503, self.lake_relative(str(exc)), code="no_index") from exc
        with self._lock:
            self._index_version = (stamp, version)
        return version

    def earlier_answer(self, key: AnswerKey) -> dict[str, Any] | None:
        """The answer stored under the key: computed here, or served by any process."""
        with self._lock:
            held = self._answered.get(key)
        return held if held is not None else response_by_key(self.lake, key)

    def deliver(self, answered: Answered, via: str) -> None:
        """Record an answer a client received in the served_answers table (an answer nobody
        waited for stays a stored answer for the next asker, and is not counted)."""
        question, unit, config, config_hash, index_version = answered.key
        response = answered.response
        row = {
            "time": datetime.now(UTC),
            "question": question,
            "unit": unit,
            "config": config,
            "config_hash": config_hash,
            "index_version": index_version,
            "answer": response["answer"],
            "value": response["value"],
            "refs": response["refs"],
            "is_blank": response["is_blank"],
            "seconds": response["seconds"],
            "stored": response["stored"],
            "via": via,
            "response": json.dumps(response),
        }
        append_served(self.lake, row)
        if response.get("answer_id"):
            with self._lock:
                self._by_id[response["answer_id"]] = response

    def served_answer(self, answer_id: str) -> dict[str, Any] | None:
        """An answer delivered earlier (by this process or any other on the lake, in this
        life or before), by its id."""
        with self._lock:
            held = self._by_id.get(answer_id)
        return held if held is not None else response_by_id(self.lake, answer_id)


def _mtime(path: Path) -> int | None:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return None
