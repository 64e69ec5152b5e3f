"""A response cache around any ChatModel: same model and request, same reply, no call.

Keyed by a content hash of everything that shapes a reply (model id, messages, sampling
settings, seed, schema), never by time or path, so re-running a pipeline costs nothing
and changing any input recomputes. One SQLite file (via apsw) in WAL mode; each reply is
committed as it arrives, so an interrupted run keeps what it paid for and the next
process picks it up.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import apsw

from kohaku_rag.lake.sqlite_wal import use_wal
from kohaku_rag.llm.base import ChatModel, ChatRequest, ChatResult, canonical_json, one_reply

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    model_id TEXT NOT NULL,
    text TEXT NOT NULL,
    prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    seconds REAL NOT NULL,
    created REAL NOT NULL,
    top_logprobs TEXT NOT NULL DEFAULT '[]',
    mean_logprob REAL
)
"""

# Columns added after the first release, for cache files written before them.
_ADDED_COLUMNS = {
    "top_logprobs": "TEXT NOT NULL DEFAULT '[]'",
    "mean_logprob": "REAL",
}


def request_key(model_id: str, req: ChatRequest) -> str:
    """sha256 over the model and every request field that changes the reply."""
    parts = [
        model_id,
        # Images join a message's key only when present, so text-only keys never change.
        [[m.role, m.content, *([list(m.images)] if m.images else [])] for m in req.messages],
        req.temperature,
        req.max_tokens,
        req.seed,
        req.json_schema,
        # Joins the key only when asked for, so the keys of plain requests never change.
        *([req.top_logprobs] if req.top_logprobs else []),
        *(["reply_logprobs"] if req.reply_logprobs else []),
        *(["reuse_prefix"] if req.reuse_prefix else []),
    ]
    return hashlib.sha256(canonical_json(parts).encode("utf-8")).hexdigest()


class CachedChat:
    """A ChatModel that answers from `cache_dir/llm.sqlite` when it can.

    `hits`/`misses` count requests served from the cache / passed to the inner model.
    Failures are never cached: the next run asks again.
    """

    def __init__(self, inner: ChatModel, cache_dir: Path) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.context_window = inner.context_window
        # Requests the inner model serves at once (1 for the in-process model).
        self.max_concurrent = int(getattr(inner, "max_concurrent", 1) or 1)
        self.path = Path(cache_dir) / "llm.sqlite"
        self.hits = 0
        self.misses = 0
        # Question threads share this one connection, and apsw refuses a connection busy in
        # another thread: every use of `_db` holds the lock (the inner model's call does not).
        self._lock = threading.Lock()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = apsw.Connection(str(self.path))
        self._db.set_busy_timeout(30_000)  # another process may be writing
        use_wal(self._db.execute)
        self._migrate()

    def _migrate(self) -> None:
        """Create the table or add the columns an older file lacks, as one writer.

        Several processes (two `kohaku serve` on one lake) may open a new cache at the same
        moment: BEGIN IMMEDIATE takes the write lock before the columns are read, so only
        one of them adds a column and the others see it added.
        """
        self._db.execute("BEGIN IMMEDIATE")
        try:
            self._db.execute(_SCHEMA)
            columns = {row[1] for row in self._db.execute("PRAGMA table_info(responses)")}
            for name, declaration in _ADDED_COLUMNS.items():
                if name not in columns:
                    self._db.execute(f"ALTER TABLE responses ADD COLUMN {name} {declaration}")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def __repr__(self) -> str:
        return f"CachedChat({self.inner!r}, {str(self.path)!r})"

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def complete(self, req: ChatRequest) -> ChatResult:
        return one_reply(self.complete_many([req]))

    def complete_many(self, reqs: Sequence[ChatRequest]) -> list[ChatResult | Exception]:
        keys = [request_key(self.model_id, r) for r in reqs]
        results: list[ChatResult | Exception | None] = [self._get(k) for k in keys]
        # Identical requests in one batch (same seed too) are asked once.
        todo: dict[str, ChatRequest] = {}
        for key, req, res in zip(keys, reqs, results, strict=True):
            if res is None:
                todo.setdefault(key, req)
        with self._lock:
            self.hits += sum(r is not None for r in results)
            self.misses += len(results) - sum(r is not None for r in results)
        fresh: dict[str, ChatResult | Exception] = {}
        if todo:
            answers = self.inner.complete_many(list(todo.values()))
            for key, answer in zip(todo, answers, strict=True):
                if isinstance(answer, ChatResult):
                    self._put(key, answer)
                fresh[key] = answer
        return [res if res is not None else fresh[key] for key, res in zip(keys, results, strict=True)]

    def _get(self, key: str) -> ChatResult | None:
        with self._lock:
            row = self._db.execute(
                "SELECT text, prompt_tokens, completion_tokens, seconds, top_logprobs, mean_logprob FROM responses "
                "WHERE key = ?",
                (key,),
            ).fetchone()
        if row is None:
            return None
        text, prompt_tokens, completion_tokens, seconds, top, mean = row
        top_logprobs = tuple((str(token), float(logprob)) for token, logprob in json.loads(top))
        return ChatResult(
            text,
            prompt_tokens,
            completion_tokens,
            seconds,
            cached=True,
            prompt_tokens_evaluated=0,
            top_logprobs=top_logprobs,
            mean_logprob=None if mean is None else float(mean),
        )

    def _put(self, key: str, result: ChatResult) -> None:
        row = (
            key,
            self.model_id,
            result.text,
            result.prompt_tokens,
            result.completion_tokens,
            result.seconds,
            time.time(),
            json.dumps(list(result.top_logprobs)),
            result.mean_logprob,
        )
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO responses (key, model_id, text, prompt_tokens, completion_tokens, "
                "seconds, created, top_logprobs, mean_logprob) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                row,
            )
