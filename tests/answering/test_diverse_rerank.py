"""Marikarp's knowledge-aware diverse rerank (answering/diverse_rerank.py) and HERO's
text-only retrieval (RetrievalConfig.content): the bounded LLM calls, the cache, the
interleaving of the two element-set rankings, and table nodes kept out of a text-only
context, on a small indexed corpus and a fake chat server over HTTP."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Sequence
from pathlib import Path

import pytest

import kohaku_rag as kr
from kohaku_assets.runner import run_config
from kohaku_rag.answering.diverse_rerank import diverse_order, interleave, reranker_for
from kohaku_rag.answering.qa_config import QAConfig
from kohaku_rag.answering.qa_config_file import qa_config_from_mapping
from kohaku_rag.answering.qa_tables import compute_retrievals
from kohaku_rag.answering.stages import STRICT_RULE
from kohaku_rag.answers.records import Question
from kohaku_rag.indexing.index_config import IndexConfig
from kohaku_rag.lake.layout import Lake
from kohaku_rag.llm import CachedChat
from kohaku_rag.llm.openai_compat import OpenAIChat
from kohaku_rag.retrieval.bm25_reranker import Bm25Reranker
from kohaku_rag.retrieval.context import ContextItem
from kohaku_rag.retrieval.rerankers import RerankerSpec
from kohaku_rag.retrieval.retrieval_config import RetrievalConfig
from kohaku_rag.retrieval.retriever import open_retriever
from tests.support.chat_server import ChatServer
from tests.support.qa_server import QAServer, response_schema
from tests.support.rerank_server import RerankServer

FIRST, SECOND = ["power draw watts"], ["cooling water liters"]


def knowledge_reply(body: dict) -> str | None:
    """Two needed elements declared for any passage, split into FIRST and SECOND; None for
    a request that is not the diverse rerank's."""
    names = response_schema(body)["properties"]
    if "needed" in names:
        return json.dumps({"needed": FIRST + SECOND, "covered": FIRST})
    if "first" in names:
        return json.dumps({"first": FIRST, "second": SECOND})
    return None


class KnowledgeServer(ChatServer):
    def _echo(self, body, messages, key):  # noqa: ANN001 - the base class's hook
        return knowledge_reply(body)


class OverlapReranker:
    """A Reranker by shared words (query words found in the passage): transparent rankings."""

    def scores(self, query: str, passages: Sequence[str]) -> list[float]:
        words = set(re.findall(r"\w+", query.lower()))
        return [float(len(words & set(re.findall(r"\w+", p.lower())))) for p in passages]


def _item(node_id: str, text: str) -> ContextItem:
    return ContextItem(node_id.split(":")[0], node_id, "paragraph", 1, 0.0, text)


QUESTION = "How much did the site use?"
ITEMS = [
    _item("a:p0", "The site use was reported for the year, with power draw in watts and cooling water in liters."),
    _item("b:p0", "Power draw of the racks in watts."),
    _item("c:p0", "Power draw of the chillers in watts."),
    _item("d:p0", "Cooling water drawn in liters per day."),
    _item("e:p0", "Cooling water evaporated in liters."),
    _item("f:p0", "An unrelated paragraph."),
]


def test_interleave_alternates_keeps_orders_and_drops_repeats():
    assert interleave(["a", "b", "c"], ["x", "a", "y"]) == ["a", "x", "b", "y", "c"]
    assert interleave(["a", "b"], []) == ["a", "b"]
    assert interleave(["a"], ["a", "b", "c"]) == ["a", "b", "c"]


def test_diverse_order_sends_bounded_calls_interleaves_and_is_cached(tmp_path):
    with KnowledgeServer() as server:
        chat = CachedChat(OpenAIChat(server.base_url, "scripted", api_key_env=None), tmp_path / "llm")
        ordered, sets = diverse_order(QUESTION, ITEMS, OverlapReranker(), chat, n_know=2, max_chars=40)
        declared = [r.key for r in server.requests if "needed" in response_schema(r.body)["properties"]]
        assert len(server.requests) == 3 and len(declared) == 2  # n_know declarations + one summary
        # The initial rerank's top two (by the question) are the ones declared, each cut to 40
        # chars. The two calls are sent together, so they may arrive in either order.
        first = next(d for d in declared if ITEMS[0].text[:40] in d)
        assert ITEMS[0].text[:41] not in first
        assert any("Power draw of the racks" in d for d in declared if d is not first)
        assert (sets.first, sets.second) == (tuple(FIRST), tuple(SECOND))
        # The two element-set rankings interleaved: power, water, power, water ...
        assert [i.node_id for i in ordered] == ["a:p0", "d:p0", "b:p0", "e:p0", "c:p0", "f:p0"]
        # The question alone would have ranked both power paragraphs before the water ones.
        again, _ = diverse_order(QUESTION, ITEMS, OverlapReranker(), chat, n_know=2, max_chars=40)
        assert again == ordered and len(server.requests) == 3  # cached: no request sent


def test_unusable_knowledge_falls_back_to_the_initial_rerank():
    with ChatServer() as server:  # echoes: no JSON the schema wants
        chat = OpenAIChat(server.base_url, "scripted", api_key_env=None, structured="none")
        ordered, sets = diverse_order(QUESTION, ITEMS, OverlapReranker(), chat, n_know=2, max_chars=200)
    assert sets.fallback and ordered[0].node_id == "a:p0"


def test_a_refused_knowledge_call_is_a_failure_not_the_initial_rerank():
    """A 401 (any failed call) is not an unusable reply: the question's retrieval fails and
    is retried next run, instead of keeping the initial rerank for good."""
    from kohaku_rag.errors import BackendError

    with ChatServer(required_key="the-right-key") as server:  # no key sent: a 401
        chat = OpenAIChat(server.base_url, "scripted", api_key_env=None, max_retries=0)
        with pytest.raises(BackendError, match="HTTP 401"):
            diverse_order(QUESTION, ITEMS, OverlapReranker(), chat, n_know=2, max_chars=200)


# ── on an indexed corpus ──────────────────────────────────────────────────

CORPUS = {
    "chips": "# Chips\n\n## 1 Idle power\n\nThe idle power of the accelerator chips was measured at the wall.\n\n"
    "| chip | idle power |\n|---|---|\n| A1 | 35 W |\n| B2 | 52 W |\n",
    "water": "# Water\n\n## 1 Cooling\n\nCooling towers evaporated water, measured in liters per kWh.\n",
}


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("content")
    corpus = root / "corpus"
    corpus.mkdir()
    for doc_id, text in CORPUS.items():
        (corpus / f"{doc_id}.md").write_text(text)
    kr.index(corpus, root / "lake", progress=lambda _m: None)
    return root / "lake"


def test_text_only_content_leaves_table_nodes_out(lake):
    retriever = open_retriever(Lake(lake), IndexConfig())
    hybrid = retriever.search(["idle power of the chips"], RetrievalConfig())
    text = retriever.search(["idle power of the chips"], RetrievalConfig(content="text"))
    assert "table" in {i.attachment for i in hybrid}
    assert text and {i.attachment for i in text} == {"text"}
    assert [i.node_id for i in text] == [i.node_id for i in hybrid if i.attachment == "text"]


def test_bm25_reranker_weighs_rare_terms_with_the_index_idf(lake):
    retriever = open_retriever(Lake(lake), IndexConfig())
    assert retriever.bm25 is not None
    reranker = Bm25Reranker(retriever.bm25)
    passages = ["The towers evaporated water.", "The chips idle.", "Water and the chips of the towers."]
    # "evaporated" occurs once in the index, "towers" once, "chips" twice: rarer terms weigh more.
    scores = reranker.scores("evaporated towers", passages)
    assert scores[0] > scores[2] > scores[1] == 0.0
    assert reranker.scores("anything", []) == []


def test_routed_retrievals_search_each_type_in_its_nodes(lake):
    retriever = open_retriever(Lake(lake), IndexConfig())
    cfg = qa_config_from_mapping({"questions": "/q.csv", "retrieval": {"use_planner": False}})
    routed = qa_config_from_mapping(
        {"questions": "/q.csv", "retrieval": {"use_planner": False, "content_routing": "question_type"}}
    )
    questions = [
        Question("t", "Which of the following chips has the lowest idle power?", "W"),  # table: all nodes
        Question("e", "What is the name of the chips whose idle power was measured?", "is_blank"),  # term: text
    ]

    def attachments(c: QAConfig) -> dict[str, set[str]]:
        rows = compute_retrievals(questions, c, retriever, None)
        return {r["id"]: {i["attachment"] for i in json.loads(r["context"])} for r in rows}

    assert attachments(cfg) == {"t": {"text", "table"}, "e": {"text", "table"}}
    assert attachments(routed) == {"t": {"text", "table"}, "e": {"text"}}


def test_diverse_retrievals_through_the_pipeline_are_bounded_and_cached(lake, tmp_path):
    retriever = open_retriever(Lake(lake), IndexConfig())
    cfg = qa_config_from_mapping(
        {
            "questions": "/q.csv",
            "retrieval": {"use_planner": False, "diverse_rerank": True, "diverse_n_know": 2},
        }
    )
    questions = [Question("w", "How much water did the cooling towers evaporate?", "L/kWh")]
    with KnowledgeServer() as server:
        chat = CachedChat(OpenAIChat(server.base_url, "scripted", api_key_env=None), tmp_path / "llm")
        (row,) = compute_retrievals(questions, cfg, retriever, chat)
        assert not row["error"] and json.loads(row["context"])
        assert len(server.requests) == 3  # diverse_n_know declarations + the summary
        (again,) = compute_retrievals(questions, cfg, retriever, chat)
        assert len(server.requests) == 3 and again["context"] == row["context"]
    with pytest.raises(ValueError, match="no chat model"):
        compute_retrievals(questions, cfg, retriever, None)


class KnowingQAServer(QAServer):
    """The QA model of the answering tests, which also declares knowledge for the diverse rerank."""

    def _echo(self, body, messages, key):  # noqa: ANN001 - the base class's hook
        return knowledge_reply(body) or super()._echo(body, messages, key)


def test_a_hero_and_marikarp_config_runs_through_dagster(env):
    settings, _server, questions = env
    with KnowingQAServer() as server:
        llm = {"backend": "openai", "model": "scripted", "base_url": server.base_url, "api_key_env": None}
        folder = settings.lake.root / "configs"
        folder.mkdir(exist_ok=True)
        (folder / "both.json").write_text(
            json.dumps(
                {
                    "questions": str(questions),
                    "retrieval": {
                        "use_planner": False,
                        "content_routing": "question_type",
                        "diverse_rerank": True,
                        "diverse_n_know": 2,
                    },
                    "generation": {"llm": llm, "prompt_routing": "question_type", "two_stage": True, "max_retries": 2},
                }
            )
        )
        report = run_config(settings, "both")
        kinds = [next(iter(response_schema(r.body)["properties"])) for r in server.requests]
    assert report.metadata["scores"]["final"] == pytest.approx(1.0)
    # Three questions: each 2 declarations + 1 summary (retrieval), 1 strict answer that answers.
    assert kinds.count("needed") == 6 and kinds.count("first") == 3
    assert sum("ref_id" in response_schema(r.body)["properties"] for r in server.requests) == 3
    assert all(STRICT_RULE in r.key for r in server.requests if "ref_id" in response_schema(r.body)["properties"])


def test_diverse_questions_share_the_index_one_at_a_time_and_ask_the_llm_together(lake):
    retriever = open_retriever(Lake(lake), IndexConfig())
    cfg = qa_config_from_mapping(
        {"questions": "/q.csv", "retrieval": {"use_planner": False, "diverse_rerank": True, "diverse_n_know": 1}}
    )
    texts = [
        "How much water did the cooling towers evaporate?",
        "How many watts did the racks draw?",
        "What was the site's power usage effectiveness?",
    ]
    questions = [Question(f"q{n}", text, "L/kWh") for n, text in enumerate(texts)]
    with KnowledgeServer(default_delay=0.3) as server:
        chat = OpenAIChat(server.base_url, "scripted", api_key_env=None, max_concurrent=4)
        rows = compute_retrievals(questions, cfg, retriever, chat)
    assert all(not r["error"] and json.loads(r["context"]) for r in rows)
    # Per question one declaration, then the summary: strictly one after the other. Calls
    # in flight together are other questions', asked while one question holds the index.
    assert len(server.requests) == 6 and server.max_in_flight >= 2


def test_an_endpoint_down_fails_the_diverse_retrieval_not_the_run(lake):
    retriever = open_retriever(Lake(lake), IndexConfig())
    cfg = qa_config_from_mapping({"questions": "/q.csv", "retrieval": {"use_planner": False, "diverse_rerank": True}})
    questions = [Question("w", "How much water did the cooling towers evaporate?", "L/kWh")]
    with ChatServer(outage=True) as server:
        chat = OpenAIChat(server.base_url, "scripted", api_key_env=None, max_retries=0)
        (row,) = compute_retrievals(questions, cfg, retriever, chat)
    assert row["error"].startswith("RetriesExhausted") and row["context"] == "[]"


def test_the_cross_encoder_choice_ranks_with_the_search_reranker(lake):
    # diverse_reranker = "cross_encoder" uses the [retrieval.reranker] spec: here a hosted
    # /rerank endpoint on 127.0.0.1, which must receive the candidates.
    retriever = open_retriever(Lake(lake), IndexConfig())
    with RerankServer() as server:
        spec = RerankerSpec(url=server.root + "/v1/rerank", model="m")
        cfg = qa_config_from_mapping(
            {
                "questions": "/q.csv",
                "retrieval": {"diverse_rerank": True, "diverse_reranker": "cross_encoder"},
            }
        )
        part = dataclasses.replace(cfg.retrieval, search=dataclasses.replace(cfg.retrieval.search, reranker=spec))
        scores = reranker_for(part, retriever).scores("energy use", ["energy use of GPUs", "a cat"])
    assert scores[0] > scores[1] and len(server.requests) == 1
    with pytest.raises(ValueError, match=r"\[retrieval.reranker\]"):
        reranker_for(cfg.retrieval, retriever)
