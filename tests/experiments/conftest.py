"""Fixtures of the experiment tests: a lake indexed once per module from the shared corpus,
and per test a copy of it with a question file, a base config and a seeded fake QA server."""

import json

import pytest

from tests.support.corpus_docs import indexed_corpus
from tests.support.qa_server import QAServer, qa_lake


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
    settings, questions = qa_lake(built, tmp_path, monkeypatch, copy_corpus=True)
    lake = settings.lake.root
    with SeededQAServer() as server:
        folder = lake / "configs"
        folder.mkdir(exist_ok=True)
        llm = {"backend": "openai", "model": "scripted", "base_url": server.base_url, "api_key_env": None}
        base = {
            "questions": str(questions),
            "retrieval": {"use_planner": True, "planner_max_queries": 2},
            "generation": {"llm": llm},
        }
        (folder / "base.json").write_text(json.dumps(base))
        yield settings, server, questions
