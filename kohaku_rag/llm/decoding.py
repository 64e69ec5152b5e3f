"""Prompt evaluation and sampling for the embedded model, on llama.cpp's public C API.

Why not `Llama.create_completion`: three things it cannot do are most of a CPU answer's time.

* **m replies for about the price of one.** KohakuRAG votes m runs of each answer. The prompt
  is evaluated once and its KV cells are shared by m sequences; the m replies are then
  decoded together, one token of each per model step. Prefill is compute-bound, but a
  generation step is bound by reading the weights (1.1 GB for the bundled model): a step
  that carries five tokens costs little more than one (llama.cpp's `parallel` example,
  vLLM's `n > 1`). `Llama` keeps one sequence per context.
* **The grammar on the likely tokens only.** A JSON-schema grammar checked against all 152k
  tokens costs ~17 ms per token on 2 cores, as much as half the step. Here the grammar
  judges the top-k candidates (k = 40, which is where the draw is made anyway) and the
  whole vocabulary only when none of them fits (llama.cpp's own `common_sampler` does the
  same: sample first, check the grammar after).
* **One context for replies, verdicts and scoring calls**, so a call that opens like the
  last one (a true/false verdict after its answer, a retry after its first attempt) keeps
  the KV state of what they share.

Why a reply does not depend on what ran before: a fresh prompt is always evaluated the same
way from an empty sequence (its repeating prefix, restored or evaluated; the rest but the
last token in batches of n_batch; the last token alone), and each reply's draws come from
its own seeded sampler. A reply is a function of its prompt, its seed and the group it was
decoded in: llama.cpp's CPU kernels for the bundled Q4_K weights compute a step of several
tokens in blocks of rows, so a sequence's logits in a five-token step differ from a lone
step's by up to ~0.5 (measured), enough to change some draws at temperature > 0 (greedy
replies came out the same). The m voted runs are m samples either way; `runs = 1` replies
are exactly as before.
"""

from __future__ import annotations

import codecs
import ctypes
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import llama_cpp  # this module is imported once llama.cpp has loaded a model
import numpy as np

from kohaku_rag.llm.prefix_states import MIN_PREFIX_TOKENS, PrefixStates
from kohaku_rag.llm.reply_stream import ReplySink

__all__ = ["Decoder", "SampledReply"]

# llama-cpp-python's create_completion defaults, which the replies are sampled with.
TOP_K = 40
TYPICAL_P = 1.0
TOP_P = 0.95
MIN_P = 0.05

_CANDIDATE = np.dtype([("id", np.int32), ("logit", np.float32), ("p", np.float32)], align=True)


@dataclass(frozen=True)
class SampledReply:
    text: str
    finish: str  # "stop" (end of turn) or "length" (max_tokens reached)
    tokens: int
    mean_logprob: float | None = None  # the model's mean log-probability of the reply's tokens


class Decoder:
    """A llama.cpp context on the loaded model with room for `max_seqs` sequences in one
    unified KV cache. Sequence 0 holds the last prompt (and the first reply), which the next
    call may build on; not thread-safe (the chat model serialises its calls)."""

    def __init__(self, llm: Any, n_ctx: int, max_seqs: int, n_threads: int, n_batch: int = 512) -> None:
        self.max_seqs = max_seqs
        self.n_batch = n_batch
        self.n_ctx = n_ctx
        params = llama_cpp.llama_context_params.from_buffer_copy(llm.context_params)
        params.n_ctx = n_ctx
        params.n_batch = params.n_ubatch = n_batch
        params.n_seq_max = max_seqs
        params.kv_unified = True  # the prompt's cells serve every sequence
        params.n_threads = params.n_threads_batch = n_threads
        self._llm = llm
        self.vocab = llama_cpp.llama_model_get_vocab(llm.model)
        self.n_vocab = llama_cpp.llama_vocab_n_tokens(self.vocab)
        self.ctx = llama_cpp.llama_init_from_model(llm.model, params)
        if not self.ctx:
            raise RuntimeError("llama.cpp could not create a context")
        self._batch = llama_cpp.llama_batch_init(n_batch, 0, max_seqs)
        self._candidates = np.zeros(self.n_vocab, dtype=_CANDIDATE)
        self._ids = np.arange(self.n_vocab, dtype=np.int32)
        self.cached: list[int] = []  # the tokens sequence 0 holds
        self.decode_steps = 0  # model steps of the last generation (tests read it)

    # ---- prompts --------------------------------------------------------------------------

    def prime(self, tokens: list[int], shared: int, prefix_states: PrefixStates | None, reuse: bool) -> int:
        """Leave exactly `tokens[:-1]` in sequence 0, then evaluate the last token, whose
        logits the next draw reads. A fresh prompt is evaluated from an empty sequence: its
        `shared` opening restored when saved (else evaluated and saved), then the rest. With
        `reuse`, the opening it shares with what sequence 0 holds is kept instead. Returns how
        many tokens were evaluated."""
        memory = llama_cpp.llama_get_memory(self.ctx)
        for seq in range(1, self.max_seqs):
            llama_cpp.llama_memory_seq_rm(memory, seq, -1, -1)
        head = len(tokens) - 1
        common = _common_prefix(self.cached, tokens[:head])
        evaluated = 0
        if common < head and not reuse:
            common = 0
            llama_cpp.llama_memory_seq_rm(memory, 0, -1, -1)
            self.cached = []
            if prefix_states is not None and MIN_PREFIX_TOKENS <= shared < head:
                evaluated = prefix_states.evaluate(self.ctx, tokens[:shared], lambda p: self._eval(p, 0))
                common = shared
        llama_cpp.llama_memory_seq_rm(memory, 0, common, -1)
        self._eval(tokens[common:head], common)
        self._decode([(tokens[head], head, 0)], logits=True)
        self.cached = list(tokens)
        return evaluated + len(tokens) - common

    def first_token_logprobs(self) -> np.ndarray:
        """log-probabilities of the next token after the primed prompt."""
        logits = self.logits(-1).astype(np.float64)
        return logits - np.logaddexp.reduce(logits)

    def detokenize(self, token: int) -> str:
        return self._llm.detokenize([token]).decode("utf-8", errors="replace")

    # ---- replies --------------------------------------------------------------------------

    def sample(
        self,
        seeds: Sequence[int],
        temperature: float,
        max_tokens: int,
        grammar: str | None,
        record_logprobs: bool = False,
        sink: ReplySink | None = None,
    ) -> list[SampledReply]:
        """One reply per seed to the primed prompt, decoded together. `sink` hears the first
        reply's text as it is written."""
        if not 1 <= len(seeds) <= self.max_seqs:
            raise ValueError(f"{len(seeds)} replies asked, between 1 and {self.max_seqs} fit")
        prompt_len = len(self.cached)
        if prompt_len + len(seeds) * max_tokens > self.n_ctx:
            raise ValueError(f"{prompt_len} prompt tokens and {len(seeds)}×{max_tokens} reply tokens exceed n_ctx")
        memory = llama_cpp.llama_get_memory(self.ctx)
        for seq in range(1, len(seeds)):
            llama_cpp.llama_memory_seq_cp(memory, 0, seq, -1, -1)
        drawers = [_Drawer(self, seed, temperature, grammar, record_logprobs) for seed in seeds]
        try:
            replies = self._generate(drawers, prompt_len, max_tokens, sink)
        finally:
            for drawer in drawers:
                drawer.free()
        self.cached = self.cached + replies[0][0][: replies[0][1]]  # what sequence 0 now holds
        return [
            SampledReply(
                self._llm.detokenize(tokens).decode("utf-8", errors="replace"), finish, len(tokens), drawer.mean()
            )
            for (tokens, _decoded, finish), drawer in zip(replies, drawers, strict=True)
        ]

    def _generate(
        self, drawers: list[_Drawer], prompt_len: int, max_tokens: int, sink: ReplySink | None
    ) -> list[tuple[list[int], int, str]]:
        """Each sequence's (reply tokens, how many of them were evaluated, finish reason)."""
        n = len(drawers)
        replies: list[list[int]] = [[] for _ in range(n)]
        decoded = [0] * n
        finish: list[str | None] = [None] * n
        where = [-1] * n  # the batch index of each sequence's logits: at first, the prompt's last
        text = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.decode_steps = 0
        while True:
            for s in range(n):
                if finish[s] is not None:
                    continue
                token = drawers[s].draw(where[s])
                if llama_cpp.llama_vocab_is_eog(self.vocab, token):
                    finish[s] = "stop"
                    continue
                replies[s].append(token)
                if s == 0 and sink is not None:
                    piece = text.decode(self._llm.detokenize([token]))
                    if piece:
                        sink(piece)
                if len(replies[s]) >= max_tokens:
                    finish[s] = "length"
            active = [s for s in range(n) if finish[s] is None]
            if not active:
                break
            self._decode([(replies[s][-1], prompt_len + len(replies[s]) - 1, s) for s in active], logits=True)
            for i, s in enumerate(active):
                where[s] = i
                decoded[s] = len(replies[s])
            self.decode_steps += 1
        return [(r, d, f or "stop") for r, d, f in zip(replies, decoded, finish, strict=True)]

    # ---- llama.cpp calls ------------------------------------------------------------------

    def _eval(self, tokens: Sequence[int], pos: int) -> None:
        """`Llama.eval`'s batching: n_batch tokens of sequence 0 at a time, no logits."""
        for i in range(0, len(tokens), self.n_batch):
            chunk = tokens[i : i + self.n_batch]
            self._decode([(t, pos + i + j, 0) for j, t in enumerate(chunk)], logits=False)

    def _decode(self, entries: Sequence[tuple[int, int, int]], logits: bool) -> None:
        """Evaluate (token, position, sequence) entries in one step, with or without the
        logits of each (a generation step, a prompt's last token: with)."""
        batch = self._batch
        batch.n_tokens = len(entries)
        for i, (token, pos, seq) in enumerate(entries):
            batch.token[i] = token
            batch.pos[i] = pos
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = seq
            batch.logits[i] = logits
        status = llama_cpp.llama_decode(self.ctx, batch)
        if status != 0:
            raise RuntimeError(f"llama_decode failed with status {status}")

    def logits(self, index: int) -> np.ndarray:
        """The logits of batch entry `index` of the last step (-1: its last entry), as a view."""
        pointer = llama_cpp.llama_get_logits_ith(self.ctx, index)
        return np.ctypeslib.as_array(pointer, shape=(self.n_vocab,))

    def candidates(self, logits: np.ndarray) -> Any:
        """Every token with its logit, as llama.cpp's samplers take them (one reused buffer)."""
        buffer = self._candidates
        buffer["id"] = self._ids
        buffer["logit"] = logits
        buffer["p"] = 0.0
        data = buffer.ctypes.data_as(ctypes.POINTER(llama_cpp.llama_token_data))
        return llama_cpp.llama_token_data_array(data=data, size=self.n_vocab, selected=-1, sorted=False)


class _Drawer:
    """One reply's sampler: top-k 40, the grammar on those candidates (on the whole
    vocabulary when none fits), typical 1.0, top-p 0.95, min-p 0.05, the temperature, then
    a draw from its own seeded generator (greedy at temperature 0)."""

    def __init__(self, decoder: Decoder, seed: int, temperature: float, grammar: str | None, record: bool) -> None:
        self.decoder = decoder
        self.top_k = llama_cpp.llama_sampler_init_top_k(TOP_K)
        self.grammar = (
            llama_cpp.llama_sampler_init_grammar(decoder.vocab, grammar.encode("utf-8"), b"root")
            if grammar is not None
            else None
        )
        self.rest = llama_cpp.llama_sampler_chain_init(llama_cpp.llama_sampler_chain_default_params())
        chain: list[Any] = (
            [llama_cpp.llama_sampler_init_greedy()]
            if temperature == 0.0
            else [
                llama_cpp.llama_sampler_init_typical(TYPICAL_P, 1),
                llama_cpp.llama_sampler_init_top_p(TOP_P, 1),
                llama_cpp.llama_sampler_init_min_p(MIN_P, 1),
                llama_cpp.llama_sampler_init_temp(temperature),
                llama_cpp.llama_sampler_init_dist(seed),
            ]
        )
        for sampler in chain:
            llama_cpp.llama_sampler_chain_add(self.rest, sampler)
        self.logprobs: list[float] | None = [] if record else None

    def draw(self, index: int) -> int:
        logits = self.decoder.logits(index)
        cur = self.decoder.candidates(logits)
        llama_cpp.llama_sampler_apply(self.top_k, ctypes.byref(cur))
        if self.grammar is not None:
            llama_cpp.llama_sampler_apply(self.grammar, ctypes.byref(cur))
            if not _keep_allowed(cur):
                cur = self.decoder.candidates(logits)
                llama_cpp.llama_sampler_apply(self.grammar, ctypes.byref(cur))
                llama_cpp.llama_sampler_apply(self.top_k, ctypes.byref(cur))
                _keep_allowed(cur)
        llama_cpp.llama_sampler_apply(self.rest, ctypes.byref(cur))
        token = int(cur.data[cur.selected].id)
        if self.grammar is not None:
            llama_cpp.llama_sampler_accept(self.grammar, token)
        if self.logprobs is not None:
            raw = logits.astype(np.float64)
            self.logprobs.append(float(raw[token] - np.logaddexp.reduce(raw)))
        return token

    def mean(self) -> float | None:
        return sum(self.logprobs) / len(self.logprobs) if self.logprobs else None

    def free(self) -> None:
        for sampler in (self.top_k, self.grammar, self.rest):
            if sampler is not None:
                llama_cpp.llama_sampler_free(sampler)


def _keep_allowed(cur: Any) -> int:
    """Drop the candidates the grammar ruled out (logit -inf), keeping the others in order;
    the samplers after it read the first candidate as the most likely one. Returns how many
    are left."""
    kept = 0
    for i in range(cur.size):
        if math.isfinite(cur.data[i].logit):
            if kept != i:
                cur.data[kept] = cur.data[i]
            kept += 1
    cur.size = kept
    return kept


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    differs = np.flatnonzero(np.asarray(a[:n]) != np.asarray(b[:n]))
    return int(differs[0]) if len(differs) else n
