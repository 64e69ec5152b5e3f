"""Speed of the embedded LLM (Qwen2.5-Coder-1.5B Q4_K_M via llama.cpp) on this machine.

Prints prefill and generation tokens/s, then the wall time of 1 vs 5 seeded runs that share
one ~1500-token prompt, each reply constrained to the answering reply's JSON schema (an
explanation, the answer, its value, the cited ids, is_blank): with one prefill and the 5
replies decoded together, 5 runs cost little more than one. Run it with another checkout's
code first on PYTHONPATH to measure that code (the API it uses has not changed):

    python bench/answering/llm_speed.py [--threads N] [--model-dir DIR]
    PYTHONPATH=/tmp/base python bench/answering/llm_speed.py     # the same on an older checkout
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from kohaku_rag.llm.base import ChatRequest, Message
from kohaku_rag.llm.llama import LlamaCppChat
from kohaku_rag.llm.model_files import bundled_model, ensure_bundled_model

# The answering reply's shape (answering/prompt.py's answer_schema, without the evidence enum).
SCHEMA = {
    "type": "object",
    "properties": {
        "explanation": {"type": "string", "maxLength": 120},
        "answer": {"type": "string", "maxLength": 80},
        "answer_value": {"type": "string", "maxLength": 60},
        "ref_id": {"type": "array", "items": {"type": "string", "enum": ["doc1", "doc2", "doc3"]}, "maxItems": 3},
        "is_blank": {"type": "boolean"},
    },
    "required": ["explanation", "answer", "answer_value", "ref_id", "is_blank"],
    "additionalProperties": False,
}


def context_prompt(llm: LlamaCppChat, target_tokens: int, tag: str) -> tuple[Message, ...]:
    """A RAG-shaped prompt: numbered passages, then a question, about `target_tokens` long."""
    passages: list[str] = []
    i = 0
    while True:
        passages.append(
            f"[doc{i}] In {2015 + i % 10}, data centre site {tag}-{i} reported {120 + 7 * i} MWh of "
            f"electricity use, a PUE of {1.1 + (i % 5) / 10:.1f}, and {3 + i % 4} training runs of "
            f"models with {1 + i % 9} billion parameters on {8 * (1 + i % 6)} accelerators."
        )
        messages = (
            Message("system", "Answer from the passages only. Reply in JSON with the answer and its ref_id."),
            Message("user", "\n".join(passages) + f"\nQuestion: how much electricity did site {tag}-3 use?"),
        )
        if llm.prompt_tokens(messages) >= target_tokens:
            return messages
        i += 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=None, help="CPU threads (default: every core)")
    parser.add_argument("--model-dir", type=Path, help="join the model here (default: the machine's model file)")
    parser.add_argument("--prompt-tokens", type=int, default=1500)
    args = parser.parse_args()

    path = ensure_bundled_model(args.model_dir) if args.model_dir else bundled_model()
    llm = LlamaCppChat(path, n_ctx=4096, n_threads=args.threads)
    llm.complete(ChatRequest((Message("user", "hi"),), max_tokens=2))  # load and page the weights in
    print(f"model {path.name}, {llm.n_threads} threads, load average {os.getloadavg()[0]:.2f}")

    long = context_prompt(llm, args.prompt_tokens, "a")
    llm.complete(ChatRequest(long, max_tokens=1))
    t = llm.last_timings
    assert t is not None
    print(
        f"prefill:    {t.prompt_tokens_evaluated} tokens in {t.prompt_ms / 1000:.2f}s "
        f"= {t.prompt_tokens_evaluated / (t.prompt_ms / 1000):.1f} tok/s"
    )
    llm.complete(ChatRequest((Message("user", "Write a long story about a lighthouse."),), max_tokens=64))
    t = llm.last_timings
    print(
        f"generation: {t.generated_tokens} tokens in {t.generation_ms / 1000:.2f}s "
        f"= {t.generated_tokens / (t.generation_ms / 1000):.1f} tok/s"
    )

    one_prompt = context_prompt(llm, args.prompt_tokens, "b")  # fresh prompts: no cache help
    five_prompt = context_prompt(llm, args.prompt_tokens, "c")
    started = time.perf_counter()
    single = llm.complete(ChatRequest(one_prompt, temperature=0.7, max_tokens=160, seed=0, json_schema=SCHEMA))
    one = time.perf_counter() - started
    t = llm.last_timings
    print(
        f"JSON reply: {single.completion_tokens} tokens; prefill {t.prompt_ms / 1000:.2f}s, "
        f"{one - t.prompt_ms / 1000:.2f}s after it = {1000 * (one - t.prompt_ms / 1000) / single.completion_tokens:.0f} "
        "ms per reply token (sampling and grammar included)"
    )
    reqs = [ChatRequest(five_prompt, temperature=0.7, max_tokens=160, seed=s, json_schema=SCHEMA) for s in range(5)]
    before = llm.prompt_tokens_evaluated
    started = time.perf_counter()
    results = llm.complete_many(reqs)
    five = time.perf_counter() - started
    failed = [r for r in results if isinstance(r, Exception)]
    if failed:
        raise SystemExit(f"{len(failed)} of 5 runs failed: {failed[0]}")
    print(f"1 run  ({single.prompt_tokens}-token prompt): {one:.2f}s")
    print(
        f"5 runs (same prompt, seeds 0-4): {five:.2f}s = {five / one:.2f}x one run "
        f"(without reuse ~{5 * one:.1f}s); prompt tokens evaluated: "
        f"{llm.prompt_tokens_evaluated - before} (vs {5 * single.prompt_tokens} without reuse)"
    )
    print("reply tokens:", [r.completion_tokens for r in results if not isinstance(r, Exception)])
    print("answers:", [r.text for r in results])


if __name__ == "__main__":
    main()
