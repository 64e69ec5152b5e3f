"""What an answer cites (`[generation] cite`): the document stating it, or all the reply lists."""

import pytest
from test_qa import write_config

from kohaku_rag.answering.answer import answer_question
from kohaku_rag.answering.citing import cite_source
from kohaku_rag.answering.qa_config import QAConfig
from kohaku_rag.answering.qa_config_file import qa_config_from_mapping
from kohaku_rag.answers.records import Answer, Question
from kohaku_rag.llm.openai_compat import OpenAIChat
from kohaku_rag.retrieval.context import ContextItem
from kohaku_rag.retrieval.retriever import open_retriever
from tests.support.qa_server import response_schema


def item(doc: str, text: str) -> ContextItem:
    return ContextItem(doc, f"{doc}:sec0:p0", "paragraph", 1, 1.0, text)


CONTEXT = [
    item("dodge2022", "Training BERT emitted as much CO2 as a flight, as Strubell et al. report."),
    item("strubell2019", "BERT base on 64 V100 GPUs for 79 hours: 1438 lbs of CO2e."),
]


def answer(value: str, refs: tuple[str, ...], quote: str = "") -> Answer:
    return Answer(answer=value, answer_value=value, answer_unit="lbs", ref_id=refs, supporting_materials=quote)


def test_source_is_the_first_cited_document_stating_the_value():
    assert cite_source(answer("1438", ("dodge2022", "strubell2019")), CONTEXT).ref_id == ("strubell2019",)
    # No cited snippet states it (a computed value): the first document the reply lists.
    assert cite_source(answer("1437", ("dodge2022", "strubell2019")), CONTEXT).ref_id == ("dodge2022",)
    # A true/false verdict states no value: the document holding the quoted evidence sentence.
    quoted = answer("1", ("dodge2022", "strubell2019"), "BERT base on 64 V100 GPUs for 79 hours: 1438 lbs of CO2e.")
    assert cite_source(quoted, CONTEXT).ref_id == ("strubell2019",)
    assert cite_source(answer("1438", ("dodge2022",)), CONTEXT).ref_id == ("dodge2022",)
    assert cite_source(Answer.blank("lbs"), CONTEXT) == Answer.blank("lbs")


def test_answers_cite_their_source_through_the_server_unless_told_to_keep_the_reply(env):
    settings, server, questions = env
    retriever = open_retriever(settings.lake, settings.index_config())
    chat = OpenAIChat(server.base_url, "scripted", api_key_env=None)
    q = Question("q2", "How many watts did the A100 GPU draw?", "W")
    server.cite_others_first = True  # the reply lists other context documents before the right one
    retrieval = {"use_planner": False, "top_k_final": 6, "budget_chars": 6000}
    source = answer_question(q, retriever, chat, write_config(settings, "s", server, questions, retrieval))
    enum = response_schema(server.requests[-1].body)["properties"]["ref_id"]["items"]["enum"]
    listed = [d for d in enum if d != "gpu"][:2] + ["gpu"]
    assert len(listed) > 1
    assert source.answer.ref_id == ("gpu",) and source.answer.answer_value == "400"
    reply = answer_question(
        q, retriever, chat, write_config(settings, "r", server, questions, retrieval, {"cite": "reply"})
    )
    assert reply.answer.ref_id == tuple(listed)


def test_cite_hashes_as_before_at_its_legacy_value():
    default = QAConfig(questions="/q.csv")
    legacy = qa_config_from_mapping({"questions": "/q.csv", "generation": {"cite": "reply"}})
    # The generation hash of the default config before `cite` existed (commit bd473d9):
    # stored predictions of that default are reused only by a config that still answers that way.
    # 2026-11-26 moved it once (45f02e1ce7ba5e37 before): ANSWER_FORMAT 3 (the system prompt
    # shared with the true/false verdict) and the defaults without the planner, at 3,000 characters;
    # and again (00954a685517ed22 before): ANSWER_FORMAT 4 (a bare number pair read as a range);
    # 2026-11-28 (fc4642c8aef1ed56 before): ANSWER_FORMAT 5 (a copied rule read as nothing) and
    # max_retries 0 by default; (8f94326578f42941 before): ANSWER_FORMAT 6 and value_form (a value
    # not of the asked form is an abstention); (c54012c946262242 before): CONTEXT_FORMAT 2, a table
    # item carries its record.
    assert legacy.generation_hash == "244e6a3b041901ae"
    assert default.generation_hash != legacy.generation_hash
    assert default.retrieval_hash == legacy.retrieval_hash
    with pytest.raises(ValueError, match="cite"):
        qa_config_from_mapping({"generation": {"cite": "all"}})
