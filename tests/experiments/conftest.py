"""Fixtures of the experiment tests: a lake indexed once per module from the shared corpus,
and per test a copy of it with a question file, a base config and a seeded fake QA server."""

import json
import shutil

import pytest
from corpus_docs import indexed_corpus
from qa_server import QUESTIONS, QAServer

from kohaku_assets.resources import KohakuSettings


class SeededQAServer(QAServer):
    """The well-behaved fake model, except that the seeds in `wrong` answer 999 to the
    questions whose text contains `wrong_question` (so single runs differ by seed)."""

    def __init__(self) -> None:
        super().__init__()
        self.wrong_seeds: set[int] = set()
        self.wrong_question = "watts"

    def _echo(self, body, messages, key):  # noqa: ANN001 - the base class's hook
        reply = super()._echo(body, messages, key)
        data = json.loads(reply)
        wrong = body.get("seed") in self.wrong_seeds and self.wrong_question in key
        if wrong and "answer_value" in data and not data.get("is_blank"):
            data.update(answer="999 W", answer_value="999")
        return json.dumps(data)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return indexed_corpus(tmp_path_factory.mktemp("experiments"))


@pytest.fixture()
def env(built, tmp_path, monkeypatch):
    lake = tmp_path / "lake"
    shutil.copytree(built / "lake", lake)
    corpus = tmp_path / "corpus"
    shutil.copytree(built / "corpus", corpus)
    monkeypatch.setenv("DAGSTER_HOME", str(lake / ".dagster"))
    monkeypatch.setenv("KOHAKU_LAKE", str(lake))
    monkeypatch.setenv("KOHAKU_CORPUS", str(corpus))
    monkeypatch.delenv("KOHAKU_CONFIGS", raising=False)
    questions = tmp_path / "questions.csv"
    lines = ["id,question,answer,answer_value,answer_unit,ref_id"]
    for i, (q, (unit, value, doc)) in enumerate(QUESTIONS.items(), start=1):
        lines.append(f"q{i},{q},{value} {unit},{value},{unit},['{doc}']")
    questions.write_text("\n".join(lines) + "\n")
    settings = KohakuSettings(lake_root=str(lake), corpus_dir=str(corpus))
    with SeededQAServer() as server:
        folder = lake / "configs"
        folder.mkdir(exist_ok=True)
        llm = {"backend": "openai", "model": "scripted", "base_url": server.base_url, "api_key_env": None}
        base = {"questions": str(questions), "retrieval": {"planner_max_queries": 2}, "generation": {"llm": llm}}
        (folder / "base.json").write_text(json.dumps(base))
        yield settings, server, questions
