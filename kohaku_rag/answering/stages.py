"""What each answering attempt of a question is: its context size, prompt rules and
temperature (HERO's question-type routing and two-stage generation, WattBot 2025).

The answering pipeline asks a question at retry levels 1, 2, ... while the reply abstains
(answer.py): level n searches with n x the hits, units and budget (`deepen`). A `Stage`
says how level n asks:

* default: the whole context, today's prompt, the config's temperature (the level's own
  deepening is the retry);
* `prompt_routing = "question_type"`: the type's instruction joins the prompt and the
  context is cut to the type's units (x the level);
* `two_stage = true`: level 1 is strict (HERO's stage 1: a small context, temperature
  `stage1_temperature`, "is_blank if the evidence is not enough"), later levels are relaxed
  (stage 2: a larger context, an answer inferred from partial evidence is allowed). Stage 2
  is therefore asked only when stage 1 abstains, and its context is the deeper level's.
"""

from __future__ import annotations

from dataclasses import dataclass

from kohaku_rag.answering.qa_config import GenerationPart
from kohaku_rag.answering.question_types import route_for
from kohaku_rag.answers.records import Question

__all__ = ["BLANK_RULE", "RELAXED_RULE", "SINGLE", "STRICT_RULE", "Stage", "stage_for"]

BLANK_RULE = "is_blank: true only if the context does not answer the question."
STRICT_RULE = (
    "is_blank: true if the evidence in the context is not enough to answer exactly; do not guess "
    "or compute from numbers the context does not give."
)
RELAXED_RULE = (
    "is_blank: true only if nothing in the context bears on the question. When the evidence is "
    "partial, infer the most likely answer from it and say so in the explanation."
)


@dataclass(frozen=True)
class Stage:
    """How one attempt asks: None/"" fields leave today's behaviour."""

    k: int | None = None  # context units kept (in rank order); None: all of the level's
    instruction: str = ""  # the question type's line in the prompt
    blank_rule: str = BLANK_RULE
    temperature: float | None = None  # None: the config's temperature
    name: str = "single"  # "single", "strict" or "relaxed" (in the debug log)


SINGLE = Stage()  # today's attempt: the whole context, today's prompt and temperature


def stage_for(question: Question, gen: GenerationPart, level: int) -> Stage:
    """The stage of retry level `level` (1 = the first attempt)."""
    routed = gen.prompt_routing == "question_type"
    route = route_for(question) if routed else None
    instruction = route.instruction if route is not None else ""
    if not gen.two_stage:
        return Stage(k=route.k * level if route is not None else None, instruction=instruction)
    if level == 1:
        k = route.k if route is not None else gen.stage1_k
        return Stage(k, instruction, STRICT_RULE, gen.stage1_temperature, "strict")
    k = (route.relaxed_k if route is not None else gen.stage2_k) * (level - 1)
    return Stage(k, instruction, RELAXED_RULE, None, "relaxed")
