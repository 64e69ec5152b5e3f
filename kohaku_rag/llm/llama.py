"""An in-process chat model via llama-cpp-python, with grammar-constrained JSON output.

`Llama` loads the model and tokenizes; prompts are evaluated and replies sampled by
`decoding.Decoder` on llama.cpp's public C API: m voted runs of one prompt are decoded
together from one prefill, the JSON grammar judges the likely tokens rather than the whole
vocabulary, and a call that opens like the last one (a verdict after its answer, a retry
after its first attempt) keeps the KV state they share.

Why every fresh prompt is primed the same way ("the repeating prefix, then the rest but the
last token, then the last token alone"): logits depend (in the last bits) on how the tokens
were split into batches, and at temperature > 0 such a difference can flip a sampled token.
Priming every prompt the same way from an empty sequence makes a (prompt, seed) reply the
same whether it runs first or after another prompt that shares a prefix (m voted runs
decoded together are reproducible as a group: decoding.py says why not one by one). The
prefix (chat header, system prompt) is restored from its saved KV state when it was saved
before (prefix_states.py): the same split either way, so the same reply.
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
from kohaku_rag.llm.cpu_verdicts import trusted_cpu_backend
from kohaku_rag.llm.prefix_states import PrefixStates
from kohaku_rag.llm.reply_stream import reply_sink

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
        state_dir: Path | None = None,
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
        self._grammars: dict[str, str] = {}
        self._lock = threading.Lock()
        self.last_timings: LlamaTimings | None = None
        self.prompt_tokens_evaluated = 0  # running total: shows what KV reuse saved
        # The KV states of repeating prompt prefixes (prefix_states.py); None turns it off.
        # With `state_dir` they are also saved there for the next process (their identity is
        # set once the model is loaded: it names the CPU variant llama.cpp picked).
        self.prefix_states: PrefixStates | None = PrefixStates(directory=state_dir) if prefix_cache else None
        # m replies to one prompt decoded together (decoding.py); False: one after another.
        self.parallel_replies = parallel_replies
        self._decoding: Any = None

    def __repr__(self) -> str:
        return f"LlamaCppChat({str(self.model_path)!r}, n_ctx={self.context_window})"

    # ---- ChatModel ----------------------------------------------------------------------

    def complete(self, req: ChatRequest) -> ChatResult:
        with self._lock:
            result = self._complete_group([req])[0]
        if isinstance(result, Exception):
            raise result
        return result

    def complete_many(self, reqs: Sequence[ChatRequest]) -> list[ChatResult | Exception]:
        groups: dict[tuple[Any, ...], list[int]] = {}
        for i, req in enumerate(reqs):
            groups.setdefault(_sampling_key(req), []).append(i)
        results: list[ChatResult | Exception | None] = [None] * len(reqs)
        with self._lock:
            for indices in groups.values():
                # Same prompt, same sampling, other seeds: one prefill, decoded together.
                size = 1 if reqs[indices[0]].top_logprobs or not self.parallel_replies else PARALLEL_SEQS
                for chunk in _chunks(indices, size):
                    for i, res in zip(chunk, self._complete_group([reqs[i] for i in chunk]), strict=True):
                        results[i] = res
        return [r for r in results if r is not None]

    def prompt_tokens(self, messages: Sequence[Message]) -> int:
        """How many tokens these messages take once the chat template is applied."""
        with self._lock:
            return len(self._tokens(tuple(messages)))

    # ---- internals ----------------------------------------------------------------------

    def _complete_group(self, reqs: list[ChatRequest]) -> list[ChatResult | Exception]:
        """Requests that differ only by seed: one prefill, one reply each."""
        req = reqs[0]
        try:
            decoder = self._decoder()  # raises a BackendError with the pip command if llama_cpp is absent
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
            import llama_cpp

            llama_cpp.llama_perf_context_reset(decoder.ctx)
            started = time.perf_counter()
            try:
                evaluated = decoder.prime(
                    tokens, self._shared_prefix(req.messages, tokens), self.prefix_states, req.reuse_prefix
                )
                self.prompt_tokens_evaluated += evaluated
                if req.top_logprobs:
                    return [self._first_token(decoder, req.top_logprobs, len(tokens), evaluated, started)]
                replies = decoder.sample(
                    [r.seed for r in reqs],
                    req.temperature,
                    req.max_tokens,
                    self._grammar(req.schema_text) if req.schema_text is not None else None,
                    record_logprobs=req.reply_logprobs,
                    sink=reply_sink(),
                )
            except (RuntimeError, ValueError) as exc:
                raise BackendError(f"{self.model_id}: generation failed: {exc}") from exc
        except Exception as exc:  # noqa: BLE001 - every reply of the group fails alike, in its own slot
            return [exc] * len(reqs)
        seconds = time.perf_counter() - started
        perf = llama_cpp.llama_perf_context(decoder.ctx)
        self.last_timings = LlamaTimings(evaluated, perf.t_p_eval_ms, perf.n_eval, perf.t_eval_ms)
        out: list[ChatResult | Exception] = []
        # The prefill is shared like the time: the first reply carries what the split leaves.
        shares = [evaluated // len(replies)] * len(replies)
        shares[0] += evaluated - sum(shares)
        for reply, share in zip(replies, shares, strict=True):
            try:
                text = self._checked(req, reply.text, reply.finish)
            except UnusableReply as exc:
                out.append(exc)
                continue
            # The group's time shared by its replies: a run's cost, as an evaluation adds them up.
            out.append(
                ChatResult(
                    text=text,
                    prompt_tokens=len(tokens),
                    completion_tokens=reply.tokens,
                    seconds=seconds / len(replies),
                    cached=False,
                    mean_logprob=reply.mean_logprob,
                    prompt_tokens_evaluated=share,
                )
            )
        return out

    def _first_token(self, decoder: Any, top: int, prompt_tokens: int, evaluated: int, started: float) -> ChatResult:
        """The reply's `top` most likely first tokens, read from the model's own distribution
        (no grammar, no sampling): what a verdict's probability is computed from."""
        logprobs = decoder.first_token_logprobs()
        best = np.argsort(-logprobs)[:top]
        pairs = tuple((decoder.detokenize(int(t)), float(logprobs[t])) for t in best)
        return ChatResult(
            text=pairs[0][0],
            prompt_tokens=prompt_tokens,
            completion_tokens=1,
            seconds=time.perf_counter() - started,
            top_logprobs=pairs,
            prompt_tokens_evaluated=evaluated,
        )

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
            trusted_cpu_backend(self.model_path)
        except RuntimeError as exc:
            raise BackendError(str(exc)) from None
        try:
            # The Llama's own context only tokenizes; prompts run in the Decoder's.
            llm = Llama(
                model_path=str(self.model_path),
                n_ctx=min(self.context_window, 512),
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

    def _decoder(self) -> Any:
        if self._decoding is None:
            llm = self._model()
            from kohaku_rag.llm.decoding import Decoder

            # Room for the prompt and one reply (n_ctx), plus the other voted runs' replies.
            n_ctx = self.context_window + (PARALLEL_SEQS - 1) * PARALLEL_MAX_TOKENS
            try:
                self._decoding = Decoder(llm, n_ctx, PARALLEL_SEQS, self.n_threads)
            except RuntimeError as exc:
                raise BackendError(f"{self.model_path}: {exc}") from None
            if self.prefix_states is not None:
                self.prefix_states.identity = self._state_identity(n_ctx)
        return self._decoding

    def _state_identity(self, n_ctx: int) -> str:
        """What a saved KV state depends on besides its tokens: the model file, the decoding
        context, llama.cpp's version and CPU variant, the threads (a state saved under other
        values is another file, never loaded here)."""
        import llama_cpp

        stat = self.model_path.stat()
        return json.dumps(
            [
                self.model_path.name,
                stat.st_size,
                stat.st_mtime_ns,
                n_ctx,
                PARALLEL_SEQS,
                self.n_threads,
                llama_cpp.__version__,
                trusted_cpu_backend(self.model_path).variant,
            ]
        )

    def _tokens(self, messages: tuple[Message, ...]) -> list[int]:
        llm = self._model()
        rendered = self._formatter(messages=[{"role": m.role, "content": m.content} for m in messages])
        # The template writes any special tokens (BOS included) itself.
        return llm.tokenize(rendered.prompt.encode("utf-8"), add_bos=not rendered.added_special, special=True)

    def _grammar(self, schema_json: str) -> str:
        """The GBNF grammar of a JSON schema (llama-cpp-python's converter)."""
        grammar = self._grammars.get(schema_json)
        if grammar is None:
            from llama_cpp.llama_grammar import json_schema_to_gbnf

            try:
                grammar = json_schema_to_gbnf(schema_json)
            except (ValueError, RuntimeError, KeyError, TypeError) as exc:
                raise BackendError(f"{self.model_id}: cannot turn the JSON schema into a grammar: {exc}") from exc
            self._grammars[schema_json] = grammar
        return grammar


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
