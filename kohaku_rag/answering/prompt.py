"""The answering prompt and its reply schema.

* The prompt puts the context before the question (the paper's reordered prompt; the other
  order is an option), each snippet as `[ref_id=doc_id] text`, figure and table snippets
  under "Referenced media". Instructions are short and name the expected unit, so a 1.5B
  model follows them.
* The reply schema limits `ref_id` to an enum of the document ids present in the context:
  the model cannot cite a document it was not shown (reference-constrained decoding).
  Its properties are decoded in order, explanation before answer; for true/false
  statements (`quote_evidence`) an `evidence` field first copies one context sentence,
  chosen from an enum of the context's sentences, into `supporting_materials`.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kohaku_rag.answering.choose import candidates, choose_rule, value_schema
from kohaku_rag.answering.qa_config import GenerationPart
from kohaku_rag.answering.stages import BLANK_RULE, SINGLE, Stage
from kohaku_rag.answers.answer_forms import (
    asks_for_several,
    asks_to_compute,
    asks_true_false,
    several_values_rule,
)
from kohaku_rag.answers.normalise import is_blank_value
from kohaku_rag.answers.records import Question
from kohaku_rag.document.table_record import table_text
from kohaku_rag.llm import ChatRequest, Message
from kohaku_rag.parse.sentences import split_sentences
from kohaku_rag.retrieval.context import ContextItem

# What every answering and verdict prompt opens with, word for word: their KV state is
# computed once (llm/prefix_states.py), and a true/false verdict, whose prompt then repeats
# the answer prompt's context, continues from the answer's KV state (verdict.py). When to
# abstain is the task's `blank_rule`; the reply schema makes the reply JSON.
SYSTEM = "You answer questions using only the context passages. Each passage starts with its [ref_id=...]."
EXPLAIN_RULE = "explanation: a few words quoting the fact from the context."
SHORT_EXPLAIN_RULE = "explanation: one short sentence naming the fact in the context."
WORDS_RULE = "answer: the answer in a few words."
REF_RULE = "ref_id: the ref_id of each passage you used."
# The explanation's length in characters, at most: it bounds the reply's generation time on a
# slow CPU model; an explanation cut there is shortened to its last whole sentence or word
# (reply.py), never shown cut mid-word.
EXPLANATION_CAP = 120
SHORT_EXPLANATION_CAP = 60

# Words of the field rules that no answer holds. The bundled 1.5B model now and then copies
# a rule into its field (answer "the answer in a few words", answer_value "only the number
# in percent (no unit, no commas)"): such a field said nothing (reply.py reads it as empty).
RULE_PHRASES = (
    "the answer in a few words",
    "only the number in",
    "no unit, no commas",
    "a range as [low,high]",
    "a few words quoting the fact",
    "one short sentence naming the fact",
    "the exact name or term as written",
    "the ref_id of each passage",
)


def copies_a_rule(text: str) -> bool:
    """Whether a reply field holds a field rule's own words rather than an answer."""
    flat = " ".join(text.lower().split())
    return any(phrase in flat for phrase in RULE_PHRASES)


def system_prompt(gen: GenerationPart) -> str:
    """The answering prompt's system message, which the verdict and the support check repeat
    (they continue from the answer's KV state). With `rules_in_system`, the field rules that
    no question changes join it, so every answering prompt opens with the same tokens."""
    if not gen.rules_in_system:
        return SYSTEM
    explain = SHORT_EXPLAIN_RULE if gen.reply_order == "value_first" else EXPLAIN_RULE
    return "\n".join([SYSTEM, "Reply with the JSON asked for. Its fields:", explain, WORDS_RULE, REF_RULE])


MEDIA = ("image", "table", "page")
OPERAND_NAMES = ("a", "b", "c", "d", "e")  # compute.py's operands


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


def table_block(item: ContextItem) -> str:
    """A table as the model reads it: its caption, then one record per row, each on its own
    line (table_record.row_record), so no cell has to be aligned with a header by counting.
    Made from the item's record; a table the parser kept as plain lines shows those."""
    if item.table is not None:
        lines = [" ".join(ln.split()) for ln in table_text(item.table).split("\n") if ln.strip()]
    else:
        lines = [" ".join(ln.split()) for ln in item.text.split("\n") if ln.strip()]
    return "\n".join([lines[0], *(f"  {ln}" for ln in lines[1:])]) if lines else ""


def format_context(items: Sequence[ContextItem], titles: bool = False) -> str:
    # Tables stay in rank order among the text passages, their rows on separate lines.
    text = [
        f"[ref_id={i.doc_id}] {snippet_source(i, titles)}"
        + (f"(table, page {i.page}) {table_block(i)}" if i.attachment == "table" else marked_text(i))
        for i in items
        if i.attachment not in MEDIA or i.attachment == "table"
    ]
    media = [
        f"[ref_id={i.doc_id}] {snippet_source(i, titles)}({i.attachment}, page {i.page}) {marked_text(i)}"
        for i in items
        if i.attachment in MEDIA and i.attachment != "table"
    ]
    parts = ["Context:", *text] if text else ["Context: (none)"]
    if media:
        parts += ["", "Referenced media:", *media]
    return "\n".join(parts)


# "True or False: ..." / "true/false - ...": the statement follows the prefix and its punctuation.


def is_true_false(question: Question) -> bool:
    return asks_true_false(question)


@dataclass(frozen=True)
class ReplyFields:
    """Fields a feature adds to the reply (table_cells.py's named cells): their JSON-schema
    properties, written after the explanation (before the value, in value-first order), and
    the one rule line that tells the model how to fill them."""

    properties: Mapping[str, Any]
    rule: str


def build_messages(
    question: Question,
    items: Sequence[ContextItem],
    reordered: bool = True,
    titles: bool = False,
    quote: bool = False,
    instruction: str = "",
    blank_rule: str = BLANK_RULE,
    compute: bool = False,
    options: Sequence[str] = (),
    value_first: bool = False,
    system: str = SYSTEM,
    extra_rule: str = "",
) -> tuple[Message, ...]:
    """The answering prompt. `instruction` (a question type's, stages.py) follows the unit
    line; `blank_rule` says when to abstain (the strict or relaxed stage's, or today's);
    `compute` asks for operands and an expression (compute.py); `options` are the candidate
    values answer_value chooses from (choose.py); `value_first` lists the fields in the
    value-first order (answer_schema); a `system` that states the fixed field rules
    (system_prompt) leaves them out of the task after the context."""
    unit = question.answer_unit.strip()
    if unit_is_given(unit):
        unit_line = f"Answer unit: {unit}"
        value_rule = f"answer_value: only the number in {unit} (no unit, no commas), or a range as [low,high]."
        if options:
            unit_line += f"\nCandidate values (in {unit}): {', '.join(options)}"
            value_rule = choose_rule(compute)
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
    extra = [extra_rule] if extra_rule else []
    if value_first:
        fields = [*([COMPUTE_RULE] if compute else []), *extra, value_rule, REF_RULE, WORDS_RULE, SHORT_EXPLAIN_RULE]
    else:
        fields = [EXPLAIN_RULE, *extra, *([COMPUTE_RULE] if compute else []), WORDS_RULE, value_rule, REF_RULE]
    if system != SYSTEM:  # the fixed rules are in the system prompt
        fields = [f for f in fields if f not in (EXPLAIN_RULE, SHORT_EXPLAIN_RULE, WORDS_RULE, REF_RULE)]
    task = "\n".join(
        [
            f"Question: {question.question}",
            unit_line,
            *([instruction] if instruction else []),
            "",
            "Fill in the JSON:",
            *evidence_rule,
            *fields,
            blank_rule,
        ]
    )
    if any(i.marks for i in items):
        task = "Sentences in **bold** share the most words with the question.\n" + task
    context = format_context(items, titles)
    user = f"{context}\n\n{task}" if reordered else f"{task}\n\n{context}"
    return (Message("system", system), Message("user", user))


def answer_schema(
    doc_ids: Sequence[str],
    true_false: bool = False,
    evidence: Sequence[str] = (),
    compute: bool = False,
    options: Sequence[str] = (),
    value_first: bool = False,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The reply's JSON schema; ref_id may only name the given documents. With `evidence`
    (context sentences), the reply first copies one of them verbatim. The unit is the
    question's, so the reply does not write it: a forced `"answer_unit": "is_blank"` right
    before `is_blank` led the embedded model to abstain after giving the right answer.
    `value_first`: the value and its references right after the evidence (and a computed
    answer's operands), then the answer words and a shorter explanation."""
    refs: dict[str, Any] = (
        {"type": "array", "items": {"type": "string", "enum": list(doc_ids)}, "minItems": 1, "maxItems": 3}
        if doc_ids
        else {"type": "array", "items": {"type": "string"}, "maxItems": 0}
    )
    # A free string, not a number pattern, for questions with a unit: constrained to a number
    # or a "[low,high]" pattern, the bundled model wrote ranges as "80" or "300,1000"
    # (bench/answering/answer_settings.py, 2026-11-24: WattBot train 0.646 -> 0.609).
    value: dict[str, Any] = (
        {"type": "string", "enum": ["1", "0"]} if true_false else {"type": "string", "maxLength": 60}
    )
    if options:
        value = value_schema(options, compute)
    quote: dict[str, Any] = {"evidence": {"type": "string", "enum": list(evidence)}} if evidence else {}
    working = operand_schema(doc_ids) if compute else {}
    # Short string caps bound the generation time on a slow CPU model. Properties are
    # written in this order, so the model quotes before it commits to an answer.
    words: dict[str, Any] = {"type": "string", "maxLength": 80}
    properties: dict[str, Any] = (
        {
            **quote,
            **working,
            **(extra or {}),
            "answer_value": value,
            "ref_id": refs,
            "answer": words,
            "explanation": {"type": "string", "maxLength": SHORT_EXPLANATION_CAP},
            "is_blank": {"type": "boolean"},
        }
        if value_first
        else {
            **quote,
            "explanation": {"type": "string", "maxLength": EXPLANATION_CAP},
            **(extra or {}),
            **working,
            "answer": words,
            "answer_value": value,
            "ref_id": refs,
            "is_blank": {"type": "boolean"},
        }
    )
    return {
        "title": "answer",
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


def operand_schema(doc_ids: Sequence[str]) -> dict[str, Any]:
    """The reply's `operands` (up to 5) and `expression` properties."""
    ref: dict[str, Any] = {"type": "string", "enum": list(doc_ids)} if doc_ids else {"type": "string"}
    return {
        "operands": {
            "type": "array",
            "minItems": 1,
            "maxItems": len(OPERAND_NAMES),
            "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "enum": list(OPERAND_NAMES)},
                    "value": {"type": "string", "maxLength": 24},
                    "unit": {"type": "string", "maxLength": 30},
                    "ref_id": ref,
                },
                "required": ["name", "value", "unit", "ref_id"],
                "additionalProperties": False,
            },
        },
        "expression": {"type": "string", "maxLength": 60},
    }


COMPUTE_RULE = (
    "operands: each number you use, copied from the context (name a, b, ...; value; its unit; "
    "the ref_id it came from). expression: the arithmetic over those names that gives the "
    'answer (e.g. "a / b", "(a - b) / b * 100", "a * 24"), or "a" when the context states it.'
)


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


def computes(question: Question, gen: GenerationPart) -> bool:
    """Whether the reply writes its working (compute = "expression", or "asked" and the
    question's wording asks for a computation; a question with a unit; not one asking for
    several values: a computed result is one number, it would replace the list)."""
    return (
        (gen.compute == "expression" or (gen.compute == "asked" and asks_to_compute(question)))
        and unit_is_given(question.answer_unit)
        and not is_true_false(question)
        and not asks_for_several(question)
    )


def explanation_cap(gen: GenerationPart) -> int:
    """The reply schema's explanation length for this config's field order."""
    return SHORT_EXPLANATION_CAP if gen.reply_order == "value_first" else EXPLANATION_CAP


def choices(question: Question, items: Sequence[ContextItem], gen: GenerationPart) -> list[str]:
    """The candidate values answer_value chooses from ([] when it is free)."""
    if gen.choose != "candidates" or not unit_is_given(question.answer_unit) or is_true_false(question):
        return []
    return candidates(items, question.answer_unit.strip())


def answer_request(
    question: Question,
    items: Sequence[ContextItem],
    gen: GenerationPart,
    seed: int,
    images: ImageLoader | None = None,
    stage: Stage = SINGLE,
    fields: ReplyFields | None = None,
) -> ChatRequest:
    true_false = is_true_false(question)
    quote = gen.quote_evidence == "all" or (gen.quote_evidence == "true_false" and true_false)
    evidence = evidence_sentences(items) if quote else []
    compute = computes(question, gen)
    options = choices(question, items, gen)
    value_first = gen.reply_order == "value_first"
    system, user = build_messages(
        question,
        items,
        gen.use_reordered_prompt,
        gen.snippet_titles,
        bool(evidence),
        stage.instruction,
        stage.blank_rule,
        compute,
        options,
        value_first,
        system_prompt(gen),
        fields.rule if fields else "",
    )
    attached = figure_images(items, gen.img_k, images)
    if attached:
        user = Message(user.role, user.content, images=attached)
    return ChatRequest(
        (system, user),
        temperature=gen.temperature if stage.temperature is None else stage.temperature,
        max_tokens=gen.max_tokens,
        seed=seed,
        json_schema=answer_schema(
            context_doc_ids(items),
            true_false,
            evidence,
            compute,
            options,
            value_first,
            fields.properties if fields else None,
        ),
        reply_logprobs=gen.reply_confidence,
    )


def prompt_text(req: ChatRequest) -> str:
    """A request's messages as the model read them (roles as headers)."""
    return "\n\n".join(f"[{m.role}]\n{m.content}" for m in req.messages)


def _one_line(text: str) -> str:
    return " ".join(text.split())
