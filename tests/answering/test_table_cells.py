"""Answers read from table cells (`table_cells = "named"`): the reply names a row and a column
of a context table kept as a record (and how the answer follows from up to two cells); the
code reads the cells, converts the column's unit to the question's and computes. The value
the model typed counts only where it names no cell.

The answering runs go through a real OpenAI-compatible HTTP server (tests/support) that
replies as scripted for the exact prompt the pipeline sends.
"""

from __future__ import annotations

import json

import pytest

from kohaku_rag.answering.answer import answer_runs
from kohaku_rag.answering.compute import Working
from kohaku_rag.answering.prediction import prediction_from_row
from kohaku_rag.answering.prompt import answer_request
from kohaku_rag.answering.qa_config import GenerationPart, QAConfig, RetrievalPart
from kohaku_rag.answering.table_cells import reply_fields
from kohaku_rag.answers.records import Question
from kohaku_rag.document.table_record import GROUP_SEP, TableRecord, TableRow, cell_number, column_unit, table_text
from kohaku_rag.llm.openai_compat import OpenAIChat
from kohaku_rag.retrieval.context import ContextItem
from tests.support.chat_server import ChatServer, Fault

ENERGY = TableRecord(
    label="Table 5",
    caption="Table 5. Training energy and cost parity of the BLOOMz models.",
    label_header="",
    columns=("BLOOMz-7B", "BLOOMz-3B", "BLOOMz-560M"),
    rows=(
        TableRow("Training energy (MWh)", ("51.686", "25.48", "7.2")),
        # A citation number printed between the label and the values must not be read.
        TableRow("Inference energy (kWh)", ("0.0491", "0.0371", "0.0226")),
    ),
)
TRAIN = TableRecord(
    label="Table 2",
    caption="Table 2. Energy per 1,000 queries.",
    label_header="task",
    columns=(f"inference energy (kWh){GROUP_SEP}mean", f"inference energy (kWh){GROUP_SEP}std"),
    rows=(TableRow("text generation", ("0.047", "0.03")), TableRow("image generation", ("2.907", "3.31"))),
)


def table_item(doc: str, record: TableRecord, p: int = 2) -> ContextItem:
    return ContextItem(doc, f"{doc}:sec1:p{p}", "paragraph", 6, 1.0, table_text(record), "table", table=record)


CONTEXT = [
    ContextItem("luccioni2024", "luccioni2024:sec1:p1", "paragraph", 5, 1.0, "BLOOMz was trained on 8 GPUs."),
    table_item("luccioni2024", ENERGY),
    table_item("luccioni2023", TRAIN, 3),
]


class Fixed:
    def __init__(self, items: list[ContextItem]) -> None:
        self.items = items

    def search(self, queries, cfg):  # noqa: ANN001, ANN201
        return list(self.items)


def reply(cells: list[dict[str, str]], math: str, value: str, refs: list[str]) -> str:
    return json.dumps(
        {
            "explanation": "from the table",
            "cells": cells,
            "cell_math": math,
            "answer": value,
            "answer_value": value,
            "ref_id": refs,
            "is_blank": False,
        }
    )


def run(question: Question, content: str, items: list[ContextItem] = CONTEXT, **generation: object):  # noqa: ANN201
    gen = GenerationPart(table_cells="named", max_retries=0, **generation)  # type: ignore[arg-type]
    cfg = QAConfig(questions="q.csv", retrieval=RetrievalPart(use_planner=False), generation=gen)
    with ChatServer() as server:
        chat = OpenAIChat(server.base_url, "scripted", api_key_env=None, max_retries=0)
        request = answer_request(question, items, gen, seed=0, fields=reply_fields(question, items, gen))
        server.script(request.messages[-1].content, Fault(content=content))
        (prediction,) = answer_runs(question, [question.question], Fixed(items), chat, cfg, [0])
        sent = server.requests[-1].body
    return prediction, sent


KWH = Question("q1", "How much energy did training BLOOMz-7B take, in kWh?", "kWh")


def test_a_named_cell_is_read_from_the_record_and_put_in_the_questions_unit() -> None:
    cell = {"row": "Table 5: Training energy (MWh)", "column": "BLOOMz-7B"}
    prediction, sent = run(KWH, reply([cell], "a", "51.686", ["luccioni2024"]))
    # The model typed the MWh figure; the cell's column says MWh, the question asks kWh.
    assert prediction.answer.answer_value == "51686"
    assert prediction.answer.answer == "51686 kWh"  # the words say the value read, not the typed one
    assert prediction.answer.ref_id == ("luccioni2024",)
    assert prediction.cited_cells() == ["Table 5 · Training energy (MWh) · BLOOMz-7B = 51.686"]
    # The schema offered exactly the context tables' rows and columns, before the value.
    props = sent["response_format"]["json_schema"]["schema"]["properties"]
    names = list(props)
    assert names.index("cells") < names.index("answer_value")
    cell_schema = props["cells"]["items"]["properties"]
    assert cell_schema["row"]["enum"] == [
        "Table 5: Training energy (MWh)",
        "Table 5: Inference energy (kWh)",
        "Table 2: text generation",
        "Table 2: image generation",
    ]
    assert "BLOOMz-560M" in cell_schema["column"]["enum"]
    assert f"inference energy (kWh){GROUP_SEP}mean" in cell_schema["column"]["enum"]
    assert "cells:" in sent["messages"][-1]["content"]
    # The stored row keeps which cells were read.
    assert prediction_from_row(prediction.as_row()).cited_cells() == prediction.cited_cells()


def test_a_ratio_of_two_cells_is_computed_by_the_code() -> None:
    question = Question("q2", "How many times more training energy did BLOOMz-7B use than BLOOMz-560M?", "ratio")
    cells = [
        {"row": "Table 5: Training energy (MWh)", "column": "BLOOMz-7B"},
        {"row": "Table 5: Training energy (MWh)", "column": "BLOOMz-560M"},
    ]
    prediction, _ = run(question, reply(cells, "a / b", "7", ["luccioni2024"]))
    assert prediction.answer.answer_value == "7.178611111"
    working = Working.from_json(prediction.working)
    assert working is not None and working.expression == "a / b" and working.founded


def test_a_percentage_difference_reads_cells_of_another_table() -> None:
    question = Question("q3", "By what percent is image generation's mean energy above text generation's?", "percent")
    column = f"inference energy (kWh){GROUP_SEP}mean"
    cells = [
        {"row": "Table 2: image generation", "column": column},
        {"row": "Table 2: text generation", "column": column},
    ]
    prediction, _ = run(question, reply(cells, "(a - b) / b * 100", "60", ["luccioni2023"]))
    assert float(prediction.answer.answer_value) == pytest.approx((2.907 - 0.047) / 0.047 * 100, rel=1e-6)
    assert prediction.answer.ref_id == ("luccioni2023",)


def test_a_cell_the_context_lacks_leaves_the_typed_value_and_says_why() -> None:
    cells = [{"row": "Table 9: Training energy", "column": "BLOOMz-7B"}]  # not a context row
    prediction, _ = run(KWH, reply(cells, "a", "51686", ["luccioni2024"]))
    assert prediction.answer.answer_value == "51686"
    working = Working.from_json(prediction.working)
    assert working is not None and not working.result and "no row 'Table 9: Training energy'" in working.error


def test_no_cell_named_keeps_the_typed_value() -> None:
    prediction, _ = run(KWH, reply([], "a", "51686", ["luccioni2024"]))
    assert prediction.answer.answer_value == "51686"
    assert prediction.working == ""


def test_without_a_table_record_the_prompt_is_the_one_without_the_feature() -> None:
    text_only = [CONTEXT[0]]
    on = GenerationPart(table_cells="named")
    off = GenerationPart()
    assert reply_fields(KWH, text_only, on) is None
    assert reply_fields(KWH, CONTEXT, off) is None
    assert reply_fields(Question("q", "True or False: BLOOMz used GPUs.", "is_blank"), CONTEXT, on) is None
    same = answer_request(KWH, text_only, on, seed=0, fields=reply_fields(KWH, text_only, on))
    assert same == answer_request(KWH, text_only, off, seed=0)


def test_a_cells_number_and_a_columns_unit_are_read_one_way() -> None:
    assert cell_number("1,171") == 1171
    assert cell_number("−0.5") == -0.5
    assert cell_number("52.88%") == 52.88
    assert cell_number("3.3×10^18") == pytest.approx(3.3e18)
    assert cell_number("2e−4") == pytest.approx(2e-4)
    assert cell_number("6.43 (6.61±0.16)") == 6.43
    assert cell_number("74%*") == 74
    for not_a_number in ("1,2", "n/a", "GPT-3", "[0.1,0.2]", "175B"):
        assert cell_number(not_a_number) is None, not_a_number
    assert column_unit(TRAIN, TRAIN.columns[0]) == "kWh"
    assert column_unit(ENERGY, "BLOOMz-7B") == ""
    assert column_unit(ENERGY, "Cost in $") == "$"
