"""A fake OpenAI-compatible model for the answering tests: it answers each known question
with its gold value when the gold document is in the context, like a well-behaved model."""

from __future__ import annotations

import json
import re
import shutil
import threading
from pathlib import Path

import pytest

from kohaku_assets.resources import KohakuSettings
from kohaku_rag.answers.records import Question
from kohaku_rag.retrieval.context import ContextItem
from tests.support.chat_server import ChatServer

QUESTIONS = {  # question -> (unit, gold value, gold document)
    "How many tCO2e did training emit?": ("tCO2e", "4.3", "carbon"),
    "How many watts did the A100 GPU draw?": ("W", "400", "gpu"),
    "What was the water usage effectiveness in liters per kWh?": ("L/kWh", "0.18", "water"),
}
_QUESTION = re.compile(r"^Question: (.*)$", re.MULTILINE)
# question -> (cells, cell_math) a reply names when its schema offers table cells (table_cells.py)
CELLS: dict[str, tuple[list[dict[str, str]], str]] = {}
# follow-up -> the standalone question a rewrite request gets back (others come back as asked)
FOLLOW_UPS = {
    "And the water usage effectiveness?": "What was the water usage effectiveness in liters per kWh?",
    "And how many watts did its GPU draw?": "How many watts did the A100 GPU draw?",
}


class QAServer(ChatServer):
    """Answers like a well-behaved model: the gold value when the gold document is in the
    schema's ref_id enum (i.e. in the context), else is_blank. Planner requests get one query."""

    blank_first: dict[str, int]

    def __init__(self) -> None:
        super().__init__()
        self.blank_first = {}
        self.cite_outside = False
        self.cite_others_first = False  # lists the context's other documents before the gold one
        self.wrong_at_temperature: float | None = None  # answers 999 at this temperature
        self.rewrite_fails = False  # a follow-up's rewrite comes back without a question
        self.guard = threading.Lock()

    def kinds(self) -> dict[str, int]:
        counts = {"planner": 0, "answer": 0}
        for r in self.requests:
            counts["answer" if "ref_id" in response_schema(r.body)["properties"] else "planner"] += 1
        return counts

    def _echo(self, body, messages, key):  # noqa: ANN001 - the base class's hook
        schema = response_schema(body)
        question = _QUESTION.search(key).group(1).strip()
        if "queries" in schema["properties"]:
            return json.dumps({"queries": [f"{question.split()[-1]} measurement"]})
        if "ref_id" not in schema["properties"]:  # a follow-up's rewrite into a standalone question
            return json.dumps({"question": "" if self.rewrite_fails else FOLLOW_UPS.get(question, question)})
        unit, value, doc = QUESTIONS[question]
        enum = schema["properties"]["ref_id"]["items"].get("enum", [])
        with self.guard:
            forced_blank = self.blank_first.get(question, 0) > 0
            if forced_blank:
                self.blank_first[question] -= 1
        if forced_blank or doc not in enum:
            return json.dumps(
                {
                    "explanation": "",
                    "answer": "",
                    "answer_value": "",
                    "answer_unit": unit,
                    "ref_id": enum[:1],
                    "is_blank": True,
                }
            )
        refs = [doc, "nonexistent2020"] if self.cite_outside else [doc]
        if self.cite_others_first:
            refs = [*(d for d in enum if d != doc)][:2] + refs
        if body["temperature"] == self.wrong_at_temperature:
            value = "999"
        named = CELLS.get(question) if "cells" in schema["properties"] else None
        return json.dumps(
            {
                "explanation": f"seed {body['seed']} temperature {body['temperature']}",
                **({"cells": named[0], "cell_math": named[1]} if named else {}),
                "answer": f"{value} {unit}",
                "answer_value": value,
                "answer_unit": unit,
                "ref_id": refs,
                "is_blank": False,
            }
        )


def qa_lake(
    built: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, copy_corpus: bool = False
) -> tuple[KohakuSettings, Path]:
    """A per-test copy of an `indexed_corpus` lake (and corpus, when the test edits it), made
    the environment's lake, and a question file of QUESTIONS: (settings, questions path)."""
    lake = tmp_path / "lake"
    shutil.copytree(built / "lake", lake)
    corpus = built / "corpus"
    if copy_corpus:
        corpus = Path(shutil.copytree(corpus, tmp_path / "corpus"))
        monkeypatch.setenv("KOHAKU_CORPUS", str(corpus))
    monkeypatch.setenv("DAGSTER_HOME", str(lake / ".dagster"))
    monkeypatch.setenv("KOHAKU_LAKE", str(lake))
    monkeypatch.delenv("KOHAKU_CONFIGS", raising=False)
    questions = tmp_path / "questions.csv"
    lines = ["id,question,answer,answer_value,answer_unit,ref_id"]
    for i, (q, (unit, value, doc)) in enumerate(QUESTIONS.items(), start=1):
        lines.append(f"q{i},{q},{value} {unit},{value},{unit},['{doc}']")
    questions.write_text("\n".join(lines) + "\n")
    return KohakuSettings(lake_root=str(lake), corpus_dir=str(corpus)), questions


def response_schema(body):
    """The JSON schema an answer or planner request asks the reply to follow."""
    return body["response_format"]["json_schema"]["schema"]


def true_false_case() -> tuple[ContextItem, Question, str]:
    """A false statement, the snippet that refutes it, and a reply that calls it true."""
    item = ContextItem("gpu", "gpu:sec0:p0", "paragraph", 1, 1.0, "The A100 drew 400 W in training runs.")
    statement = Question("q1", "True or False: the A100 drew 300 W.", "is_blank")
    reply = json.dumps(
        {
            "evidence": "The A100 drew 400 W in training runs.",
            "explanation": "it drew",
            "answer": "True",
            "answer_value": "1",
            "ref_id": ["gpu"],
            "is_blank": False,
        }
    )
    return item, statement, reply


_VARIANT = re.compile(r"\s*\[v\d+\]$", re.MULTILINE)


class VariantServer(QAServer):
    """Answers "<known question> [vN]" like the known question: N distinct questions (no
    stored answer, no cached prompt can merge them) that share three facts."""

    def _echo(self, body, messages, key):  # noqa: ANN001 - the base class's hook
        return super()._echo(body, messages, _VARIANT.sub("", key))
