"""Answering one question: prompt, reference-constrained JSON reply, retries, overflow shrink.

* The prompt puts the context before the question (the paper's reordered prompt; the other
  order is an option), each snippet as `[ref_id=doc_id] text`, figure and table snippets
  under "Referenced media". Instructions are short and name the expected unit, so a 1.5B
  model follows them.
* The reply schema limits `ref_id` to an enum of the document ids present in the context:
  the model cannot cite a document it was not shown (reference-constrained decoding).
  Its properties are decoded in order, explanation before answer; for true/false
  statements (`quote_evidence`) an `evidence` field first copies one context sentence,
  chosen from an enum of the context's sentences, into `supporting_materials`.
* A true/false statement's verdict comes, by default, from one more one-token call over the
  same context: log P(True) - log P(False) must reach a margin (a 1.5B model's reply calls
  nearly every on-topic statement true; its probabilities still separate them).
* An is_blank reply is asked again with k×2, k×3 ... context units (and budget), up to
  `max_retries` times; a context overflow drops the lowest-ranked snippets and asks again.
  How each of those attempts asks (its context size, prompt rules, temperature) is its
  `Stage` (stages.py): HERO's question-type routing and two-stage generation are stages.
* Ensemble runs share one prompt and differ only by seed, and are sent together so the
  embedded backend reuses the prompt's KV cache.
"""

from __future__ import annotations

import base64
import dataclasses
import logging
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from kohaku_rag.answering.diverse_rerank import Searcher, answering_searcher
from kohaku_rag.answering.planner import plan_queries
from kohaku_rag.answering.qa_config import GenerationPart, QAConfig
from kohaku_rag.answering.question_types import search_config
from kohaku_rag.answering.stages import BLANK_RULE, SINGLE, Stage, stage_for
from kohaku_rag.errors import BackendError, RetriesExhausted
from kohaku_rag.evaluation.answer_forms import asks_for_several, several_values_rule
from kohaku_rag.evaluation.normalise import expand_stated_magnitude, is_blank_value, normalise_answer
from kohaku_rag.evaluation.records import Answer, Question
from kohaku_rag.llm import ChatModel, ChatRequest, ChatResult, ContextOverflowError, Message
from kohaku_rag.llm.base import UnusableReply, extract_json, loads_json, one_word_request, word_logodds
from kohaku_rag.parse.sentences import split_sentences
from kohaku_rag.retrieval.retrieval_config import RetrievalConfig
from kohaku_rag.retrieval.retriever import ContextItem
from kohaku_rag.stores.vectors import MAX_K

SYSTEM = (
    "You answer questions using only the context passages. Each passage starts with its "
    "[ref_id=...]. If the passages do not contain the answer, set is_blank to true. "
    "Reply with JSON only."
)
MEDIA = ("image", "table", "page")
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Prediction:
    """One run's answer to one question, with what it cost."""

    question_id: str
    run: int
    seed: int
    answer: Answer
    attempts: int  # LLM answer calls that counted (1 + is_blank retries)
    k_used: int  # context snippets in the prompt that produced the answer
    context_chars: int
    prompt_tokens: int
    completion_tokens: int
    seconds: float  # LLM time of this run (shared prompt evaluation charged to the run that paid it)
    llm_calls: int
    cached_calls: int
    # Set when an LLM call failed (after its retries): the run is a failure, not an answer
    # (its answer is a blank placeholder that is never voted nor scored) and is asked again.
    error: str = ""
    # log P(True) - log P(False) from a true/false statement's verdict call (None: none made)
    verdict_logodds: float | None = None
    context: tuple[ContextItem, ...] = ()  # the snippets of the answering prompt (not stored in rows)
    # Every LLM call of this run: {"attempt", "kind" (answer/verdict), "k", "prompt", "reply"}
    # (stored in the debug table, not in rows).
    debug: tuple[dict[str, Any], ...] = ()

    def cited(self) -> list[ContextItem]:
        """The context snippets that support the answer (node ids and pages): those of the
        cited documents that state the answer's value, else every snippet of those documents."""
        refs = set(self.answer.ref_id)
        snippets = [i for i in self.context if i.doc_id in refs]
        stating = [i for i in snippets if _states(i.text, self.answer.answer_value)]
        return stating or snippets

    def as_row(self) -> dict[str, Any]:
        a = self.answer
        return {
            "id": self.question_id,
            "run": self.run,
            "seed": self.seed,
            "answer": a.answer,
            "answer_value": a.answer_value,
            "answer_unit": a.answer_unit,
            "ref_id": list(a.ref_id),
            "explanation": a.explanation,
            "supporting_materials": a.supporting_materials,
            "is_blank": a.is_blank,
            "attempts": self.attempts,
            "k_used": self.k_used,
            "context_chars": self.context_chars,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "seconds": round(self.seconds, 4),
            "llm_calls": self.llm_calls,
            "cached_calls": self.cached_calls,
            "error": self.error,
            "verdict_logodds": self.verdict_logodds,
            "confidence": a.confidence,
            "cited_nodes": [i.node_id for i in self.cited()],
        }


def _states(text: str, value: str) -> bool:
    """Whether a snippet spells out an answer value (a number or name; a 1/0 verdict or a
    range is not something a snippet spells out)."""
    value = value.strip()
    if len(value) < 2 or is_blank_value(value) or value.startswith("["):
        return False
    return re.search(rf"(?<![\w.]){re.escape(value.lower())}(?![\w]|\.\d)", text.lower().replace(",", "")) is not None


def prediction_from_row(row: dict[str, Any]) -> Prediction:
    answer = Answer(
        answer=row["answer"],
        answer_value=row["answer_value"],
        answer_unit=row["answer_unit"],
        ref_id=tuple(row["ref_id"] or ()),
        explanation=row["explanation"],
        is_blank=bool(row["is_blank"]),
        supporting_materials=row["supporting_materials"],
        confidence=row.get("confidence"),
    )
    # Rows written before a column existed read back as that field's default.
    values = {
        f.name: row.get(f.name, f.default)
        for f in dataclasses.fields(Prediction)
        if f.name not in ("question_id", "answer", "context", "debug")
    }
    return Prediction(question_id=row["id"], answer=answer, **values)


# ── prompt and schema ─────────────────────────────────────────────────────


def unit_is_given(unit: str) -> bool:
    return not is_blank_value(unit)


def snippet_source(item: ContextItem, titles: bool) -> str:
    """ "(Document title › Section) " before a snippet, when titles are on and known."""
    if not titles:
        return ""
    where = " › ".join(_one_line(t)[:90] for t in (item.doc_title, item.section) if t.strip())
    return f"({where}) " if where else ""


def marked_text(item: ContextItem) -> str:
    """The snippet on one line, its marked sentences in **bold**."""
    text = _one_line(item.text)
    for sentence in item.marks:
        one = _one_line(sentence)
        text = text.replace(one, f"**{one}**", 1)
    return text


def format_context(items: Sequence[ContextItem], titles: bool = False) -> str:
    text = [
        f"[ref_id={i.doc_id}] {snippet_source(i, titles)}{marked_text(i)}" for i in items if i.attachment not in MEDIA
    ]
    media = [
        f"[ref_id={i.doc_id}] {snippet_source(i, titles)}({i.attachment}, page {i.page}) {marked_text(i)}"
        for i in items
        if i.attachment in MEDIA
    ]
    parts = ["Context:", *text] if text else ["Context: (none)"]
    if media:
        parts += ["", "Referenced media:", *media]
    return "\n".join(parts)


# "True or False: ..." / "true/false - ...": the statement follows the prefix and its punctuation.
_TRUE_FALSE_PREFIX = re.compile(r"^\s*true(?: or |/)false[\s:?.\-]*", re.IGNORECASE)


def is_true_false(question: Question) -> bool:
    return _TRUE_FALSE_PREFIX.match(question.question) is not None


def build_messages(
    question: Question,
    items: Sequence[ContextItem],
    reordered: bool = True,
    titles: bool = False,
    quote: bool = False,
    instruction: str = "",
    blank_rule: str = BLANK_RULE,
) -> tuple[Message, ...]:
    """The answering prompt. `instruction` (a question type's, stages.py) follows the unit
    line; `blank_rule` says when to abstain (the strict or relaxed stage's, or today's)."""
    unit = question.answer_unit.strip()
    if unit_is_given(unit):
        unit_line = f"Answer unit: {unit}"
        value_rule = f"answer_value: only the number in {unit} (no unit, no commas), or a range as [low,high]."
    elif is_true_false(question):
        unit_line = "Answer unit: none (a true/false statement)"
        value_rule = "answer_value: 1 if the context shows the statement is true, 0 if it is false."
    else:
        unit_line = "Answer unit: none"
        value_rule = "answer_value: the exact name or term as written in the context."
    if asks_for_several(question):  # a WattBot 2026 list (the Reconcile flag, or the wording)
        value_rule = several_values_rule(unit if unit_is_given(unit) else None)
    if not quote:
        evidence_rule = []
    elif is_true_false(question):
        evidence_rule = ["evidence: copy the context sentence that shows whether the statement is true or false."]
    else:
        evidence_rule = ["evidence: copy the context sentence that answers the question."]
    task = "\n".join(
        [
            f"Question: {question.question}",
            unit_line,
            *([instruction] if instruction else []),
            "",
            "Fill in the JSON:",
            *evidence_rule,
            "explanation: a few words quoting the fact from the context.",
            "answer: the answer in a few words.",
            value_rule,
            "ref_id: the ref_id of each passage you used.",
            blank_rule,
        ]
    )
    if any(i.marks for i in items):
        task = "Sentences in **bold** share the most words with the question.\n" + task
    context = format_context(items, titles)
    user = f"{context}\n\n{task}" if reordered else f"{task}\n\n{context}"
    return (Message("system", SYSTEM), Message("user", user))


def answer_schema(doc_ids: Sequence[str], true_false: bool = False, evidence: Sequence[str] = ()) -> dict[str, Any]:
    """The reply's JSON schema; ref_id may only name the given documents. With `evidence`
    (context sentences), the reply first copies one of them verbatim. The unit is the
    question's, so the reply does not write it: a forced `"answer_unit": "is_blank"` right
    before `is_blank` led the embedded model to abstain after giving the right answer."""
    refs: dict[str, Any] = (
        {"type": "array", "items": {"type": "string", "enum": list(doc_ids)}, "minItems": 1, "maxItems": 3}
        if doc_ids
        else {"type": "array", "items": {"type": "string"}, "maxItems": 0}
    )
    # A free string, not a number pattern, for questions with a unit: constrained to a number
    # or a "[low,high]" pattern, the bundled model wrote ranges as "80" or "300,1000"
    # (bench/answer_settings.py, 2026-11-24: WattBot train 0.646 -> 0.609).
    value: dict[str, Any] = (
        {"type": "string", "enum": ["1", "0"]} if true_false else {"type": "string", "maxLength": 60}
    )
    quote: dict[str, Any] = {"evidence": {"type": "string", "enum": list(evidence)}} if evidence else {}
    # Short string caps bound the generation time on a slow CPU model. Properties are
    # written in this order, so the model quotes before it commits to an answer.
    return {
        "title": "answer",
        "type": "object",
        "properties": {
            **quote,
            "explanation": {"type": "string", "maxLength": 120},
            "answer": {"type": "string", "maxLength": 80},
            "answer_value": value,
            "ref_id": refs,
            "is_blank": {"type": "boolean"},
        },
        "required": [*quote, "explanation", "answer", "answer_value", "ref_id", "is_blank"],
        "additionalProperties": False,
    }


def enum_spelling(text: str) -> str:
    """`text` as a schema enum offers it: llama.cpp's schema-to-grammar step mis-escapes '"'
    and '\\' inside enum values."""
    return text.replace('"', "'").replace("\\", "/")


def evidence_sentences(items: Sequence[ContextItem], max_chars: int = 200, limit: int = 80) -> list[str]:
    """The context's sentences, each clipped to `max_chars`, as the choices of the reply's
    `evidence` field: a verbatim quote keeps a small model from paraphrasing the question
    back as its evidence (it would then call every true/false statement true)."""
    out: dict[str, None] = {}
    for item in items:
        for sentence in split_sentences(item.text):
            sentence = enum_spelling(sentence)[:max_chars].rstrip()
            if len(sentence) >= 20:
                out.setdefault(sentence, None)
    return list(out)[:limit]


def context_doc_ids(items: Sequence[ContextItem]) -> list[str]:
    return list(dict.fromkeys(i.doc_id for i in items))


ImageLoader = Callable[[str], bytes]  # a figure's media hash -> its PNG bytes


def figure_images(items: Sequence[ContextItem], img_k: int, load: ImageLoader | None) -> tuple[str, ...]:
    """Data URLs of the first `img_k` figure snippets' images (figures and, with the
    `page_images` index option, page renderings; in rank order)."""
    if img_k <= 0 or load is None:
        return ()
    hashes = [i.media_hash for i in items if i.attachment in ("image", "page") and i.media_hash][:img_k]
    return tuple("data:image/png;base64," + base64.b64encode(load(h)).decode("ascii") for h in hashes)


def answer_request(
    question: Question,
    items: Sequence[ContextItem],
    gen: GenerationPart,
    seed: int,
    images: ImageLoader | None = None,
    stage: Stage = SINGLE,
) -> ChatRequest:
    true_false = is_true_false(question)
    quote = gen.quote_evidence == "all" or (gen.quote_evidence == "true_false" and true_false)
    evidence = evidence_sentences(items) if quote else []
    system, user = build_messages(
        question,
        items,
        gen.use_reordered_prompt,
        gen.snippet_titles,
        bool(evidence),
        stage.instruction,
        stage.blank_rule,
    )
    attached = figure_images(items, gen.img_k, images)
    if attached:
        user = Message(user.role, user.content, images=attached)
    return ChatRequest(
        (system, user),
        temperature=gen.temperature if stage.temperature is None else stage.temperature,
        max_tokens=gen.max_tokens,
        seed=seed,
        json_schema=answer_schema(context_doc_ids(items), true_false, evidence),
        reply_logprobs=gen.reply_confidence,
    )


def parse_reply(text: str, question: Question, doc_ids: Sequence[str]) -> Answer:
    """The reply as a normalised Answer; unusable replies and is_blank become the abstention."""
    raw = extract_json(text)
    data = loads_json(raw) if raw is not None else None
    if not isinstance(data, dict) or data.get("is_blank") is True:
        return Answer.blank(question.answer_unit)
    refs = data.get("ref_id")
    refs = [refs] if isinstance(refs, str) else refs if isinstance(refs, list) else []
    allowed = {d.lower(): d for d in doc_ids}
    cited = tuple(
        dict.fromkeys(allowed[r.strip().lower()] for r in refs if isinstance(r, str) and r.strip().lower() in allowed)
    )
    words, explanation = str(data.get("answer") or "").strip(), str(data.get("explanation") or "").strip()
    answer = Answer(
        answer=words,
        answer_value=expand_stated_magnitude(
            str(data.get("answer_value") or ""), question.answer_unit, [words, explanation]
        ),
        answer_unit=question.answer_unit,
        ref_id=cited,
        explanation=explanation,
        supporting_materials=str(data.get("evidence") or "").strip(),
    )
    return normalise_answer(answer, question.answer_unit, known_ref_ids=doc_ids)


def cite_source(answer: Answer, items: Sequence[ContextItem]) -> Answer:
    """The answer citing one document: the first it cites whose snippets state its value or
    hold its quoted evidence sentence, else the first it cites (`cite = "source"`)."""
    if len(answer.ref_id) <= 1:
        return answer
    # The quote was offered in the enum's spelling (evidence_sentences): compare in it.
    quote = answer.supporting_materials.strip()[:100]

    def supports(item: ContextItem) -> bool:
        return _states(item.text, answer.answer_value) or bool(quote and quote in enum_spelling(item.text))

    stating = {i.doc_id for i in items if supports(i)}
    source = next((d for d in answer.ref_id if d in stating), answer.ref_id[0])
    return dataclasses.replace(answer, ref_id=(source,))


# ── true/false verdict from probabilities ─────────────────────────────────

VERDICT_SYSTEM = "You check statements against context passages."


def statement_of(question: Question) -> str:
    """ "True or False: X" -> "X"."""
    return _TRUE_FALSE_PREFIX.sub("", question.question, count=1).strip()


def verdict_request(question: Question, items: Sequence[ContextItem], gen: GenerationPart) -> ChatRequest:
    """One word, True or False, as the reply's first token's probabilities (no sampling)."""
    user = (
        f"{format_context(items, gen.snippet_titles)}\n\nStatement: {statement_of(question)}\n"
        "According to the context, is the statement true or false? Reply with one word: True or False."
    )
    return one_word_request(VERDICT_SYSTEM, user)


def verdict_logodds(top_logprobs: Sequence[tuple[str, float]]) -> float | None:
    """log P(True) - log P(False) of the reply's first token; None when neither is listed."""
    return word_logodds(top_logprobs, "true", "false")


def apply_verdict(answer: Answer, logodds: float | None, margin: float) -> Answer:
    """The statement is true when the log-odds reach the margin; an abstention stays one."""
    if answer.is_blank or logodds is None:
        return answer
    true = logodds >= margin
    return dataclasses.replace(answer, answer="True" if true else "False", answer_value="1" if true else "0")


def _decide_true_false(chat: ChatModel, question: Question, gen: GenerationPart, runs: Sequence[_Run]) -> None:
    """Replace each answered run's 1/0 by the probability verdict on the context it read
    (one call per distinct context, counted on the first run that read it)."""
    by_context: dict[tuple[str, ...], list[_Run]] = {}
    for run in runs:
        if run.answer is not None and not run.answer.is_blank and not run.error:
            by_context.setdefault(tuple(i.node_id for i in run.items), []).append(run)
    for group in by_context.values():
        try:
            res = chat.complete(verdict_request(question, group[0].items, gen))
        except RetriesExhausted as exc:  # the endpoint is down: a failure, asked again next time
            for run in group:
                run.error = f"{type(exc).__name__}: {exc}"
            continue
        except BackendError as exc:  # the reply's own verdict stands
            log.warning(
                "%s: no probability verdict (%s); the reply's own stands. A server without "
                'logprobs needs true_false_verdict = "reply"',
                question.id,
                exc,
            )
            continue
        _count(group[0], res)
        group[0].log.append(
            {
                "attempt": group[0].attempts,
                "kind": "verdict",
                "k": len(group[0].items),
                "prompt": prompt_text(verdict_request(question, group[0].items, gen)),
                "reply": " ".join(f"{t!r}:{lp:.3f}" for t, lp in res.top_logprobs[:5]),
            }
        )
        logodds = verdict_logodds(res.top_logprobs)
        for run in group:
            assert run.answer is not None
            run.verdict_logodds = logodds
            run.answer = apply_verdict(run.answer, logodds, gen.true_false_margin)


# ── answering ─────────────────────────────────────────────────────────────


def deepen(cfg: RetrievalConfig, level: int) -> RetrievalConfig:
    """Retry level n (1 = first try): n× the per-query hits (top_k and bm25_top_k, as
    KohakuRAG's k, 2k, 3k), n× the context units (no cut stays no cut) and n× the budget."""
    return dataclasses.replace(
        cfg,
        top_k=min(cfg.top_k * level, MAX_K),
        bm25_top_k=cfg.bm25_top_k * level,
        top_k_final=None if cfg.top_k_final is None else cfg.top_k_final * level,
        budget_chars=cfg.budget_chars * level,
    )


def counts_as_blank(answer: Answer | None) -> bool:
    """An abstention, or an answer citing no document (KohakuRAG retries both)."""
    return answer is not None and (answer.is_blank or not answer.ref_id)


@dataclass
class _Run:
    seed: int
    attempts: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    llm_calls: int = 0
    cached_calls: int = 0
    answer: Answer | None = None
    items: tuple[ContextItem, ...] = ()
    error: str = ""
    verdict_logodds: float | None = None
    log: list[dict[str, Any]] = dataclasses.field(default_factory=list)


def prompt_text(req: ChatRequest) -> str:
    """A request's messages as the model read them (roles as headers)."""
    return "\n\n".join(f"[{m.role}]\n{m.content}" for m in req.messages)


def _ask(
    chat: ChatModel,
    question: Question,
    items: list[ContextItem],
    gen: GenerationPart,
    runs: Sequence[_Run],
    images: ImageLoader | None = None,
    stage: Stage = SINGLE,
) -> list[ContextItem]:
    """Ask every run with `items`; on overflow, drop the lowest-ranked quarter and ask again.

    Returns the items the successful prompt used. Each run's counters and answer are updated.
    """
    if not runs:
        return items
    while True:
        # The prompt (sentence split, figure images) is built once; runs differ only by seed.
        shared = answer_request(question, items, gen, runs[0].seed, images, stage)
        reqs = [dataclasses.replace(shared, seed=r.seed) for r in runs]
        results = chat.complete_many(reqs)
        if any(isinstance(res, ContextOverflowError) for res in results) and items:
            items = items[: min(len(items) - 1, (len(items) * 3) // 4)]
            continue
        doc_ids = context_doc_ids(items)
        prompt = prompt_text(shared)
        for run, res in zip(runs, results, strict=True):
            run.attempts += 1
            run.items = tuple(items)
            reply = f"{type(res).__name__}: {res}" if isinstance(res, Exception) else res.text
            kind = "answer" if stage.name == "single" else f"answer ({stage.name})"
            run.log.append({"attempt": run.attempts, "kind": kind, "k": len(items), "prompt": prompt, "reply": reply})
            if isinstance(res, UnusableReply):  # a reply, though unusable: an abstention like bad JSON
                log.warning("%s: %s", question.id, res)
                run.answer = Answer.blank(question.answer_unit)
                continue
            if isinstance(res, Exception):  # a failed call: not an answer
                run.error = f"{type(res).__name__}: {res}"
                run.answer = Answer.blank(question.answer_unit)
                continue
            _count(run, res)
            answer = parse_reply(res.text, question, doc_ids)
            if gen.cite == "source":
                answer = cite_source(answer, items)
            run.answer = with_confidence(answer, res)
        return items


def with_confidence(answer: Answer, res: ChatResult) -> Answer:
    """The answer with the reply's mean token probability as its confidence (when known)."""
    if res.mean_logprob is None:
        return answer
    return dataclasses.replace(answer, confidence=float(np.exp(res.mean_logprob)))


def _count(run: _Run, res: ChatResult) -> None:
    run.llm_calls += 1
    run.cached_calls += int(res.cached)
    run.prompt_tokens += res.prompt_tokens
    run.completion_tokens += res.completion_tokens
    run.seconds += res.seconds


def answer_runs(
    question: Question,
    queries: Sequence[str],
    searcher: Searcher,
    chat: ChatModel,
    cfg: QAConfig,
    seeds: Sequence[int],
    first_context: Sequence[ContextItem] | None = None,
    images: ImageLoader | None = None,
) -> list[Prediction]:
    """One Prediction per seed (run i has seed seeds[i]). `first_context` is the level-1
    context when it was retrieved (and stored) before; deeper levels are searched here
    (`searcher` is the config's: `answering_searcher`). Each level asks as its `Stage` says."""
    search_cfg = search_config(question, cfg.retrieval)
    runs = [_Run(seed) for seed in seeds]
    level_items: dict[int, list[ContextItem]] = {
        1: list(first_context) if first_context is not None else searcher.search(queries, search_cfg)
    }
    pending = runs
    asked: tuple[list[str], Stage] | None = None  # the last attempt's snippets and stage
    for level in range(1, cfg.generation.max_retries + 2):
        if level not in level_items:
            try:
                level_items[level] = searcher.search(queries, deepen(search_cfg, level))
            except BackendError as exc:  # a search's LLM (diverse rerank) or reranker failed: a failure
                for run in pending:
                    run.error = f"{type(exc).__name__}: {exc}"
                break
        stage = stage_for(question, cfg.generation, level)
        items = level_items[level][: stage.k]
        # The same snippets asked the same way (k aside, which only cut them) as last time:
        # nothing more to find, a deeper retry would ask the same thing.
        prompt_key = ([i.node_id for i in items], dataclasses.replace(stage, k=None))
        if asked == prompt_key:
            break
        asked = prompt_key
        _ask(chat, question, items, cfg.generation, pending, images, stage)
        pending = [r for r in pending if counts_as_blank(r.answer) and not r.error]
        if not pending:
            break
    if is_true_false(question) and cfg.generation.true_false_verdict == "probability":
        _decide_true_false(chat, question, cfg.generation, runs)
    out = []
    for index, run in enumerate(runs):
        assert run.answer is not None
        out.append(
            Prediction(
                question_id=question.id,
                run=index,
                seed=run.seed,
                answer=run.answer,
                attempts=run.attempts,
                k_used=len(run.items),
                context_chars=sum(len(i.text) for i in run.items),
                prompt_tokens=run.prompt_tokens,
                completion_tokens=run.completion_tokens,
                seconds=run.seconds,
                llm_calls=run.llm_calls,
                cached_calls=run.cached_calls,
                error=run.error,
                verdict_logodds=run.verdict_logodds,
                context=run.items,
                debug=tuple(run.log),
            )
        )
    return out


def plan_for(question: Question, chat: ChatModel, cfg: QAConfig) -> tuple[str, ...]:
    if not cfg.retrieval.use_planner:
        return (question.question,)
    return plan_queries(question.question, chat, cfg.retrieval.planner_max_queries).queries


def answer_question(
    question: Question,
    retriever: Searcher,
    chat: ChatModel,
    cfg: QAConfig,
    seed: int = 0,
    images: ImageLoader | None = None,
    planner_chat: ChatModel | None = None,
    progress: Callable[[str], None] | None = None,
) -> Prediction:
    """Plan, retrieve and answer one question with one run (`seconds` is the wall time of all
    of it). `planner_chat` writes the queries when the config names a planner_model.
    `progress` hears each stage as it starts: "planning", "retrieving", "answering"."""
    say = progress or (lambda _stage: None)
    started = time.perf_counter()
    say("planning")
    queries = plan_for(question, planner_chat or chat, cfg)
    searcher = answering_searcher(retriever, cfg.retrieval, planner_chat or chat)
    if progress is not None:
        searcher = _ReportingSearcher(searcher, progress)
    (prediction,) = answer_runs(question, queries, searcher, chat, cfg, [seed], images=images)
    return dataclasses.replace(prediction, seconds=time.perf_counter() - started)


@dataclass(frozen=True)
class _ReportingSearcher:
    """A searcher that says "retrieving" before each search and "answering" after it (each
    search of an answer run, a deeper retry's included, is followed by an answer call)."""

    inner: Searcher
    progress: Callable[[str], None]

    def search(self, queries: Sequence[str], cfg: RetrievalConfig) -> list[ContextItem]:
        self.progress("retrieving")
        items = self.inner.search(queries, cfg)
        self.progress("answering")
        return items


def _one_line(text: str) -> str:
    return " ".join(text.split())
