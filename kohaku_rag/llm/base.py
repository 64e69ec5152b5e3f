"""The chat interface every LLM backend implements, and its request/result records."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np

from kohaku_rag.errors import BackendError

Role = Literal["system", "user", "assistant"]
_ROLES = ("system", "user", "assistant")


class ContextOverflowError(BackendError):
    """The prompt (plus the reply budget) does not fit the model's context window.

    Never retried by a backend: the caller shrinks its context (fewer retrieved passages)
    and asks again. `prompt_tokens`/`limit` are filled in when the backend knows them.
    """

    def __init__(self, message: str, *, prompt_tokens: int | None = None, limit: int | None = None):
        self.prompt_tokens = prompt_tokens
        self.limit = limit
        super().__init__(message)


class UnusableReply(BackendError):
    """The model replied, but the reply cannot be used (its JSON cut off at max_tokens, or not
    JSON at all). Asking the same again gives the same reply, so a caller treats it like an
    unparseable reply (an abstention), not like a failed call."""


@dataclass(frozen=True)
class Message:
    role: Role
    content: str
    # Images sent with the text, as data URLs ("data:image/png;base64,..."), for vision models.
    images: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "images", tuple(self.images))
        if any(not (isinstance(i, str) and i.startswith("data:image/")) for i in self.images):
            raise ValueError("message images must be data URLs (data:image/...;base64,...)")
        if self.role not in _ROLES:
            raise ValueError(f"message role {self.role!r} is not one of {', '.join(_ROLES)}")
        if not isinstance(self.content, str):
            raise TypeError(f"message content must be a str, got {type(self.content).__name__}")


def canonical_json(value: Any) -> str:
    """One spelling per value, so equal values hash (and cache) equally."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def schema_json(schema: Mapping[str, Any]) -> str:
    """A JSON schema as compact text with its key order kept: a grammar-constrained decoder
    writes an object's properties in schema order, so the order decides, for instance,
    whether the model quotes its evidence before or after it commits to an answer."""
    return json.dumps(schema, separators=(",", ":"), ensure_ascii=False)


MAX_TOP_LOGPROBS = 20  # OpenAI's limit


def one_word_request(system: str, user: str, reuse_prefix: bool = False) -> ChatRequest:
    """A request for one reply token, read as its alternatives' probabilities (no sampling):
    what `word_logodds` scores."""
    return ChatRequest(
        (Message("system", system), Message("user", user)),
        temperature=0.0,
        max_tokens=1,
        top_logprobs=MAX_TOP_LOGPROBS,
        reuse_prefix=reuse_prefix,
    )


def word_logodds(top_logprobs: Sequence[tuple[str, float]], word: str, other: str) -> float | None:
    """log P(word) - log P(other) over a first token's alternatives ("True", " true", ...
    pooled, case and spaces ignored). A word missing from the list is at most as likely as
    the least likely listed token; None when neither word is there."""
    pooled: dict[str, list[float]] = {word: [], other: []}
    for token, logprob in top_logprobs:
        key = token.strip().lower()
        if key in pooled:
            pooled[key].append(logprob)
    if not any(pooled.values()):
        return None
    floor = min(logprob for _, logprob in top_logprobs)
    first, second = (float(np.logaddexp.reduce(v)) if v else floor for v in pooled.values())
    return first - second


@dataclass(frozen=True)
class ChatRequest:
    """One chat completion to make.

    `json_schema` may be given as a dict (or its JSON text); it is kept as compact JSON
    text, property order intact (`schema_json`), so the request stays hashable and usable
    as a cache key. Read it back as a dict with `.schema`. `dataclasses.replace(req, seed=3)`
    works (ensemble runs).
    """

    messages: tuple[Message, ...]
    temperature: float = 0.0
    max_tokens: int = 512
    seed: int = 0
    json_schema: str | Mapping[str, Any] | None = None
    # When > 0, the result carries this many most likely first tokens of the reply with
    # their log-probabilities (ChatResult.top_logprobs): a verdict read as probabilities.
    top_logprobs: int = 0
    # When True, the result carries the mean log-probability of the reply's tokens
    # (ChatResult.mean_logprob): a confidence per reply, for the highest_confidence tiebreak.
    reply_logprobs: bool = False
    # When True, an in-process backend may keep the part of the prompt it shares with the
    # previous one in its KV cache and evaluate only the rest (many passages scored against
    # one question). The logits then differ from a fresh evaluation in their last bits, so
    # only scoring calls ask for it; sampled replies stay reproducible whatever ran before.
    reuse_prefix: bool = False

    def __post_init__(self) -> None:
        messages = tuple(self.messages)
        if not messages:
            raise ValueError("a chat request needs at least one message")
        for m in messages:
            if not isinstance(m, Message):
                raise TypeError(f"messages must be Message records, got {type(m).__name__}")
        object.__setattr__(self, "messages", messages)
        if not 0.0 <= float(self.temperature) <= 2.0:
            raise ValueError(f"temperature {self.temperature} is outside [0, 2]")
        if int(self.max_tokens) < 1:
            raise ValueError(f"max_tokens must be at least 1, got {self.max_tokens}")
        object.__setattr__(self, "temperature", float(self.temperature))
        object.__setattr__(self, "max_tokens", int(self.max_tokens))
        object.__setattr__(self, "seed", int(self.seed))
        if not 0 <= int(self.top_logprobs) <= MAX_TOP_LOGPROBS:
            raise ValueError(f"top_logprobs must be in [0, {MAX_TOP_LOGPROBS}], got {self.top_logprobs}")
        object.__setattr__(self, "top_logprobs", int(self.top_logprobs))
        schema = self.json_schema
        if schema is not None:
            if isinstance(schema, str):
                try:
                    schema = json.loads(schema)
                except json.JSONDecodeError as exc:
                    raise ValueError(f"json_schema is not valid JSON: {exc}") from None
            if not isinstance(schema, Mapping):
                raise TypeError(f"json_schema must be a JSON object, got {type(schema).__name__}")
            object.__setattr__(self, "json_schema", schema_json(schema))

    @property
    def schema_text(self) -> str | None:
        """The JSON schema as canonical text (__post_init__ stores a mapping as text)."""
        return None if self.json_schema is None else str(self.json_schema)

    @property
    def schema(self) -> dict[str, Any] | None:
        """The JSON schema as a fresh dict (None when free text was asked for)."""
        return None if self.schema_text is None else json.loads(self.schema_text)


@dataclass(frozen=True)
class ChatResult:
    """A reply. `text` is the JSON text itself when a schema was requested.

    `seconds` is the time the backend spent on the successful call (not queueing or
    back-off); `cached` is True when it came from the response cache.
    """

    text: str
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    cached: bool = False
    # (token text, log-probability) of the reply's first token, most likely first, when
    # the request asked for top_logprobs.
    top_logprobs: tuple[tuple[str, float], ...] = ()
    # The mean log-probability of the reply's tokens when the request asked for it.
    mean_logprob: float | None = None
    # Of `prompt_tokens`, how many the model evaluated (the rest came from a saved or kept KV
    # state); 0 for a cached reply; None when the backend does not say.
    prompt_tokens_evaluated: int | None = None


def one_reply(results: Sequence[ChatResult | Exception]) -> ChatResult:
    """The single reply of a one-request `complete_many`, or its exception raised: how a
    backend that batches implements `complete`."""
    (result,) = results
    if isinstance(result, Exception):
        raise result
    return result


@runtime_checkable
class ChatModel(Protocol):
    """A chat LLM. `model_id` names the model and every setting that changes its replies,
    because the response cache is keyed by it."""

    model_id: str
    context_window: int

    def complete(self, req: ChatRequest) -> ChatResult:
        """One reply, or raise ContextOverflowError / BackendError."""
        ...

    def complete_many(self, reqs: Sequence[ChatRequest]) -> list[ChatResult | Exception]:
        """One entry per request, in order: its reply or the exception that ended it."""
        ...


def loads_json(text: str) -> Any:
    """json.loads that admits raw control characters (a tab or newline) inside strings:
    llama.cpp's JSON grammar lets a model write them, and they lose nothing."""
    return json.loads(text, strict=False)


def extract_json(text: str) -> str | None:
    """The JSON object in a reply, tolerating code fences and chatter around it.

    Plain prompting (servers without structured output) often yields ```json fences or a
    sentence before the object; grammar-constrained backends yield the object alone.
    Returns None when no parseable JSON object is present.
    """
    stripped = text.strip()
    try:
        loads_json(stripped)
        return stripped
    except json.JSONDecodeError:
        pass
    decoder = json.JSONDecoder(strict=False)
    start = stripped.find("{")
    while start != -1:
        try:
            _, end = decoder.raw_decode(stripped, start)
            return stripped[start:end]
        except json.JSONDecodeError:
            start = stripped.find("{", start + 1)
    return None
