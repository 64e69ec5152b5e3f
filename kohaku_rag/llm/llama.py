"""An in-process chat model via llama-cpp-python, with grammar-constrained JSON output.

Why requests are grouped by prompt: llama.cpp keeps the KV cache of the last evaluated
tokens and `Llama.generate` reuses the longest matching prefix. Ensemble runs share one
prompt and differ only by seed, so running them back to back evaluates the prompt once and
repeats only the generation (the second run's prompt eval is a single token).

Why the prompt is primed as "all but the last token, then the last token alone": logits
depend (in the last bits) on how the tokens were split into batches, and at temperature > 0
such a difference can flip a sampled token. Priming every prompt the same way, from an
empty cache, makes a (prompt, seed) reply the same whether it runs alone, first or fifth in
an ensemble, or after another prompt that shares a prefix. A prompt whose opening repeats
across calls (chat header, system prompt) is primed as "that prefix, then the rest", the
prefix's KV state restored when it was saved before (prefix_states.py): the same split
either way, so the same reply.
"""

from __future__ import annotations

import dataclasses
import json
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kohaku_rag.errors import BackendError
from kohaku_rag.llm.base import ChatRequest, ChatResult, ContextOverflowError, Message, UnusableReply, loads_json
from kohaku_rag.llm.cpu_backends import ensure_cpu_backend
from kohaku_rag.llm.prefix_states import MIN_PREFIX_TOKENS, PrefixStates
from kohaku_rag.llm.reply_stream import ReplySink, reply_sink

_INSTALL_HINT = "pip install llama-cpp-python==0.3.36"
# Replies decoded together at most (the voted runs of one answer), and the reply length
# the parallel context makes room for: longer replies are decoded one after another.
PARALLEL_SEQS = 8
PARALLEL_MAX_TOKENS = 512


@dataclass(frozen=True)
class LlamaTimings:
    """llama.cpp's own counters for one completion.

    `prompt_tokens_evaluated` is what was actually run through the model for the prompt:
    the whole prompt on a cold cache, about 1 token when the prompt was already cached.
    """

    prompt_tokens_evaluated: int
    prompt_ms: float
    generated_tokens: int
    generation_ms: float


def _cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


class LlamaCppChat:
    """`ChatModel` over a GGUF file, loaded lazily on first use.

    Not thread-safe inside llama.cpp, so calls are serialised by a lock. `seed` is the
    context's initial seed; each request's own `seed` drives its sampling.
    """

    def __init__(
        self,
        model_path: Path,
        n_ctx: int = 4096,
        n_threads: int | None = None,
        seed: int = 0,
        prefix_cache: bool = True,
        parallel_replies: bool = True,
    ) -> None:
        self.model_path = Path(model_path)
        if not self.model_path.is_file():
            raise BackendError(f"{self.model_path}: GGUF model file not found")
        if n_ctx < 64:
            raise ValueError(f"n_ctx={n_ctx} is too small to hold a chat prompt")
        self.model_id = f"llama.cpp:{self.model_path.stem}"
        self.context_window = n_ctx
        self.n_threads = n_threads or _cpu_count()
        self.seed = seed
        self._llm: Any = None
        self._formatter: Any = None
        self._grammars: dict[str, Any] = {}
        self._lock = threading.Lock()
        self.last_timings: LlamaTimings | None = None
        self.prompt_tokens_evaluated = 0  # running total: shows what KV reuse saved
        # The KV states of repeating prompt prefixes (prefix_states.py); None turns it off.
        self.prefix_states: PrefixStates | None = PrefixStates() if prefix_cache else None
        # m replies to one prompt decoded together (parallel_runs.py); False: one after another.
        self.parallel_replies = parallel_replies
        self._together: Any = None

    def __repr__(self) -> str:
        return f"LlamaCppChat({str(self.model_path)!r}, n_ctx={self.context_window})"

    # ---- ChatModel ----------------------------------------------------------------------

    def complete(self, req: ChatRequest) -> ChatResult:
        with self._lock:
            return self._complete(req)

    def complete_many(self, reqs: Sequence[ChatRequest]) -> list[ChatResult | Exception]:
        groups: dict[tuple[Any, ...], list[int]] = {}
        for i, req in enumerate(reqs):
            groups.setdefault(_sampling_key(req), []).append(i)
        results: list[ChatResult | Exception | None] = [None] * len(reqs)
        with self._lock:
            for indices in groups.values():
                # Same prompt, same sampling, other seeds: decoded together (parallel_runs.py),
                # else back to back (the second run reuses the first's prompt KV).
                for chunk in _chunks(indices, PARALLEL_SEQS):
                    if len(chunk) > 1 and self._parallel_fits(reqs[chunk[0]]):
                        for i, res in zip(chunk, self._complete_parallel([reqs[i] for i in chunk]), strict=True):
                            results[i] = res
                        continue
                    for i in chunk:
                        try:
                            results[i] = self._complete(reqs[i])
                        except Exception as exc:  # noqa: BLE001 - reported in its own slot
                            results[i] = exc
        return [r for r in results if r is not None]

    def prompt_tokens(self, messages: Sequence[Message]) -> int:
        """How many tokens these messages take once the chat template is applied."""
        with self._lock:
            return len(self._tokens(tuple(messages)))

    # ---- internals ----------------------------------------------------------------------

    def _complete(self, req: ChatRequest) -> ChatResult:
        llm = self._model()  # raises a BackendError with the pip command if llama_cpp is absent
        import llama_cpp

        if any(m.images for m in req.messages):
            raise BackendError(
                f"{self.model_id} reads text only: send images (img_k > 0) to a vision model "
                "over an OpenAI-compatible endpoint"
            )
        tokens = self._tokens(req.messages)
        if len(tokens) + req.max_tokens > self.context_window:
            raise ContextOverflowError(
                f"{self.model_id}: the prompt takes {len(tokens)} tokens and the reply may take "
                f"{req.max_tokens}, more than n_ctx={self.context_window}; send less context",
                prompt_tokens=len(tokens),
                limit=self.context_window,
            )
        shared = self._shared_prefix(req.messages, tokens)
        if req.top_logprobs:
            return self._first_token(llm, tokens, req.top_logprobs, shared, req.reuse_prefix)
        grammar = self._grammar(req.schema_text) if req.schema_text is not None else None
        llama_cpp.llama_perf_context_reset(llm.ctx)
        started = time.perf_counter()
        recorder = _TokenLogprobs(len(tokens)) if req.reply_logprobs else None
        sink = reply_sink()
        try:
            self._prime(llm, tokens, shared, req.reuse_prefix)
            completion = llm.create_completion(
                tokens,
                max_tokens=req.max_tokens,
                temperature=req.temperature,
                seed=req.seed,
                grammar=grammar,
                logits_processor=llama_cpp.LogitsProcessorList([recorder]) if recorder is not None else None,
                stream=sink is not None,
            )
            text, finish, completion_tokens = _collect(completion, sink)
        except (RuntimeError, ValueError) as exc:
            raise BackendError(f"{self.model_id}: generation failed: {exc}") from exc
        seconds = time.perf_counter() - started
        perf = llama_cpp.llama_perf_context(llm.ctx)
        self.last_timings = LlamaTimings(perf.n_p_eval, perf.t_p_eval_ms, perf.n_eval, perf.t_eval_ms)
        self.prompt_tokens_evaluated += perf.n_p_eval
        return ChatResult(
            text=self._checked(req, text, finish),
            prompt_tokens=len(tokens),
            completion_tokens=completion_tokens,
            seconds=seconds,
            cached=False,
            mean_logprob=recorder.mean() if recorder is not None else None,
        )

    def _parallel_fits(self, req: ChatRequest) -> bool:
        """Whether a request's replies can be decoded together: sampled text (no
        probabilities read), text only, and room for every reply in the parallel context."""
        return (
            self.parallel_replies
            and not req.top_logprobs
            and not req.reply_logprobs
            and not any(m.images for m in req.messages)
            and req.max_tokens <= PARALLEL_MAX_TOKENS
        )

    def _complete_parallel(self, reqs: list[ChatRequest]) -> list[ChatResult | Exception]:
        """One prompt, one reply per request (each its own seed), decoded together."""
        req = reqs[0]
        try:
            llm = self._model()
            tokens = self._tokens(req.messages)
            if len(tokens) + req.max_tokens > self.context_window:
                raise ContextOverflowError(
                    f"{self.model_id}: the prompt takes {len(tokens)} tokens and the reply may take "
                    f"{req.max_tokens}, more than n_ctx={self.context_window}; send less context",
                    prompt_tokens=len(tokens),
                    limit=self.context_window,
                )
            import llama_cpp
            from llama_cpp.llama_grammar import json_schema_to_gbnf

            together = self._parallel(llm)
            grammar = json_schema_to_gbnf(req.schema_text) if req.schema_text is not None else None
            llama_cpp.llama_perf_context_reset(together.ctx)
            started = time.perf_counter()
            replies, evaluated = together.sample(
                tokens,
                self._shared_prefix(req.messages, tokens),
                self.prefix_states,
                [r.seed for r in reqs],
                req.temperature,
                req.max_tokens,
                grammar,
                reply_sink(),
            )
            seconds = time.perf_counter() - started
        except (RuntimeError, ValueError) as exc:
            return [BackendError(f"{self.model_id}: generation failed: {exc}")] * len(reqs)
        except Exception as exc:  # noqa: BLE001 - every reply of the group fails alike
            return [exc] * len(reqs)
        perf = llama_cpp.llama_perf_context(together.ctx)
        self.last_timings = LlamaTimings(evaluated, perf.t_p_eval_ms, perf.n_eval, perf.t_eval_ms)
        self.prompt_tokens_evaluated += evaluated
        out: list[ChatResult | Exception] = []
        for reply in replies:
            try:
                text = self._checked(req, reply.text, reply.finish)
            except UnusableReply as exc:
                out.append(exc)
                continue
            # The group's time shared by its replies: a run's cost, as the eval's totals add it up.
            out.append(ChatResult(text, len(tokens), reply.tokens, seconds / len(replies), cached=False))
        return out

    def _parallel(self, llm: Any) -> Any:
        if self._together is None:
            from kohaku_rag.llm.parallel_runs import ParallelReplies

            self._together = ParallelReplies(
                llm, self.context_window + PARALLEL_SEQS * PARALLEL_MAX_TOKENS, PARALLEL_SEQS, self.n_threads
            )
        return self._together

    def _checked(self, req: ChatRequest, text: str, finish: str | None) -> str:
        """A grammar-constrained reply's text, or UnusableReply when it is not JSON."""
        if req.json_schema is None:
            return text
        try:
            loads_json(text)
        except json.JSONDecodeError as exc:
            if finish == "length":
                raise UnusableReply(
                    f"{self.model_id}: the reply reached max_tokens={req.max_tokens} before its JSON "
                    "was complete; raise max_tokens"
                ) from None
            raise UnusableReply(f"{self.model_id}: grammar-constrained reply is not JSON ({exc})") from None
        return text.strip()

    def _first_token(
        self, llm: Any, tokens: list[int], top: int, shared: int, reuse_prefix: bool = False
    ) -> ChatResult:
        """The reply's `top` most likely first tokens, read from the model's own distribution
        (no grammar, no sampling): what a verdict's probability is computed from."""
        started = time.perf_counter()
        self.prompt_tokens_evaluated += self._prime(llm, tokens, shared, reuse_prefix) + 1
        llm.eval(tokens[-1:])
        logits = np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(llm.n_vocab(),)).astype(np.float64)  # noqa: SLF001
        logprobs = logits - np.logaddexp.reduce(logits)
        best = np.argsort(-logprobs)[:top]
        pairs = tuple((llm.detokenize([int(t)]).decode("utf-8", errors="replace"), float(logprobs[t])) for t in best)
        return ChatResult(
            text=pairs[0][0],
            prompt_tokens=len(tokens),
            completion_tokens=1,
            seconds=time.perf_counter() - started,
            top_logprobs=pairs,
        )

    def _prime(self, llm: Any, tokens: list[int], shared: int, reuse_prefix: bool = False) -> int:
        """Leave exactly tokens[:-1] in the KV cache, computed from scratch unless already
        there; with `reuse_prefix`, the longest prefix shared with the cached tokens is kept
        and only the rest evaluated (one question against many passages). `shared` is the
        length of the prompt's repeating prefix (chat header and system prompt): a fresh
        evaluation restores its saved state, or evaluates and saves it, then evaluates the
        rest. Returns how many tokens it evaluated.

        `create_completion` then evaluates only the last prompt token itself (llama's
        prefix match), both on a cold cache and on a reused one.
        """
        head = len(tokens) - 1
        cached = np.asarray(llm._input_ids)  # noqa: SLF001 - the tokens whose KV entries are live
        n = min(len(cached), head)
        differs = np.flatnonzero(cached[:n] != np.asarray(tokens[:n]))
        common = int(differs[0]) if len(differs) else n
        evaluated = 0
        if common < head and not reuse_prefix:
            # A fresh evaluation: the same logits whatever ran before.
            if self.prefix_states is not None and MIN_PREFIX_TOKENS <= shared < head:
                evaluated = self.prefix_states.evaluate(llm, tokens[:shared])
                common = shared
            else:
                common = 0
        # `eval` drops the KV entries past n_tokens before it writes new ones.
        llm.n_tokens = common
        llm.eval(tokens[common:head])
        return evaluated + head - common  # the tokens evaluated now

    def _shared_prefix(self, messages: tuple[Message, ...], tokens: list[int]) -> int:
        """How many leading tokens do not depend on the last message's content: the chat
        header, the system prompt and the last message's own header, which repeat from one
        call to the next."""
        if self.prefix_states is None or not messages:
            return 0
        blank = self._tokens((*messages[:-1], dataclasses.replace(messages[-1], content="")))
        n = min(len(blank), len(tokens))
        differs = np.flatnonzero(np.asarray(blank[:n]) != np.asarray(tokens[:n]))
        return int(differs[0]) if len(differs) else n

    def _model(self) -> Any:
        if self._llm is not None:
            return self._llm
        try:
            from llama_cpp import Llama
            from llama_cpp.llama_chat_format import Jinja2ChatFormatter
        except ImportError as exc:
            raise BackendError(f"llama-cpp-python is not installed ({exc}): {_INSTALL_HINT}") from None
        try:
            ensure_cpu_backend()
        except RuntimeError as exc:
            raise BackendError(str(exc)) from None
        try:
            llm = Llama(
                model_path=str(self.model_path),
                n_ctx=self.context_window,
                n_threads=self.n_threads,
                n_threads_batch=self.n_threads,
                seed=self.seed,
                verbose=False,
            )
        except (ValueError, RuntimeError) as exc:
            raise BackendError(f"{self.model_path}: llama.cpp could not load the model: {exc}") from exc
        template = llm.metadata.get("tokenizer.chat_template")
        if not template:
            raise BackendError(f"{self.model_path}: the GGUF has no tokenizer.chat_template to format chats with")
        vocab = llm._model  # noqa: SLF001 - token text lookups live on the wrapped model
        eos, bos = llm.token_eos(), llm.token_bos()
        self._formatter = Jinja2ChatFormatter(
            template=template,
            eos_token=vocab.token_get_text(eos) if eos != -1 else "",
            bos_token=vocab.token_get_text(bos) if bos != -1 else "",
        )
        self._llm = llm
        return llm

    def _tokens(self, messages: tuple[Message, ...]) -> list[int]:
        llm = self._model()
        rendered = self._formatter(messages=[{"role": m.role, "content": m.content} for m in messages])
        # The template writes any special tokens (BOS included) itself.
        return llm.tokenize(rendered.prompt.encode("utf-8"), add_bos=not rendered.added_special, special=True)

    def _grammar(self, schema_json: str) -> Any:
        grammar = self._grammars.get(schema_json)
        if grammar is None:
            from llama_cpp import LlamaGrammar

            try:
                grammar = LlamaGrammar.from_json_schema(schema_json, verbose=False)
            except (ValueError, RuntimeError, KeyError, TypeError) as exc:
                raise BackendError(f"{self.model_id}: cannot turn the JSON schema into a grammar: {exc}") from exc
            self._grammars[schema_json] = grammar
        return grammar


def _collect(completion: Any, sink: ReplySink | None) -> tuple[str, str | None, int]:
    """(text, finish reason, completion tokens) of a completion: a whole one, or streamed
    chunks whose text goes to `sink` as it is generated (the same tokens either way: one
    sampling loop, read as it runs)."""
    if sink is None:
        choice = completion["choices"][0]
        usage = completion.get("usage") or {}
        return choice["text"], choice.get("finish_reason"), int(usage.get("completion_tokens") or 0)
    parts: list[str] = []
    finish = None
    for chunk in completion:
        choice = chunk["choices"][0]
        if choice["text"]:
            parts.append(choice["text"])
            sink(choice["text"])
        finish = choice.get("finish_reason") or finish
    return "".join(parts), finish, len(parts)


class _TokenLogprobs:
    """A logits processor that records, at each step, the model's log-probabilities; the
    token chosen at step t is the next step's last input id, so its log-probability under
    the model (before the grammar's mask) is read then. The mean is a reply's confidence."""

    def __init__(self, prompt_len: int) -> None:
        self.prompt_len = prompt_len
        self.previous: np.ndarray | None = None
        self.chosen: list[float] = []

    def __call__(self, input_ids: np.ndarray, scores: np.ndarray) -> np.ndarray:
        if self.previous is not None and len(input_ids) > self.prompt_len:
            self.chosen.append(float(self.previous[int(input_ids[-1])]))
        logits = np.asarray(scores, dtype=np.float64)
        self.previous = logits - np.logaddexp.reduce(logits)
        return scores

    def mean(self) -> float | None:
        return sum(self.chosen) / len(self.chosen) if self.chosen else None


def _sampling_key(req: ChatRequest) -> tuple[Any, ...]:
    """What requests must share, seed aside, to be decoded together."""
    return (
        req.messages,
        req.temperature,
        req.max_tokens,
        req.schema_text,
        req.top_logprobs,
        req.reply_logprobs,
        req.reuse_prefix,
    )


def _chunks(items: list[int], size: int) -> list[list[int]]:
    return [items[i : i + size] for i in range(0, len(items), size)]
