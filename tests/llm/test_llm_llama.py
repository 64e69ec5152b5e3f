"""LlamaCppChat with the real bundled Qwen2.5-Coder-1.5B (tiny prompts, few tokens)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

pytest.importorskip("llama_cpp")

from kohaku_rag.errors import BackendError  # noqa: E402
from kohaku_rag.llm import LLMSpec, make_chat_model  # noqa: E402
from kohaku_rag.llm.base import ChatModel, ChatRequest, ContextOverflowError, Message  # noqa: E402
from kohaku_rag.llm.llama import LlamaCppChat  # noqa: E402
from kohaku_rag.llm.model_files import BUNDLED_SIZE, bundled_model  # noqa: E402
from kohaku_rag.llm.prefix_states import MIN_PREFIX_TOKENS, PrefixStates  # noqa: E402
from kohaku_rag.llm.reply_stream import streaming_reply  # noqa: E402

SCHEMA = {"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"]}


@pytest.fixture(scope="module")
def llm() -> LlamaCppChat:
    path = bundled_model()
    assert path.stat().st_size == BUNDLED_SIZE
    # One thread: llama.cpp's OpenMP workers spin-wait and crawl when other jobs share the cores.
    return LlamaCppChat(path, n_ctx=512, n_threads=1)


def user(text: str) -> tuple[Message, ...]:
    return (Message("system", "You are a terse assistant: reply with as few words as you can."), Message("user", text))


def test_schema_constrained_reply(llm: LlamaCppChat) -> None:
    assert isinstance(llm, ChatModel)
    req = ChatRequest(user("What is 2+2? Reply in JSON."), max_tokens=16, json_schema=SCHEMA)
    result = llm.complete(req)
    assert json.loads(result.text) == {"answer": 4}
    assert result.prompt_tokens > 10 and 0 < result.completion_tokens <= 16 and not result.cached
    with pytest.raises(BackendError, match="max_tokens=2 before its JSON was complete"):
        llm.complete(replace(req, max_tokens=2))


def test_shared_prompt_is_evaluated_once(llm: LlamaCppChat) -> None:
    messages = user("Which of 4, 7, 9 is prime? " + "Primes are integers above one. " * 2)
    reqs = [ChatRequest(messages, temperature=0.8, max_tokens=3, seed=s) for s in range(3)]
    other = ChatRequest(user("Say hi."), max_tokens=3)
    batch = [reqs[0], other, reqs[1], reqs[2]]
    p_shared, p_other = llm.prompt_tokens(messages), llm.prompt_tokens(other.messages)

    shared = llm._shared_prefix(other.messages, llm._tokens(other.messages))  # noqa: SLF001
    assert shared >= MIN_PREFIX_TOKENS  # the chat header and system prompt both prompts open with

    llm.prefix_states = PrefixStates()  # what earlier tests saved is forgotten
    before = llm.prompt_tokens_evaluated
    results = llm.complete_many(batch)
    # Grouped by prompt: each prompt evaluated once (the three runs of the shared one decoded
    # together); the second prompt's opening is restored from the first's saved prefix state.
    assert llm.prompt_tokens_evaluated - before == p_shared + (p_other - shared)

    # Each reply sits in its own slot and equals the same request made on its own.
    alone: dict[int, str] = {}
    evaluated = []
    for i in (1, 0, 2, 3):  # `other` is still cached from the batch; then the shared prompt
        alone[i] = llm.complete(batch[i]).text
        assert llm.last_timings is not None
        evaluated.append(llm.last_timings.prompt_tokens_evaluated)
    assert evaluated == [1, p_shared - shared, 1, 1]
    assert [r.text for r in results] == [alone[i] for i in range(4)]


def test_reuse_prefix_evaluates_only_what_the_cache_lacks(llm: LlamaCppChat) -> None:
    """Scoring calls (the LLM reranker) may keep a shared prompt prefix in the KV cache."""
    question = "Question: which passage names a prime number?\n\nPassage:\n"
    reqs = [
        ChatRequest(user(question + p), max_tokens=1, top_logprobs=5, reuse_prefix=True)
        for p in ("Seven is prime.", "Eight is even.")
    ]
    first, second = (llm._tokens(r.messages) for r in reqs)  # noqa: SLF001
    common = next(i for i, (a, b) in enumerate(zip(first, second, strict=False)) if a != b)
    llm.complete(reqs[0])
    before = llm.prompt_tokens_evaluated
    llm.complete(reqs[1])
    assert llm.prompt_tokens_evaluated - before == len(second) - common
    # Without the flag the same prompt is evaluated afresh (reproducible logits) but for its
    # opening (chat header, system prompt), restored from its saved state.
    llm.complete(reqs[0])
    before = llm.prompt_tokens_evaluated
    llm.complete(replace(reqs[1], reuse_prefix=False))
    shared = llm._shared_prefix(reqs[1].messages, second)  # noqa: SLF001
    assert llm.prompt_tokens_evaluated - before == len(second) - shared


def test_a_repeating_prefix_is_evaluated_once_and_changes_no_reply(llm: LlamaCppChat) -> None:
    """Planner and answer calls alternate, so the KV of the last prompt never holds the next
    one's opening; the saved prefix state does, and a reply is the same with or without it."""

    def ask(text: str, seed: int) -> ChatRequest:
        return ChatRequest(user(text), temperature=1.0, max_tokens=6, seed=seed)

    a, b = ask("Name a random animal.", 1), ask("Name a random colour and a fruit.", 2)
    llm.prefix_states = PrefixStates()
    assert llm.complete(a).text
    assert llm.prefix_states.misses == 1 and len(llm.prefix_states) == 1
    b_after_a = llm.complete(b).text
    assert llm.prefix_states.hits == 1
    shared = llm._shared_prefix(b.messages, llm._tokens(b.messages))  # noqa: SLF001
    assert llm.last_timings is not None
    assert llm.last_timings.prompt_tokens_evaluated == llm.prompt_tokens(b.messages) - shared

    # The same request on a model that never saw `a`, and on one with no prefix cache.
    fresh = LlamaCppChat(llm.model_path, n_ctx=512, n_threads=1)
    assert fresh.complete(b).text == b_after_a
    assert fresh.prefix_states is not None and fresh.prefix_states.misses == 1
    plain = LlamaCppChat(llm.model_path, n_ctx=512, n_threads=1, prefix_cache=False)
    plain.complete(b)
    assert plain.last_timings is not None
    assert plain.last_timings.prompt_tokens_evaluated == llm.prompt_tokens(b.messages)


def test_seed_drives_sampling(llm: LlamaCppChat) -> None:
    def sample(seed: int) -> str:
        req = ChatRequest(user("Name one random animal."), temperature=1.5, max_tokens=4, seed=seed)
        return llm.complete(req).text

    texts = [sample(s) for s in (1, 2, 3)]
    assert len(set(texts)) >= 2
    assert sample(1) == texts[0]  # same seed, same draw, with the prompt cached this time
    # ... and after another prompt sharing the system message filled the KV cache.
    llm.complete(ChatRequest(user("Name one random colour."), temperature=1.5, max_tokens=2, seed=1))
    assert sample(3) == texts[2]


def test_prompt_too_long_raises_context_overflow(llm: LlamaCppChat) -> None:
    with pytest.raises(ContextOverflowError) as info:
        llm.complete(ChatRequest(user("word " * 600), max_tokens=8))
    assert info.value.limit == 512 and info.value.prompt_tokens > 512
    fits = llm.prompt_tokens(user("word " * 400))
    assert fits < 512
    with pytest.raises(ContextOverflowError, match="n_ctx=512"):
        llm.complete(ChatRequest(user("word " * 400), max_tokens=512 - fits + 1))


def test_make_chat_model_builds_the_cached_bundled_model(tmp_path: Path) -> None:
    # Point the lake's models folder at the joined file instead of copying 1.1 GB again.
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "qwen.gguf").symlink_to(bundled_model())
    llm = make_chat_model(LLMSpec(model="qwen.gguf", n_ctx=512, n_threads=1), tmp_path)
    req = ChatRequest((Message("user", "3+4=? JSON"),), max_tokens=12, json_schema=SCHEMA)
    first, second = llm.complete(req), llm.complete(req)
    assert json.loads(first.text) == {"answer": 7} and not first.cached
    assert second.cached and second.text == first.text
    assert (tmp_path / "cache" / "llm" / "llm.sqlite").is_file()
    assert llm.model_id == "llama.cpp:qwen"


def test_first_token_probabilities_give_a_verdict(llm: LlamaCppChat) -> None:
    from kohaku_rag.answering.verdict import verdict_logodds

    def logodds(statement: str) -> float:
        req = ChatRequest(
            user(f"Statement: {statement}\nIs the statement true or false? Reply with one word: True or False."),
            max_tokens=1,
            top_logprobs=5,
        )
        result = llm.complete(req)
        probs = [lp for _, lp in result.top_logprobs]
        assert len(probs) == 5 and probs == sorted(probs, reverse=True) and result.text == result.top_logprobs[0][0]
        return verdict_logodds(result.top_logprobs)

    assert logodds("Paris is the capital of France.") > 1.0
    assert logodds("Paris is the capital of Germany.") < 0.0


def test_a_streamed_reply_is_the_same_reply_piece_by_piece(llm: LlamaCppChat) -> None:
    """Inside `streaming_reply` the reply's text reaches the sink as it is generated; the
    reply itself (same prompt, same seed) does not change."""
    req = ChatRequest(user("Name three prime numbers. Reply in JSON."), max_tokens=40, temperature=0.7, seed=5,
                      json_schema={"type": "object", "properties": {"primes": {"type": "array", "items": {"type": "integer"}}},
                                   "required": ["primes"]})  # fmt: skip
    whole = llm.complete(req)
    pieces: list[str] = []
    with streaming_reply(pieces.append):
        streamed = llm.complete(req)
    assert len(pieces) > 3 and "".join(pieces).strip() == streamed.text == whole.text
    assert streamed.completion_tokens == len(pieces)
    llm.complete(req)  # outside the block: nothing more is sent
    assert len(pieces) == streamed.completion_tokens


def test_voted_runs_share_one_prefill_and_decode_together(llm: LlamaCppChat) -> None:
    """m runs of one prompt (KohakuRAG's voted runs): the prompt is evaluated once, the m
    replies are decoded together (one model step carries a token of each, so the steps are
    the longest reply's, not the sum), and the same runs give the same replies whether the
    prompt's opening was restored from a saved KV state after other prompts or evaluated
    afresh on a new model. Greedy runs give the reply a lone run gives."""
    schema = {
        "type": "object",
        "properties": {"animals": {"type": "array", "items": {"type": "string", "maxLength": 12}, "maxItems": 3}},
        "required": ["animals"],
    }
    messages = user("Name three random animals. Reply in JSON.")
    reqs = [ChatRequest(messages, temperature=1.2, max_tokens=40, seed=s, json_schema=schema) for s in range(5)]
    llm.prefix_states = PrefixStates()
    llm.complete(ChatRequest(user("Say hi."), max_tokens=2))  # saves the opening both prompts share
    before = llm.prompt_tokens_evaluated
    together = llm.complete_many(reqs)
    assert all(not isinstance(r, Exception) for r in together), together
    shared = llm._shared_prefix(messages, llm._tokens(messages))  # noqa: SLF001
    assert llm.prompt_tokens_evaluated - before == llm.prompt_tokens(messages) - shared  # once, opening restored
    lengths = [r.completion_tokens for r in together]
    assert llm._decoding.decode_steps <= max(lengths) < sum(lengths)  # noqa: SLF001
    texts = [r.text for r in together]
    assert len(set(texts)) >= 3 and all(json.loads(text)["animals"] for text in texts)  # the seeds differ

    fresh = LlamaCppChat(llm.model_path, n_ctx=512, n_threads=1)
    assert [r.text for r in fresh.complete_many(reqs)] == texts
    greedy = [replace(r, temperature=0.0) for r in reqs[:3]]
    assert [r.text for r in llm.complete_many(greedy)] == [llm.complete(greedy[0]).text] * 3

    # Streamed, the first run's reply reaches the sink as it is written.
    pieces: list[str] = []
    with streaming_reply(pieces.append):
        streamed = llm.complete_many(reqs)
    assert len(pieces) > 3 and "".join(pieces).strip() == texts[0] == streamed[0].text


def test_a_true_false_verdict_continues_from_the_answers_kv_state() -> None:
    """The verdict prompt opens like the answer prompt (system prompt, then the same context),
    so after the answer call only the statement and its question are evaluated; on a fresh
    model the same verdict evaluates the whole prompt and gives the same log-odds."""
    from kohaku_rag.answering.prompt import answer_request
    from kohaku_rag.answering.qa_config import GenerationPart
    from kohaku_rag.answering.verdict import verdict_logodds, verdict_request
    from kohaku_rag.answers.records import Question
    from kohaku_rag.retrieval.context import ContextItem

    text = " ".join(
        f"Accelerator model {i} drew {300 + 10 * i} W during training in the reported runs." for i in range(12)
    )
    items = [ContextItem("gpu", "gpu:sec0:p0", "paragraph", 1, 1.0, text)]
    statement = Question("q1", "True or False: accelerator model 3 drew 330 W during training.", "is_blank")
    gen = GenerationPart()
    model = LlamaCppChat(bundled_model(), n_ctx=1024, n_threads=1)
    model.complete(answer_request(statement, items, gen, seed=0))
    verdict = verdict_request(statement, items, gen)
    total = model.prompt_tokens(verdict.messages)
    before = model.prompt_tokens_evaluated
    after_answer = model.complete(verdict)
    assert model.prompt_tokens_evaluated - before < total / 3

    fresh = LlamaCppChat(model.model_path, n_ctx=1024, n_threads=1, prefix_cache=False)
    alone = fresh.complete(verdict)
    assert fresh.prompt_tokens_evaluated == total
    first, second = verdict_logodds(after_answer.top_logprobs), verdict_logodds(alone.top_logprobs)
    assert first is not None and second is not None and abs(first - second) < 0.05


def test_a_support_check_continues_from_the_answers_kv_state_and_separates_stated_answers() -> None:
    """The support check (abstain = "unsupported") opens like the answer prompt, so after the
    answer call only the question and the proposed answer are evaluated; and the model's
    Yes/No odds are higher for an answer the context states than for a number it borrows."""
    from kohaku_rag.answering.prompt import answer_request
    from kohaku_rag.answering.qa_config import GenerationPart
    from kohaku_rag.answering.support_check import support_logodds, support_request
    from kohaku_rag.answers.records import Answer, Question
    from kohaku_rag.retrieval.context import ContextItem

    text = " ".join(
        f"Accelerator model {i} drew {300 + 10 * i} W during training in the reported runs." for i in range(12)
    )
    items = [ContextItem("gpu", "gpu:sec0:p0", "paragraph", 1, 1.0, text)]
    gen = GenerationPart(abstain="unsupported")
    stated = Question("q1", "How much power did accelerator model 3 draw during training?", "W")
    borrowed = Question("q2", "How much water did training accelerator model 3 consume?", "liters")
    model = LlamaCppChat(bundled_model(), n_ctx=1024, n_threads=1)
    odds = {}
    for question, value in ((stated, "330"), (borrowed, "330")):
        model.complete(answer_request(question, items, gen, seed=0))
        check = support_request(question, items, Answer(value, value, question.answer_unit, ("gpu",), ""), gen)
        before = model.prompt_tokens_evaluated
        result = model.complete(check)
        assert model.prompt_tokens_evaluated - before < model.prompt_tokens(check.messages) / 3
        odds[question.id] = support_logodds(result.top_logprobs)
    assert odds["q1"] is not None and odds["q2"] is not None
    assert odds["q1"] > odds["q2"]


def _prefix_run(model_path: Path, state_dir: Path, system: str) -> dict[str, object]:
    """One request in a new process with prefix states saved in `state_dir`."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(f"""
        import json
        from pathlib import Path
        from kohaku_rag.llm.base import ChatRequest, Message
        from kohaku_rag.llm.llama import LlamaCppChat
        llm = LlamaCppChat(Path({str(model_path)!r}), n_ctx=512, n_threads=1, state_dir=Path({str(state_dir)!r}))
        req = ChatRequest((Message("system", {system!r}), Message("user", "Name a random animal.")),
                          temperature=1.0, max_tokens=6, seed=3)
        res = llm.complete(req)
        states = llm.prefix_states
        assert res.prompt_tokens_evaluated == llm.last_timings.prompt_tokens_evaluated
        print(json.dumps({{"text": res.text, "evaluated": res.prompt_tokens_evaluated,
                          "disk_hits": states.disk_hits, "misses": states.misses,
                          "shared": llm._shared_prefix(req.messages, llm._tokens(req.messages))}}))
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return {**json.loads(proc.stdout.strip().splitlines()[-1]), "stderr": proc.stderr}


def test_a_saved_prefix_state_warms_a_new_process_and_is_rebuilt_when_damaged(tmp_path: Path) -> None:
    """The fixed opening of a prompt is evaluated once per machine: a second process loads
    its state (fewer tokens evaluated, the same reply as the cold start); a changed prompt or
    model is another state; a damaged state file is rebuilt, never loaded."""
    model = bundled_model()
    system = "You are a terse assistant: reply with as few words as you can, in lower case only."
    cold = _prefix_run(model, tmp_path, system)
    assert (cold["disk_hits"], cold["misses"]) == (0, 1)
    (saved,) = list(tmp_path.glob("*.kv"))
    shared = int(cold["shared"])  # type: ignore[call-overload]
    assert shared >= MIN_PREFIX_TOKENS

    warm = _prefix_run(model, tmp_path, system)
    assert (warm["disk_hits"], warm["misses"]) == (1, 0)
    assert warm["evaluated"] == int(cold["evaluated"]) - shared  # type: ignore[call-overload]
    assert warm["text"] == cold["text"]

    # Another prompt version (system prompt): not the saved state, a state of its own.
    other = _prefix_run(model, tmp_path, system + " Be kind.")
    assert (other["disk_hits"], other["misses"]) == (0, 1)
    assert len(list(tmp_path.glob("*.kv"))) == 2

    # Another model file (a copy with another name and time): its own states.
    copy = tmp_path / "models" / "other.gguf"
    copy.parent.mkdir()
    copy.symlink_to(model)
    assert _prefix_run(copy, tmp_path, system)["disk_hits"] == 0

    # A damaged state (one flipped byte) is deleted and evaluated again: the same reply.
    data = bytearray(saved.read_bytes())
    data[-100] ^= 0xFF
    saved.write_bytes(bytes(data))
    healed = _prefix_run(model, tmp_path, system)
    assert (healed["disk_hits"], healed["misses"]) == (0, 1)
    assert healed["text"] == cold["text"]
    assert _prefix_run(model, tmp_path, system)["disk_hits"] == 1


def test_a_state_file_of_another_prompt_copied_in_place_is_rebuilt(tmp_path: Path) -> None:
    """The state of prompt B under prompt A's file name is not loaded for A: each state proves
    the prompt it belongs to, so A is never answered from B's KV cache."""
    model = bundled_model()
    a = "You are a terse assistant: reply with as few words as you can, in lower case only."
    b = "You are a cheerful assistant: reply in French, in full sentences, with an emoji or two."
    cold = _prefix_run(model, tmp_path, a)
    (a_file,) = list(tmp_path.glob("*.kv"))
    _prefix_run(model, tmp_path, b)
    (b_file,) = set(tmp_path.glob("*.kv")) - {a_file}
    a_file.write_bytes(b_file.read_bytes())
    healed = _prefix_run(model, tmp_path, a)
    assert (healed["disk_hits"], healed["misses"]) == (0, 1) and healed["text"] == cold["text"]
    (line,) = [x for x in str(healed["stderr"]).splitlines() if "prefix state" in x]
    assert a_file.name in line and "belongs to another prompt or model" in line
