"""cross-document questions without the LLM planner: the rule-based split into one
query per side compared (entity_split.py) and the `entity_queries = "rules"` option."""

from __future__ import annotations

import pytest

from kohaku_rag.answering.answer import plan_for
from kohaku_rag.answering.entity_split import entity_queries
from kohaku_rag.answering.qa_config import QAConfig, RetrievalPart
from kohaku_rag.answering.qa_config_file import qa_config_from_mapping
from kohaku_rag.answers.records import Question


@pytest.mark.parametrize(
    ("question", "queries"),
    [
        (
            "By what factor was the training cost of Falcon-40B greater than the budget for OPT-175B?",
            ("the training cost of Falcon-40B greater", "the budget for OPT-175B training cost greater"),
        ),
        (  # a short side keeps the quantity compared
            "What was the speedup in decoding throughput on H100 GPUs compared to A10 GPUs?",
            ("the speedup in decoding throughput on H100 GPUs", "A10 GPUs speedup decoding throughput"),
        ),
        (
            "By how much did memory bandwidth grow between the first TPU (2016) and the 2023 TPU v5e?",
            ("memory bandwidth grow the first TPU (2016)", "memory bandwidth grow the 2023 TPU v5e"),
        ),
        (
            "Which of the two schedulers - Round Robin or Shortest Job First - wastes less energy?",
            (
                "Round Robin Which of the two schedulers wastes less energy",
                "Shortest Job First Which of the two schedulers wastes less energy",
            ),
        ),  # fmt: skip
        (
            "How many car trips are equivalent to the emissions of training the 13B translation model?",
            ("car trips are", "the emissions of training the 13B translation model"),
        ),
        (
            "Do Smith et al. (2021) and Jones et al. (2023) report the same power draw for the A100?",
            (
                "Smith et al. (2021) and report the same power draw for the A100",
                "and Jones et al. (2023) report the same power draw for the A100",
            ),
        ),  # fmt: skip
    ],
)
def test_a_question_comparing_two_things_gets_one_query_per_side(question: str, queries: tuple[str, ...]) -> None:
    assert entity_queries(question) == queries


@pytest.mark.parametrize(
    "question",
    [
        "How much energy did training BLOOM consume?",
        "True or False: Egress costs could account for more than 90% of the total cost per VM.",  # a quantity
        "What is the difference between them?",  # sides without content
        "",
    ],
)
def test_a_question_about_one_thing_gets_none(question: str) -> None:
    assert entity_queries(question) == ()


def test_the_option_adds_the_sides_after_the_question_without_the_llm() -> None:
    q = Question("q1", "By what factor was the training cost of Falcon-40B greater than the budget for OPT-175B?", "x")
    cfg = QAConfig(questions="q.csv", retrieval=RetrievalPart(use_planner=False, entity_queries="rules"))
    assert plan_for(q, None, cfg) == (q.question, *entity_queries(q.question))
    off = QAConfig(questions="q.csv", retrieval=RetrievalPart(use_planner=False))
    assert plan_for(q, None, off) == (q.question,)
    # the default's retrieval hash is unchanged by the new key; "rules" changes it
    assert (
        QAConfig(questions="q.csv").retrieval_hash
        == QAConfig(questions="q.csv", retrieval=RetrievalPart(entity_queries="off")).retrieval_hash
    )
    assert cfg.retrieval_hash != off.retrieval_hash


def test_a_bad_value_is_refused_naming_the_key() -> None:
    with pytest.raises(ValueError, match=r'retrieval.entity_queries: "llm" is not one of the allowed values'):
        qa_config_from_mapping({"questions": "q.csv", "retrieval": {"entity_queries": "llm"}})
