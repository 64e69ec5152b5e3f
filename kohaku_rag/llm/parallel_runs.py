"""m replies to one prompt for little more than the price of one: the prompt is evaluated
once, its KV state shared by m sequences, and the m replies are decoded together, one
token of each per model step.

Why this pays on a CPU: prefill is compute-bound, but generating one token is bound by
reading the weights (about 1 GB for the bundled model) from memory. A step that carries
five tokens (one per reply) reads the weights once, so it costs little more than a step
that carries one. KohakuRAG votes m runs of each answer; sent one after another, the m
replies cost m generations (the prompt is shared already, see llama.py), together they cost
about one. This is llama.cpp's own `parallel` example and vLLM's `n > 1` sampling, through
llama.cpp's public C API (llama-cpp-python's `Llama` keeps one sequence per context).

Why the replies match a lone run's: each reply is sampled by the same chain as
`Llama.create_completion` (grammar, top-k 40, typical 1.0, top-p 0.95, min-p 0.05,
temperature, then a seeded draw), from the same prompt evaluated the same way (the shared
prefix, then the rest but the last token, then the last token: llama.py's `_prime`). The
logits of a step with five tokens can differ from a lone step's in their last bits (the
attention sums skip other sequences' cells in another order); a sampled token changes
only if its seeded draw falls within that difference, about once in a million tokens.
"""

from __future__ import annotations

import codecs
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import llama_cpp  # this module is imported only once llama.cpp has loaded a model

from kohaku_rag.llm.prefix_states import MIN_PREFIX_TOKENS, PrefixStates
from kohaku_rag.llm.reply_stream import ReplySink

__all__ = ["ParallelReplies", "SampledReply"]

# llama-cpp-python's create_completion defaults, which a lone run samples with.
TOP_K = 40
TYPICAL_P = 1.0
TOP_P = 0.95
MIN_P = 0.05


@dataclass(frozen=True)
class SampledReply:
    text: str
    finish: str  # "stop" (end of turn) or "length" (max_tokens reached)
    tokens: int


class ParallelReplies:
    """A second llama.cpp context on the loaded model, with room for `max_seqs` sequences
    in one unified KV cache (a prompt's cells are shared, not copied)."""

    def __init__(self, llm: Any, n_ctx: int, max_seqs: int, n_threads: int, n_batch: int = 512) -> None:
        self.max_seqs = max_seqs
        self.n_batch = n_batch
        self.n_ctx = n_ctx
        params = llama_cpp.llama_context_params.from_buffer_copy(llm.context_params)  # the loaded context's ...
        params.n_ctx = n_ctx  # ... with room for the m replies
        params.n_batch = params.n_ubatch = n_batch
        params.n_seq_max = max_seqs
        params.kv_unified = True
        params.n_threads = params.n_threads_batch = n_threads
        self._llm = llm
        self._vocab = llama_cpp.llama_model_get_vocab(llm.model)
        self.ctx = llama_cpp.llama_init_from_model(llm.model, params)
        if not self.ctx:
            raise RuntimeError("llama.cpp could not create a context for parallel replies")
        self._batch = llama_cpp.llama_batch_init(n_batch, 0, max_seqs)
        self.decode_steps = 0  # model steps of the last call's generation (a test reads it)

    def close(self) -> None:
        if self.ctx:
            llama_cpp.llama_batch_free(self._batch)
            llama_cpp.llama_free(self.ctx)
            self.ctx = None

    def sample(
        self,
        tokens: list[int],
        shared: int,
        prefix_states: PrefixStates | None,
        seeds: Sequence[int],
        temperature: float,
        max_tokens: int,
        grammar: str | None,
        sink: ReplySink | None = None,
    ) -> tuple[list[SampledReply], int]:
        """One reply per seed to the prompt `tokens` (whose first `shared` tokens repeat
        across calls: their state is restored when saved). `sink` hears the first reply's
        text as it is written. Returns the replies and how many prompt tokens were evaluated."""
        if not 1 <= len(seeds) <= self.max_seqs:
            raise ValueError(f"{len(seeds)} replies asked, between 1 and {self.max_seqs} fit")
        if len(tokens) + len(seeds) * max_tokens > self.n_ctx:
            raise ValueError(f"{len(tokens)} prompt tokens and {len(seeds)}×{max_tokens} reply tokens exceed n_ctx")
        evaluated = self._prefill(tokens, shared, prefix_states)
        memory = llama_cpp.llama_get_memory(self.ctx)
        for seq in range(1, len(seeds)):
            llama_cpp.llama_memory_seq_cp(memory, 0, seq, -1, -1)
        samplers = [self._sampler(seed, temperature, grammar) for seed in seeds]
        try:
            return self._generate(samplers, len(tokens), max_tokens, sink), evaluated
        finally:
            for sampler in samplers:
                llama_cpp.llama_sampler_free(sampler)

    # ---- internals ------------------------------------------------------------------------

    def _prefill(self, tokens: list[int], shared: int, prefix_states: PrefixStates | None) -> int:
        """Sequence 0 holds the prompt, evaluated as a lone run evaluates it (llama.py's
        `_prime`): the shared prefix (restored, or evaluated and saved), the rest but the last
        token in batches of n_batch, then the last token alone, with its logits."""
        llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(self.ctx), True)
        head = len(tokens) - 1
        start = evaluated = 0
        if prefix_states is not None and MIN_PREFIX_TOKENS <= shared < head:
            evaluated = prefix_states.evaluate_into(self.ctx, tokens[:shared], lambda p: self._eval(p, 0))
            start = shared
        self._eval(tokens[start:head], start)
        self._decode(tokens[head:], head, logits_last=True)
        return evaluated + len(tokens) - start

    def _eval(self, tokens: Sequence[int], pos: int) -> None:
        """`Llama.eval`'s batching: n_batch tokens at a time, no logits."""
        for i in range(0, len(tokens), self.n_batch):
            self._decode(tokens[i : i + self.n_batch], pos + i, logits_last=False)

    def _decode(self, tokens: Sequence[int], pos: int, logits_last: bool) -> None:
        """Evaluate `tokens` at positions pos, pos+1, ... of sequence 0."""
        batch = self._batch
        batch.n_tokens = len(tokens)
        for i, token in enumerate(tokens):
            batch.token[i] = token
            batch.pos[i] = pos + i
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = 0
            batch.logits[i] = logits_last and i == len(tokens) - 1
        self._check(llama_cpp.llama_decode(self.ctx, batch))

    def _generate(
        self, samplers: list[Any], prompt_len: int, max_tokens: int, sink: ReplySink | None
    ) -> list[SampledReply]:
        n = len(samplers)
        replies: list[list[int]] = [[] for _ in range(n)]
        finish: list[str | None] = [None] * n
        # The first tokens are all drawn from the prompt's last logits (batch index -1).
        logit_index = [-1] * n
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.decode_steps = 0
        while True:
            active = [s for s in range(n) if finish[s] is None]
            for s in active:
                token = llama_cpp.llama_sampler_sample(samplers[s], self.ctx, logit_index[s])
                if llama_cpp.llama_vocab_is_eog(self._vocab, token):
                    finish[s] = "stop"
                    continue
                replies[s].append(token)
                if s == 0 and sink is not None:
                    piece = decoder.decode(self._llm.detokenize([token]))
                    if piece:
                        sink(piece)
                if len(replies[s]) >= max_tokens:
                    finish[s] = "length"
            active = [s for s in range(n) if finish[s] is None]
            if not active:
                break
            batch = self._batch
            batch.n_tokens = len(active)
            for i, s in enumerate(active):
                batch.token[i] = replies[s][-1]
                batch.pos[i] = prompt_len + len(replies[s]) - 1
                batch.n_seq_id[i] = 1
                batch.seq_id[i][0] = s
                batch.logits[i] = True
                logit_index[s] = i
            self._check(llama_cpp.llama_decode(self.ctx, batch))
            self.decode_steps += 1
        return [
            SampledReply(self._llm.detokenize(r).decode("utf-8", errors="replace"), f or "stop", len(r))
            for r, f in zip(replies, finish, strict=True)
        ]

    def _sampler(self, seed: int, temperature: float, grammar: str | None) -> Any:
        """create_completion's chain for one reply (no repeat penalty: its default is off)."""
        chain = llama_cpp.llama_sampler_chain_init(llama_cpp.llama_sampler_chain_default_params())
        if grammar is not None:
            llama_cpp.llama_sampler_chain_add(
                chain, llama_cpp.llama_sampler_init_grammar(self._vocab, grammar.encode("utf-8"), b"root")
            )
        if temperature == 0.0:
            llama_cpp.llama_sampler_chain_add(chain, llama_cpp.llama_sampler_init_greedy())
            return chain
        for sampler in (
            llama_cpp.llama_sampler_init_top_k(TOP_K),
            llama_cpp.llama_sampler_init_typical(TYPICAL_P, 1),
            llama_cpp.llama_sampler_init_top_p(TOP_P, 1),
            llama_cpp.llama_sampler_init_min_p(MIN_P, 1),
            llama_cpp.llama_sampler_init_temp(temperature),
            llama_cpp.llama_sampler_init_dist(seed),
        ):
            llama_cpp.llama_sampler_chain_add(chain, sampler)
        return chain

    @staticmethod
    def _check(status: int) -> None:
        if status != 0:
            raise RuntimeError(f"llama_decode failed with status {status}")
