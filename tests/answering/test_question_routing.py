"""HERO's question-type routing and two-stage generation (question_types.py, stages.py):
the detected type's instruction and context size reach the prompt; stage 2 runs only when
stage 1 abstains, with the larger context and the relaxed rule; the config keys are
validated and hashed only when set."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest

from kohaku_rag.answering.answer import answer_runs
from kohaku_rag.answering.prompt import build_messages
from kohaku_rag.answering.qa_config import GenerationPart, QAConfig
from kohaku_rag.answering.qa_config_file import dump_toml, load_qa_config, qa_config_from_mapping
from kohaku_rag.answering.question_types import ROUTES, detect_type, route_for, search_config
from kohaku_rag.answering.stages import BLANK_RULE, RELAXED_RULE, STRICT_RULE
from kohaku_rag.answers.records import Question
from kohaku_rag.llm.openai_compat import OpenAIChat
from kohaku_rag.retrieval.context import ContextItem, pack
from kohaku_rag.retrieval.retrieval_config import RetrievalConfig
from tests.support.chat_server import ChatServer
from tests.support.qa_server import response_schema

# Made-up questions, one per type (none is a WattBot question).
EXAMPLES = {
    "table_extraction": Question("t", "Which of the following chips has the lowest idle power?", "W"),
    "score_extraction": Question("s", "What accuracy did the pruned network reach on the test set?", "percent"),
    "numeric_counting": Question("n", "How many nodes did the cluster have?", "nodes"),
    "model_specific": Question("m", "What energy did Falcon-40B use per query?", "Wh"),
    "term_extraction": Question("e", "What is the name of the cooling method described?", "is_blank"),
    "general": Question("g", "What was the electricity use of the campus in 2021?", "MWh"),
}


@pytest.mark.parametrize("kind", list(EXAMPLES))
def test_each_type_is_detected_by_its_patterns(kind):
    assert detect_type(EXAMPLES[kind]) == kind


def test_statements_are_general_and_unitless_questions_ask_for_a_term():
    assert detect_type(Question("a", "True or False: the chip drew 40 W.", "is_blank")) == "general"
    assert detect_type(Question("b", "Who released the dataset?", "is_blank")) == "term_extraction"
    assert detect_type(Question("c", "Who released the dataset?", "kg")) == "general"


class ListSearcher:
    """An in-memory Searcher over a fixed ranking: the real cut and budget packing."""

    def __init__(self, items: Sequence[ContextItem]) -> None:
        self.items = list(items)
        self.calls: list[RetrievalConfig] = []

    def search(self, queries: Sequence[str], cfg: RetrievalConfig) -> list[ContextItem]:
        self.calls.append(cfg)
        return pack(self.items[: cfg.top_k_final], cfg.budget_chars)


def _items(n: int) -> list[ContextItem]:
    return [
        ContextItem(f"doc{i}", f"doc{i}:sec0:p0", "paragraph", 1, 1.0, f"Passage {i} about chips and power draw.")
        for i in range(n)
    ]


class StageServer(ChatServer):
    """Abstains when the prompt carries the strict rule (`abstain_strict`), answers otherwise,
    citing the first document of the context."""

    abstain_strict = True
    always_blank = False

    def _echo(self, body, messages, key):  # noqa: ANN001 - the base class's hook
        enum = response_schema(body)["properties"]["ref_id"]["items"]["enum"]
        blank = self.always_blank or (self.abstain_strict and STRICT_RULE in key)
        return json.dumps(
            {"explanation": "x", "answer": "40 W", "answer_value": "" if blank else "40", "ref_id": enum[:1]}
            | {"is_blank": blank}
        )


def _snippets(prompt: str) -> int:
    return sum(line.startswith("[ref_id=") for line in prompt.splitlines())


def _cfg(**generation) -> QAConfig:
    return QAConfig(questions="/q.csv", generation=GenerationPart(**generation))


def test_routed_prompt_carries_the_types_instruction_and_context_size():
    question = EXAMPLES["table_extraction"]
    route = route_for(question)
    with StageServer() as server:
        chat = OpenAIChat(server.base_url, "scripted", api_key_env=None)
        (pred,) = answer_runs(
            question, [question.question], ListSearcher(_items(12)), chat, _cfg(prompt_routing="question_type"), [0]
        )
        (request,) = server.requests
    assert route.instruction and route.instruction in request.key
    assert _snippets(request.key) == route.k == pred.k_used == 3
    assert BLANK_RULE in request.key
    # The same question unrouted: today's prompt, the whole context.
    with StageServer() as server:
        chat = OpenAIChat(server.base_url, "scripted", api_key_env=None)
        answer_runs(question, [question.question], ListSearcher(_items(12)), chat, _cfg(), [0])
        (request,) = server.requests
    assert route.instruction not in request.key and _snippets(request.key) == 12


def test_default_prompt_is_todays():
    question, items = EXAMPLES["general"], _items(2)
    system, user = build_messages(question, items)
    assert user.content.endswith(BLANK_RULE) and "Question: " in user.content
    assert all(route.instruction not in user.content for route in ROUTES.values() if route.instruction)


def test_stage_two_runs_only_when_stage_one_abstains_with_more_context_and_the_relaxed_rule():
    question = EXAMPLES["general"]
    searcher = ListSearcher(_items(20))
    cfg = _cfg(two_stage=True, max_retries=2, stage1_k=3, stage2_k=8, temperature=0.5)
    with StageServer() as server:
        chat = OpenAIChat(server.base_url, "scripted", api_key_env=None)
        (pred,) = answer_runs(question, [question.question], searcher, chat, cfg, [0])
        strict, relaxed = (r.body for r in server.requests)
        keys = [r.key for r in server.requests]
    assert STRICT_RULE in keys[0] and _snippets(keys[0]) == 3 and strict["temperature"] == 0.1
    assert RELAXED_RULE in keys[1] and _snippets(keys[1]) == 8 and relaxed["temperature"] == 0.5
    assert pred.answer.answer_value == "40" and pred.attempts == 2 and pred.k_used == 8
    assert [d["kind"] for d in pred.debug] == ["answer (strict)", "answer (relaxed)"]
    # Stage 2's context is the deeper search's (level 2: 2x the units and budget).
    assert searcher.calls[-1].top_k_final == 2 * RetrievalConfig().top_k_final

    # Stage 1 answers: no stage 2.
    with StageServer() as server:
        server.abstain_strict = False
        chat = OpenAIChat(server.base_url, "scripted", api_key_env=None)
        (pred,) = answer_runs(question, [question.question], ListSearcher(_items(20)), chat, cfg, [0])
        assert len(server.requests) == 1 and STRICT_RULE in server.requests[0].key
    assert pred.attempts == 1 and pred.k_used == 3


def test_two_stage_with_routing_uses_the_types_sizes():
    question = EXAMPLES["score_extraction"]
    route = route_for(question)
    cfg = _cfg(two_stage=True, max_retries=2, prompt_routing="question_type")
    with StageServer() as server:
        chat = OpenAIChat(server.base_url, "scripted", api_key_env=None)
        answer_runs(question, [question.question], ListSearcher(_items(20)), chat, cfg, [0])
        first, second = (r.key for r in server.requests)
    assert (_snippets(first), _snippets(second)) == (route.k, route.relaxed_k) == (3, 10)
    assert route.instruction in first and route.instruction in second


def test_content_routing_sends_each_type_to_its_nodes():
    base = QAConfig(questions="/q.csv")
    routed = qa_config_from_mapping({"retrieval": {"content_routing": "question_type"}})
    assert search_config(EXAMPLES["term_extraction"], base.retrieval).content == "all"
    assert search_config(EXAMPLES["term_extraction"], routed.retrieval).content == "text"
    assert search_config(EXAMPLES["table_extraction"], routed.retrieval).content == "all"


def test_new_keys_leave_existing_hashes_alone_and_change_their_own_part():
    base = QAConfig(questions="/q.csv")
    explicit = qa_config_from_mapping(
        {
            "questions": "/q.csv",
            "retrieval": {"content_routing": "off", "diverse_rerank": False, "content": "all"},
            "generation": {"prompt_routing": "off", "two_stage": False, "stage1_k": 3},
        }
    )
    assert (explicit.retrieval_hash, explicit.generation_hash) == (base.retrieval_hash, base.generation_hash)
    two = qa_config_from_mapping({"questions": "/q.csv", "generation": {"two_stage": True, "max_retries": 2}})
    assert two.retrieval_hash == base.retrieval_hash and two.generation_hash != base.generation_hash
    routed = qa_config_from_mapping({"questions": "/q.csv", "retrieval": {"content_routing": "question_type"}})
    assert routed.retrieval_hash != base.retrieval_hash


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"generation": {"prompt_routing": "hero"}}, 'generation.prompt_routing: "hero" is not one of'),
        ({"generation": {"two_stage": True, "max_retries": 0}}, "two_stage needs max_retries >= 1"),
        ({"generation": {"stage1_k": 0}}, "generation.stage1_k: stage1_k must be at least 1"),
        ({"retrieval": {"content": "tables"}}, 'retrieval.content: "tables" is not one of'),
        ({"retrieval": {"content_routing": True}}, "retrieval.content_routing: true is not one of"),
    ],
)
def test_bad_values_are_refused_by_key(data, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        qa_config_from_mapping(data)


def test_config_files_round_trip_the_new_keys(tmp_path):
    data = {
        "questions": "/q.csv",
        "retrieval": {
            "content": "text",
            "content_routing": "question_type",
            "diverse_rerank": True,
            "diverse_reranker": "embedding",
            "diverse_n_know": 3,
        },
        "generation": {
            "prompt_routing": "question_type",
            "two_stage": True,
            "max_retries": 2,
            "stage1_temperature": 0.2,
        },
    }
    cfg = qa_config_from_mapping(data)
    path = tmp_path / "routed.toml"
    path.write_text(dump_toml(cfg))
    again = load_qa_config(path)
    assert again == cfg and again.generation_hash == cfg.generation_hash
    assert again.retrieval.search.content == "text" and again.retrieval.diverse_n_know == 3


def test_a_retry_that_would_ask_the_same_thing_is_not_sent():
    question = EXAMPLES["general"]
    cfg = _cfg(two_stage=True, stage1_k=2, stage2_k=4, max_retries=3)
    with StageServer() as server:
        server.always_blank = True
        chat = OpenAIChat(server.base_url, "scripted", api_key_env=None)
        # Three snippets exist: stage 1 reads 2, stage 2 all 3; level 3 would read the same 3
        # with the same relaxed prompt, so it is not asked.
        (pred,) = answer_runs(question, [question.question], ListSearcher(_items(3)), chat, cfg, [0])
        assert [_snippets(r.key) for r in server.requests] == [2, 3]
    assert pred.answer.is_blank and pred.attempts == 2
