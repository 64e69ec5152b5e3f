"""abstain = "unsupported": one more one-word call asks whether the context states the answer;
below the margin the answer becomes a blank that the 2026 scorer counts as an abstention."""

from __future__ import annotations

import json
import math

import pytest

from kohaku_rag.answering import qa_tables as st
from kohaku_rag.answering.answer import answer_runs
from kohaku_rag.answering.prompt import answer_request
from kohaku_rag.answering.qa_config import GenerationPart, QAConfig, RetrievalPart, hashed_fields
from kohaku_rag.answering.support_check import apply_support, proposed_answer, support_logodds, support_request
from kohaku_rag.answers.records import Answer, Question
from kohaku_rag.evaluation import wattbot2026
from kohaku_rag.llm.openai_compat import OpenAIChat
from kohaku_rag.retrieval.context import ContextItem
from tests.support.chat_server import ChatServer, Fault

ITEM = ContextItem("gpu", "gpu:sec0:p0", "paragraph", 1, 1.0, "The A100 drew 400 W in training runs.")
QUESTION = Question("q1", "How much water did training the model consume?", "liters")
# The 1.5B model's typical reply to an unanswerable question: a number the context states
# for something else.
REPLY = json.dumps(
    {"explanation": "it drew", "answer": "400 liters", "answer_value": "400", "ref_id": ["gpu"], "is_blank": False}
)


class _FixedSearcher:
    def search(self, queries, cfg):
        return [ITEM]


def _cfg(**gen) -> QAConfig:
    return QAConfig(
        questions="q.csv",
        retrieval=RetrievalPart(use_planner=False),
        generation=GenerationPart(abstain="unsupported", **gen),
    )


def test_support_logodds_pool_spellings_and_the_answer_is_shown_with_its_unit():
    assert support_logodds([("Yes", -1.0), (" yes", -1.0), ("No", -2.0)]) == pytest.approx(math.log(2) + 1.0)
    assert support_logodds([("True", -0.1)]) is None
    assert proposed_answer(Answer("400 W", "400", "W", ("gpu",), "")) == "400 W"
    assert proposed_answer(Answer("ML.ENERGY", "ML.ENERGY", "is_blank", ("a",), "")) == "ML.ENERGY"
    answered = Answer("400 liters", "400", "liters", ("gpu",), "it drew")
    assert apply_support(answered, -0.5, margin=0.0, unit="liters").is_blank
    assert apply_support(answered, 0.5, margin=0.0, unit="liters") == answered
    assert apply_support(answered, None, margin=0.0, unit="liters") == answered  # no probabilities: kept
    request = support_request(QUESTION, [ITEM], answered, GenerationPart())
    assert request.max_tokens == 1 and request.reuse_prefix
    assert "Proposed answer: 400 liters" in request.messages[-1].content
    with pytest.raises(ValueError, match="abstain"):
        GenerationPart(abstain="sometimes")


def test_an_unsupported_answer_becomes_a_clean_abstention_and_a_supported_one_stays():
    gen = _cfg().generation
    answered = Answer("400 liters", "400", "liters", ("gpu",), "it drew")
    check = support_request(QUESTION, [ITEM], answered, gen).messages[-1].content
    with ChatServer() as server:
        chat = OpenAIChat(server.base_url, "scripted", api_key_env=None, max_retries=0)
        answer_key = answer_request(QUESTION, [ITEM], gen, seed=0).messages[-1].content
        # Below the margin (log-odds -1.0 < 0.0): a blank; two runs with the same answer share one check.
        server.script(answer_key, Fault(content=REPLY), Fault(content=REPLY))
        server.script(check, Fault(content="No", top_logprobs=(("No", -0.4), ("Yes", -1.4))))
        runs = answer_runs(QUESTION, [QUESTION.question], _FixedSearcher(), chat, _cfg(), [0, 1])
        assert [r.answer.is_blank for r in runs] == [True, True]
        assert [r.support_logodds for r in runs] == [pytest.approx(-1.0)] * 2
        assert [r.llm_calls for r in runs] == [2, 1]
        assert [d["kind"] for d in runs[0].debug] == ["answer", "support"]
        assert st.prediction_from_row(runs[0].as_row()).support_logodds == pytest.approx(-1.0)
        # The blank is what the 2026 scorer counts as a right abstention on an unanswerable question.
        gold = Question("q1", QUESTION.question, "liters", gold=Answer("is_blank", "is_blank", "liters", (), ""))
        assert wattbot2026.score_question(gold, runs[0].answer).total == pytest.approx(1.0)
        # The margin decides: at -2.0 the same log-odds keep the answer.
        server.script(answer_key, Fault(content=REPLY))
        server.script(check, Fault(content="No", top_logprobs=(("No", -0.4), ("Yes", -1.4))))
        (run,) = answer_runs(QUESTION, [QUESTION.question], _FixedSearcher(), chat, _cfg(abstain_margin=-2.0), [0])
        assert run.answer.answer_value == "400" and run.support_logodds == pytest.approx(-1.0)


def test_without_probabilities_the_answer_stands_and_the_log_says_what_to_set(caplog):
    gen = _cfg().generation
    answered = Answer("400 liters", "400", "liters", ("gpu",), "it drew")
    with ChatServer() as server:
        chat = OpenAIChat(server.base_url, "scripted", api_key_env=None, max_retries=0)
        server.script(answer_request(QUESTION, [ITEM], gen, seed=0).messages[-1].content, Fault(content=REPLY))
        server.script(support_request(QUESTION, [ITEM], answered, gen).messages[-1].content, Fault(omit_logprobs=True))
        with caplog.at_level("WARNING", logger="kohaku_rag.answer"):
            (run,) = answer_runs(QUESTION, [QUESTION.question], _FixedSearcher(), chat, _cfg(), [0])
    assert run.answer.answer_value == "400" and run.support_logodds is None and not run.error
    assert 'abstain = "off"' in caplog.text


def test_the_default_config_keeps_its_hashes():
    """abstain_margin is a key added later: at its default it stays out of the hash, so
    predictions stored before it existed are still the default's."""
    assert "abstain_margin" not in hashed_fields(GenerationPart())
    plain = QAConfig(questions="q.csv")
    moved = QAConfig(questions="q.csv", generation=GenerationPart(abstain_margin=1.0))
    assert plain.generation_hash != moved.generation_hash
    assert (
        plain.generation_hash
        == QAConfig(questions="q.csv", generation=GenerationPart(abstain_margin=0.0)).generation_hash
    )
